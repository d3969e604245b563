#include "dedloc/train/swarm_presence.hpp"

#include <future>
#include <optional>

namespace dedloc::train {

namespace {
constexpr std::string_view kLog = "train";
}  // namespace

SwarmPresence::SwarmPresence(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity,
                             SwarmPresenceOptions options)
    : context_(context), node_(node), identity_(identity), options_(std::move(options)) {
  options_.averaging.run_id = options_.run_id;
  options_.averaging.log = options_.log;
  averager_ = std::make_unique<avg::Averager>(context, node, identity, options_.averaging);
  // A client-mode peer serves too: through its relay, once one takes it (start()).
  avg::StateServerOptions serving;
  serving.run_id = options_.run_id;
  serving.log = options_.log;
  state_server_ = std::make_unique<avg::StateServer>(averager_->server(), serving);
  collab::TrackerOptions tracking;
  tracking.run_id = options_.run_id;
  tracking.target_batch_size = options_.target_batch_size;
  tracking.record_ttl = options_.record_ttl;
  tracking.log = options_.log;
  tracker_ = std::make_unique<collab::ProgressTracker>(node, tracking);
}

SwarmPresence::~SwarmPresence() {
  publisher_.stop();
  tracker_.reset();
  averager_.reset();
}

Status SwarmPresence::start() {
  DEDLOC_RETURN_IF_ERROR(averager_->start().with_context("starting the averaging server"));
  donor_endpoint_ = averager_->dialable_endpoint();
  if (options_.averaging.role == avg::AvgRole::kClient) attach_to_relay();
  return Status();
}

Status SwarmPresence::check_schema(const avg::VectorSchema& schema) {
  auto published = avg::read_schema(node_, options_.run_id, Deadline::after(std::chrono::seconds(10)));
  if (published && published->has_value()) {
    const auto& theirs = **published;
    if (theirs.hash != schema.hash || theirs.length != schema.length) {
      return error(Code::kRefused,
                   "run '" + options_.run_id + "' trains another model: its parameters' schema is " +
                       to_hex(ByteSpan(theirs.hash).first(4)) + "… (" + std::to_string(theirs.length) +
                       " values), this recipe's is " + to_hex(ByteSpan(schema.hash).first(4)) + "… (" +
                       std::to_string(schema.length) + " values): use the run's recipe or another --run-id");
    }
  } else if (published) {
    auto stored = avg::publish_schema(node_, options_.run_id, schema, std::chrono::hours(24),
                                      Deadline::after(std::chrono::seconds(10)));
    if (!stored.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << "could not publish the model schema: " << stored.to_string();
  }
  return Status();
}

void SwarmPresence::attach_to_relay() {
  relay::RelayKeeperOptions keeping = options_.relaying;
  // Forwarded requests reach our averaging server in-process.
  keeping.local_endpoint = averager_->in_process_endpoint();
  keeping.log = options_.log;
  auto keeper = std::make_unique<relay::RelayKeeper>(context_, identity_, &node_, keeping);
  auto attached = keeper->start(Deadline::after(std::chrono::seconds(15)));
  if (!attached.is_ok()) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog)
        << "client mode without a relay (" << attached.message()
        << "): this peer trains and sends its gradients, but nobody can reach it to download its state";
    return;
  }
  relay_keeper_ = std::move(keeper);
  donor_endpoint_ = relay_keeper_->address();
  averager_->set_relay_address(donor_endpoint_);  // our groups ping us there (wire::AvgJoin::relay)
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "reachable through a relay at " << donor_endpoint_;
}

void SwarmPresence::publish_donor_and_metrics(const collab::PeerMetrics& metrics, bool force) {
  if (relay_keeper_) {  // our relay may have changed (the keeper moved us): advertise the new address at once
    auto address = relay_keeper_->address();
    if (!address.empty() && address != donor_endpoint_) {
      donor_endpoint_ = address;
      averager_->set_relay_address(address);
      force = true;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_donor_advert_ < options_.record_ttl / 3) return;
  last_donor_advert_ = now;
  std::optional<avg::DonorInfo> info;
  // Downloaders prefer the faster donors among equally loaded ones: the state a joiner pulls crosses the
  // donor's upload, and on a slow peer that upload is what the swarm's all-reduce waits on (in the lab's
  // part-time run a download from a 12.5 Mbit/s trainer lengthened the round it overlapped by 2-3 s).
  if (!donor_endpoint_.empty()) {
    info = state_server_->donor_info(net::PeerAddress{donor_endpoint_, node_.id()}, avg::donor_priority(options_.averaging.bandwidth));
  }
  // Off the training thread: the stores take a lookup and a store each, at the swarm's round trips.
  publisher_.post([this, info = std::move(info), metrics] {
    const auto deadline = Deadline::after(std::chrono::seconds(3));
    if (info) {
      auto advertised = avg::advertise_donor(node_, options_.run_id, *info, options_.record_ttl, deadline);
      if (!advertised) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "donor advertisement: " << advertised.status().to_string();
    }
    auto stored = collab::publish_metrics(node_, options_.run_id, metrics, options_.record_ttl, deadline);
    if (!stored.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "metrics record: " << stored.to_string();
  });
}

void SwarmPresence::withdraw_records(Deadline deadline) {
  publisher_.stop();  // no metrics record stored after it is withdrawn
  auto metrics = std::async(std::launch::async, [&] {
    return collab::withdraw_metrics(node_, options_.run_id, options_.record_ttl, deadline);
  });
  auto withdrawn = tracker_->withdraw(deadline);
  if (!withdrawn.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "withdrawing progress: " << withdrawn.to_string();
  withdrawn = metrics.get();
  if (!withdrawn.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "withdrawing metrics: " << withdrawn.to_string();
}

}  // namespace dedloc::train
