#include "dedloc/relay/relay_keeper.hpp"

#include <algorithm>

#include "dedloc/relay/relay_directory.hpp"

namespace dedloc::relay {

RelayKeeper::RelayKeeper(zmq::context_t& context, const crypto::Identity& identity, dht::Node* node,
                         RelayKeeperOptions options)
    : context_(context), identity_(identity), node_(node), options_(std::move(options)) {}

RelayKeeper::~RelayKeeper() { stop(); }

Status RelayKeeper::attach_somewhere(Deadline deadline) {
  std::vector<net::PeerAddress> candidates = options_.relays;
  if (node_) {
    auto listed = list_relays(*node_, deadline);
    if (listed) {
      for (const auto& r : *listed) candidates.push_back(r.address);
    } else {
      options_.log->debug("relay") << "listing relays: " << listed.status().to_string();
    }
  }
  for (const auto& r : remembered_) {
    const bool listed = std::any_of(candidates.begin(), candidates.end(),
                                    [&](const net::PeerAddress& c) { return c.to_string() == r.to_string(); });
    if (!listed) candidates.push_back(r);
  }
  if (candidates.empty()) return error(Code::kNotFound, "no relay known: give one with --relay, or start dedloc-relay");
  // The relay we just lost goes last: it may be back, but another is a better bet.
  std::string lost = link_ ? link_->relay().to_string() : "";
  std::stable_partition(candidates.begin(), candidates.end(), [&](const auto& c) { return c.to_string() != lost; });
  std::string refusals;
  for (const auto& candidate : candidates) {
    if (deadline.passed()) break;
    auto link_options = options_.link;
    link_options.relay = candidate;
    link_options.local_endpoint = options_.local_endpoint;
    link_options.log = options_.log;
    auto link = std::make_unique<net::RelayLink>(context_, identity_, link_options);
    auto started = link->start();
    if (started.is_ok()) {
      remember(candidate);
      std::string address = link->address();
      {
        std::lock_guard lock(mutex_);
        if (link_) link_->stop();
        link_ = std::move(link);
        address_ = address;
      }
      if (options_.on_moved) options_.on_moved(address);
      return Status::ok();
    }
    refusals += (refusals.empty() ? "" : "; ") + candidate.to_string() + ": " + started.message();
  }
  return error(Code::kUnavailable, "no relay accepted us: " + refusals);
}

Status RelayKeeper::start(Deadline deadline) {
  DEDLOC_RETURN_IF_ERROR(attach_somewhere(deadline));
  thread_ = std::thread([this] { keep(); });
  return Status::ok();
}

void RelayKeeper::remember(const net::PeerAddress& relay) {
  std::erase_if(remembered_, [&](const net::PeerAddress& r) { return r.to_string() == relay.to_string(); });
  remembered_.insert(remembered_.begin(), relay);
  if (remembered_.size() > kRememberedRelays) remembered_.resize(kRememberedRelays);
}

void RelayKeeper::keep() {
  std::unique_lock lock(mutex_);
  Duration wait = options_.check_interval;
  size_t failures = 0;  // attempts since we lost the relay
  while (!stopping_) {
    wake_.wait_for(lock, wait, [&] { return stopping_; });
    if (stopping_ || (link_ && link_->alive())) continue;
    if (failures == 0) {
      options_.log->warn("relay") << "lost our relay (" << (link_ ? link_->failure().message() : "none")
                                  << "); attaching to another";
    }
    address_.clear();
    lock.unlock();
    auto moved = attach_somewhere(Deadline::after(std::chrono::seconds(10)));
    lock.lock();
    if (moved.is_ok()) {
      if (failures > 0) options_.log->info("relay") << "attached again after " << failures << " failed attempt(s)";
      failures = 0;
      wait = options_.check_interval;
      continue;
    }
    Logger::Line(options_.log, failures == 0 ? LogLevel::kWarning : LogLevel::kDebug, "relay")
        << moved.message() << " (retrying)";
    ++failures;
    wait = std::min(wait * 2, options_.longest_retry);
  }
}

std::string RelayKeeper::address() const {
  std::lock_guard lock(mutex_);
  return address_;
}

void RelayKeeper::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (link_) link_->stop();
}

}  // namespace dedloc::relay
