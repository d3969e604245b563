#include "dedloc/dht/node.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>

#include "dedloc/dht/hand_over.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/dht/revocations.hpp"
#include "dedloc/wire/messages.hpp"

namespace dedloc::dht {

namespace {

constexpr std::string_view kLog = "dht";
// A value reply stays well under the 1 MiB header limit, however many subkeys the record has.
constexpr size_t kMaxReplyValueBytes = 768u << 10;
// Reachability checks run at once on our behalf of others (each dials an endpoint someone gave us).
constexpr int kMaxReachabilityChecks = 16;
// Failed nodes remembered at once (a node of a huge swarm forgets the oldest first).
constexpr size_t kMaxFailedRemembered = 4096;
// When we listen on all interfaces, we advertise the address of the interface that routes to the internet
// (found without sending anything); --announce overrides it.
constexpr const char* kRouteProbeHost = "8.8.8.8";

Contact to_contact(const wire::ContactInfo& info, double now) { return {info.id, info.endpoint, now}; }

std::vector<Contact> to_contacts(const std::vector<wire::ContactInfo>& infos, double now) {
  std::vector<Contact> out;
  out.reserve(infos.size());
  for (const auto& info : infos) {
    // An endpoint whose key is not the id's would have us talk, encrypted, to someone else under that id.
    if (!info.id.is_zero() && net::is_contact_endpoint(info.endpoint, info.id)) {
      out.push_back(to_contact(info, now));
    }
  }
  return out;
}

// What an entry costs a reply: what kMaxReplyValueBytes bounds and NodeStats::entry_bytes_served counts.
size_t entry_bytes(const std::optional<Bytes>& subkey, const Bytes& value, const Bytes& signature) {
  return value.size() + signature.size() + (subkey ? subkey->size() : 0);
}

// The record's entries stored after sequence number `after` (0: all of them), up to a reply's limits;
// `complete` says whether none was left out for those limits.
std::vector<wire::RecordEntry> to_entries(const Record& record, std::uint64_t after = 0, bool* complete = nullptr) {
  std::vector<wire::RecordEntry> out;
  size_t bytes = 0;
  bool all = true;
  auto add = [&](std::optional<Bytes> subkey, const StoredValue& stored) {
    if (stored.seq <= after) return;
    bytes += entry_bytes(subkey, stored.value, stored.signature);
    if (bytes > kMaxReplyValueBytes || out.size() >= wire::kMaxRecordSubkeys) {
      all = false;
      return;
    }
    out.push_back({std::move(subkey), stored.value, stored.expiration, stored.signature});
  };
  if (record.value) add(std::nullopt, *record.value);
  for (const auto& [subkey, stored] : record.subkeys) add(subkey, stored);
  if (complete) *complete = all;
  return out;
}

}  // namespace

struct Node::Answer {
  Contact from;
  Result<net::Incoming> reply;
};

Node::Node(zmq::context_t& context, crypto::Identity identity, NodeOptions options)
    : context_(context),
      identity_(std::move(identity)),
      options_(std::move(options)),
      validator_(options_.validation),
      table_(identity_.peer_id(), options_.bucket_size),
      storage_(options_.storage) {}

Node::~Node() { stop(); }

Status Node::start() {
  if (started_) return Status::ok();
  if (options_.listen.empty() && !options_.client_mode) {
    return error(Code::kInvalidArgument, "a DHT node without a listen address must run in client mode");
  }
  net::resolve_process_defaults(options_.socket);
  net::ClientOptions client_options;
  client_options.self = id();
  client_options.socket = options_.socket;
  client_options.idle_close = options_.idle_connection_close;
  client_options.max_connections = options_.max_connections;
  client_options.log = options_.log;
  // With datagrams, ZeroMQ carries only what does not fit in one and the calls to a port that answered "port
  // unreachable": a node that takes no datagrams, or one whose process is gone (its machine answers for both
  // ports). The second refuses the connection, and its calls fail then, instead of waiting out their
  // deadlines while ZeroMQ retries it ten times a second. There are few such connections, so watching each
  // (two more sockets) costs little; without datagrams a node talks to a stream of peers over ZeroMQ.
  client_options.fail_when_refused = options_.datagrams;
  try {
    client_ = std::make_unique<net::Client>(context_, client_options);
  } catch (const std::system_error& e) {
    return error(Code::kUnavailable, std::string("cannot start a DHT node: ") + e.what());
  }

  if (options_.datagrams) {
    net::DatagramOptions datagram_options;
    datagram_options.self = id();
    datagram_options.socket = options_.socket;
    datagram_options.log = options_.log;
    datagram_options.clock = options_.clock;
    datagram_options.max_datagram_bytes = options_.max_datagram_bytes;
    datagrams_ = std::make_unique<net::DatagramRpc>(datagram_options, *client_);
  }
  if (!options_.listen.empty()) {
    DEDLOC_RETURN_IF_ERROR(start_serving());
    advertised_ = options_.announce.empty() ? net::dialable_endpoint(server_->endpoint(), kRouteProbeHost)
                                            : server_->advertise(options_.announce);
  } else if (datagrams_) {
    // A client-mode node: a port of its own to ask from, answering nobody.
    DEDLOC_RETURN_IF_ERROR(datagrams_->start("0.0.0.0", 0, /*serve=*/false));
  }
  started_ = true;
  if (options_.maintenance_interval > Duration::zero()) maintenance_ = std::thread([this] { maintenance_loop(); });
  if (auto access = options_.socket.access; access && options_.revocation_refresh > Duration::zero()) {
    revocation_watch_ = std::thread([this, access] { revocation_loop(access); });
  }
  // A one-shot client (no server) is a command-line tool's helper: its life story is debug detail.
  LogLevel level = server_ ? LogLevel::kInfo : LogLevel::kDebug;
  Logger::Line(options_.log, level, kLog) << "node " << id().short_string() << (options_.client_mode ? " (client mode)" : "")
                           << (advertised_.empty() ? std::string() : " at " + advertised_);
  return Status::ok();
}

Status Node::start_serving() {
  net::ServerOptions server_options;
  server_options.listen = options_.listen;
  server_options.self = id();
  server_options.socket = options_.socket;
  server_options.log = options_.log;
  server_options.clock = options_.clock;
  const auto listen = net::parse_tcp_endpoint(options_.listen);
  const bool any_port = listen && listen->port == 0;
  // With port 0 the kernel picks a free TCP port, whose UDP twin is almost always free too; a few tries.
  constexpr int kTries = 8;
  for (int attempt = 1;; ++attempt) {
    server_ = std::make_unique<net::Server>(context_, server_options);
    install_handlers();
    DEDLOC_RETURN_IF_ERROR(server_->start());
    if (!datagrams_) return Status::ok();
    const auto bound = net::parse_tcp_endpoint(server_->endpoint());
    in_addr ipv4{};
    if (!bound || inet_pton(AF_INET, bound->host.c_str(), &ipv4) != 1) {
      // Not an IPv4 address (an IPv6 or inproc:// listen): every RPC over ZeroMQ.
      Logger::Line(options_.log, LogLevel::kInfo, kLog) << "no datagrams on " << server_->endpoint()
                                                       << " (not an IPv4 address): the DHT talks over ZeroMQ only";
      datagrams_.reset();
      return Status::ok();
    }
    Status bound_udp = datagrams_->start(bound->host, bound->port, /*serve=*/true);
    if (bound_udp.is_ok() || !any_port || attempt == kTries) return bound_udp;
    server_->stop();
  }
}

void Node::stop() {
  {
    std::lock_guard lock(maintenance_mutex_);
    if (stopping_.exchange(true)) return;
  }
  maintenance_wake_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  if (revocation_watch_.joinable()) revocation_watch_.join();
  if (server_) server_->stop();
  // Fails its calls in flight with kCancelled; calls made after it go over client_.
  if (datagrams_) datagrams_->stop();
  // Fails our calls in flight with kCancelled and never waits on remote peers. Destroyed while client_ still
  // points at it: completions on its loop thread (where lookups are driven, LookupRun) may still reach it
  // until that thread has stopped, and it cancels what they send.
  delete client_.get();
  (void)client_.release();
}

// ---------------------------------------------------------------------------------------------------------
// Answering other nodes

void Node::install_handlers() {
  serve<wire::DhtFindNode>([this](wire::DhtFindNode&& m, net::Incoming&& request, net::Replier replier) {
    note_sender(request.envelope().sender, m.sender_endpoint);
    replier.reply(wire::DhtNodes{nearest_infos(m.target)});
  });

  serve<wire::DhtFindValue>([this](wire::DhtFindValue&& m, net::Incoming&& request, net::Replier replier) {
    note_sender(request.envelope().sender, m.sender_endpoint);
    wire::DhtValue reply;
    {
      std::lock_guard lock(mutex_);
      const StorageCursor cursor = storage_.cursor();
      // A reader that read us before gets what was stored since (read_cache.hpp), and where this read ends.
      const std::uint64_t after = m.since_instance == cursor.instance ? m.since_seq : 0;
      bool complete = true;
      if (auto record = storage_.get(m.key, now())) {
        reply.entries = to_entries(*record, after, &complete);
        reply.held = (record->value ? 1 : 0) + record->subkeys.size();
      }
      // An answer cut at the reply's limits earns no cursor: the reader asks for everything again.
      if (complete) {
        reply.instance = cursor.instance;
        reply.seq = cursor.seq;
      }
    }
    reply.nearest = nearest_infos(m.key);
    entries_served_ += reply.entries.size();
    for (const auto& e : reply.entries) entry_bytes_served_ += entry_bytes(e.subkey, e.value, e.signature);
    replier.reply(reply);
  });

  serve<wire::DhtStore>([this](wire::DhtStore&& m, net::Incoming&& request, net::Replier replier) {
    note_sender(request.envelope().sender, m.sender_endpoint);
    Status stored = store_locally(m.key_name, m.entry);
    if (!stored.is_ok()) return replier.fail(stored);
    replier.reply(wire::DhtStored{nearest_infos(key_id(m.key_name))});
  });

  serve<wire::DhtListPeers>([this](wire::DhtListPeers&& m, net::Incoming&&, net::Replier replier) {
    wire::DhtPeerList reply;
    reply.endpoint = advertised_;
    size_t limit = std::min<std::uint64_t>(m.max_contacts, wire::kMaxPeerListContacts);
    for (const auto& contact : contacts()) {
      if (reply.contacts.size() >= limit) break;
      reply.contacts.push_back({contact.id, contact.endpoint, contact.last_seen});
    }
    reply.stored_keys = stored_keys();
    replier.reply(reply);
  });

  serve<wire::DhtCheckReachable>(
      [this](wire::DhtCheckReachable&& m, net::Incoming&& request, net::Replier replier) {
        check_reachable(m.endpoint, request.envelope().sender, std::move(replier));
      });
}

std::vector<wire::ContactInfo> Node::nearest_infos(const PeerId& target) const {
  std::vector<wire::ContactInfo> out;
  std::lock_guard lock(mutex_);
  for (const auto& contact : table_.nearest(target, std::min(options_.bucket_size, wire::kMaxDhtContacts))) {
    out.push_back({contact.id, contact.endpoint, 0});
  }
  return out;
}

Status Node::store_locally(const std::string& key_name, const wire::RecordEntry& entry) {
  double t = now();
  DEDLOC_RETURN_IF_ERROR(validator_.validate(key_name, entry, t));
  std::lock_guard lock(mutex_);
  auto stored = storage_.store(key_id(key_name), entry.subkey, StoredValue{entry.value, entry.expiration, entry.signature},
                               t, key_name);
  if (!stored) return stored.status();
  return Status::ok();
}

void Node::note_sender(const crypto::PeerId& id, const std::string& endpoint) {
  // Client-mode nodes send no endpoint and stay out of routing tables; so does anything we cannot dial.
  if (endpoint.empty() || id.is_zero() || id == this->id() || endpoint.size() > wire::kMaxEndpointBytes) return;
  if (!net::is_contact_endpoint(endpoint, id)) return;
  note_alive(Contact{id, endpoint, now()}, Heard::kWrote);
}

void Node::note_alive(const Contact& contact, Heard how) {
  std::optional<Contact> oldest;
  bool added = false;
  {
    std::lock_guard lock(mutex_);
    failed_.erase(contact.id);
    way_back_.answered(contact.id);
    bool known = table_.find(contact.id).has_value();
    oldest = table_.update(contact);
    added = !known && table_.find(contact.id).has_value();
    if (oldest && (pinging_.contains(oldest->id) || !client_)) oldest.reset();
    if (oldest) pinging_.insert(oldest->id);
  }
  if (added) hand_over(contact, how);
  if (!oldest) return;
  // The bucket is full: keep its oldest contact if it still answers (long-lived nodes are the most reliable,
  // and this resists floods of fresh ids); otherwise the newcomer, waiting in the replacement cache, takes over.
  caller().call(oldest->endpoint, net::Outgoing::of(wire::Ping{now()}), Deadline::after(options_.rpc_timeout),
                [this, contact = *oldest](Result<net::Incoming>&& reply) {
                  bool alive = reply && reply->envelope().sender == contact.id;
                  {
                    std::lock_guard lock(mutex_);
                    pinging_.erase(contact.id);
                  }
                  if (alive) {
                    std::lock_guard lock(mutex_);
                    table_.update(Contact{contact.id, contact.endpoint, now()});
                  } else {
                    note_dead(contact.id);
                  }
                });
}

void Node::hand_over(const Contact& newcomer, Heard how) {
  if (!options_.hand_over || !client_ || !server_ || options_.client_mode || stopping_) return;
  auto entries = entries_to_hand_over(newcomer.id);
  if (entries.empty()) return;
  auto send = [this, newcomer, entries = std::move(entries)]() mutable {
    if (stopping_) return;
    for (auto& [name, entry] : entries) {
      send_rpc(newcomer, net::Outgoing::of(wire::DhtStore{name, std::move(entry), sender_endpoint()}),
               Deadline::after(options_.rpc_timeout), [](Answer&&) {});
    }
    entries_handed_over_ += entries.size();
    options_.log->debug(kLog) << "handed " << entries.size() << " entries over to newcomer "
                              << newcomer.id.short_string();
  };
  if (how == Heard::kAnswered) return send();
  // It wrote to us, and anyone can write any endpoint in a request: we ping it first, and only the node
  // holding the endpoint's key can answer (send_rpc checks who did), so a forged endpoint draws one ping from
  // us, not our records.
  send_rpc(newcomer, net::Outgoing::of(wire::Ping{now()}), Deadline::after(options_.rpc_timeout),
           [send = std::move(send)](Answer&& answer) mutable {
             if (answer.reply) send();
           });
}

std::vector<std::pair<std::string, wire::RecordEntry>> Node::entries_to_hand_over(const PeerId& newcomer) {
  std::vector<std::pair<std::string, wire::RecordEntry>> entries;
  std::lock_guard lock(mutex_);
  double t = now();
  for (const auto& key : storage_.live_keys(t)) {
    if (!hands_over(table_, key, newcomer, options_.replicas)) continue;
    auto record = storage_.get(key, t);
    if (!record || record->name.empty()) continue;  // a record stored without its name cannot be re-stored
    for (auto& entry : to_entries(*record)) entries.emplace_back(record->name, std::move(entry));
  }
  return entries;
}

void Node::note_dead(const PeerId& id) {
  std::lock_guard lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  auto it = failed_.find(id);
  if (it != failed_.end() && now - it->second.last >= options_.failed_node_memory) it->second.strikes = 0;
  if (it == failed_.end()) {
    if (failed_.size() >= kMaxFailedRemembered) {
      auto oldest = std::min_element(failed_.begin(), failed_.end(),
                                     [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
      failed_.erase(oldest);
    }
    it = failed_.emplace(id, Failure{}).first;
  }
  it->second.last = now;
  // One missed deadline may be a busy machine, not a dead node: only a second strike (with no answer in
  // between) drops it from the table and from our lookups. A crashed node collects both within a lookup
  // or two; an overloaded one answers the next time and keeps its place.
  if (++it->second.strikes < kStrikesToDrop) return;
  if (auto contact = table_.find(id)) way_back_.dropped(*contact);
  table_.mark_dead(id);
}

void Node::note_stalled(const PeerId& id) {
  std::lock_guard lock(mutex_);
  auto it = failed_.find(id);
  if (it != failed_.end()) return;  // already failing: its strikes and time stand
  if (failed_.size() >= kMaxFailedRemembered) return;  // a slow node is worth less memory than a dead one
  // No strike (a slow node is not a dead one): other lookups just do not wait for it until it answers.
  failed_.emplace(id, Failure{std::chrono::steady_clock::now(), 0});
}

bool Node::suspected(const PeerId& id) const {
  auto it = failed_.find(id);
  return it != failed_.end() && std::chrono::steady_clock::now() - it->second.last < options_.failed_node_memory;
}

bool Node::recently_failed(const PeerId& id) {
  auto it = failed_.find(id);
  if (it == failed_.end()) return false;
  if (std::chrono::steady_clock::now() - it->second.last < options_.failed_node_memory) {
    return it->second.strikes >= kStrikesToDrop;
  }
  failed_.erase(it);
  return false;
}

void Node::check_reachable(const std::string& endpoint, const crypto::PeerId& expected, net::Replier replier) {
  if (!net::parse_tcp_endpoint(endpoint)) {
    return replier.reply(wire::DhtReachability{false, "'" + endpoint + "' is not a tcp://HOST:PORT endpoint"});
  }
  if (reachability_checks_.fetch_add(1) >= kMaxReachabilityChecks) {
    --reachability_checks_;
    return replier.fail(error(Code::kRefused, "too many reachability checks in progress; try again"));
  }
  auto timeout = options_.rpc_timeout;
  caller().call(endpoint, net::Outgoing::of(wire::Ping{now()}), Deadline::after(timeout),
                [this, endpoint, expected, timeout, replier](Result<net::Incoming>&& reply) {
                  --reachability_checks_;
                  wire::DhtReachability answer;
                  if (!reply) {
                    answer.detail = "no answer from " + endpoint + " within " + std::to_string(to_ms(timeout)) +
                                    " ms (" + reply.status().message() + ")";
                  } else if (reply->envelope().sender != expected) {
                    answer.detail = endpoint + " answered as peer " + reply->envelope().sender.short_string() +
                                    ", not as " + expected.short_string();
                  } else {
                    answer.reachable = true;
                  }
                  replier.reply(answer);
                });
}

// ---------------------------------------------------------------------------------------------------------
// Asking other nodes

void Node::send_rpc(const Contact& to, net::Outgoing request, Deadline deadline, std::function<void(Answer&&)> deliver) {
  send_rpc(caller(), to, std::move(request), deadline, std::move(deliver));
}

net::Caller& Node::caller() { return datagrams_ ? static_cast<net::Caller&>(*datagrams_) : *client_; }

void Node::send_rpc(net::Caller& client, const Contact& to, net::Outgoing request, Deadline deadline,
                    std::function<void(Answer&&)> deliver) {
  Deadline rpc_deadline{std::min(deadline.at, Deadline::after(options_.rpc_timeout).at)};
  auto sent = std::chrono::steady_clock::now();
  ++rpcs_sent_;
  client.call(to.endpoint, std::move(request), rpc_deadline,
              [this, to, sent, deliver = std::move(deliver)](Result<net::Incoming>&& reply) {
                std::int64_t waited = (std::chrono::steady_clock::now() - sent).count();
                std::int64_t longest = longest_rpc_wait_ns_.load();
                while (waited > longest && !longest_rpc_wait_ns_.compare_exchange_weak(longest, waited)) {
                }
                // A reply must come from the node we meant to ask: another process on that port is not it.
                if (reply && reply->envelope().sender != to.id) {
                  reply = error(Code::kRefused, to.endpoint + " answered as peer " +
                                                    reply->envelope().sender.short_string() + ", not " +
                                                    to.id.short_string());
                }
                if (reply) {
                  // It answers after all (perhaps after the lookup stopped waiting): wait for it again.
                  std::lock_guard lock(mutex_);
                  failed_.erase(to.id);
                } else {
                  ++rpcs_failed_;
                  // A silent or dead node is remembered (and after two strikes leaves our table) even when the
                  // lookup that asked it finished without it; a node that said no (or is shutting down) is not.
                  Code code = reply.status().code();
                  if (code == Code::kTimeout || code == Code::kUnavailable) note_dead(to.id);
                }
                deliver(Answer{to, std::move(reply)});
              });
}

// One lookup in progress, shared by the caller's thread and the RPC completions on the client's loop thread.
// Answers are read where they arrive, on the loop thread, which sends the next queries from there: an RPC
// round then costs no wake-up of the caller and no hand-over back to the loop (an RPC on loopback crosses
// six threads, and these were two of them). The caller sleeps until the lookup is done, waking only to
// hand a stalled query's slot to the next candidate, or at its deadline.
struct Node::LookupRun {
  LookupRun(Lookup l, net::Caller& c, const RequestMaker& m, const AnswerReader& r, Deadline d)
      : lookup(std::move(l)), client(c), make_request(m), read(r), deadline(d) {}

  std::mutex mutex;  // guards everything below, and the caller's state that make_request and read touch
  std::condition_variable wake;  // the caller waits on it
  Lookup lookup;
  // Alive until the loop thread has stopped (the node destroys the client in place), so completions may send
  // through it while the node stops; whatever they send then is cancelled.
  net::Caller& client;
  // The caller's, valid until it returns from run_lookup: never called once `closed`.
  const RequestMaker& make_request;
  const AnswerReader& read;
  Deadline deadline;
  bool finished = false;  // done, or nobody left to ask: the caller may return
  bool closed = false;    // the caller returned: answers still coming are dropped
};

void Node::advance(const std::shared_ptr<LookupRun>& run) {
  // Under run->mutex.
  if (run->finished) return;
  auto& lookup = run->lookup;
  if (stopping_) {
    run->finished = true;
    return;
  }
  auto steady_now = std::chrono::steady_clock::now();
  for (const auto& slow : lookup.stall_overdue(steady_now)) note_stalled(slow);
  for (const auto& contact : lookup.next_queries(steady_now)) {
    send_rpc(run->client, contact, run->make_request(contact), run->deadline,
             [this, run](Answer&& answer) { on_lookup_answer(run, std::move(answer)); });
  }
  if (lookup.done() || lookup.in_flight() + lookup.stalled() == 0) run->finished = true;
}

void Node::on_lookup_answer(const std::shared_ptr<LookupRun>& run, Answer&& answer) {
  std::unique_lock guard(run->mutex);
  if (run->closed || run->finished) return;
  auto& lookup = run->lookup;
  // (A silent or dead node was noted as failing by send_rpc, whether or not we still wait for it.)
  auto contacts = run->read(answer.from, answer.reply, lookup);
  if (!contacts) {
    lookup.on_failure(answer.from.id);
  } else {
    note_alive(Contact{answer.from.id, answer.from.endpoint, now()});
    {
      std::lock_guard lock(mutex_);
      std::erase_if(*contacts, [&](const Contact& c) { return recently_failed(c.id); });
      for (const auto& c : *contacts) {
        if (suspected(c.id)) lookup.suspect(c.id);
      }
    }
    lookup.on_answer(answer.from.id, *contacts, std::chrono::steady_clock::now());
  }
  advance(run);
  const bool finished = run->finished;
  guard.unlock();
  if (finished) run->wake.notify_one();
}

void Node::find_way_back(Deadline deadline) {
  std::vector<net::PeerAddress> due;
  {
    std::lock_guard lock(mutex_);
    if (table_.size() > 0 || !client_) return;
    due = way_back_.take_due(std::chrono::steady_clock::now(), options_.rpc_timeout);
  }
  if (due.empty()) return;
  options_.log->info(kLog) << "no DHT contact left (each missed its deadlines): asking the " << due.size()
                           << " we knew last and joined through";
  // Each outcome is pushed (true: it answered, as itself, and is back in the table); the first success ends
  // the wait, and the lookup that follows refills the table from its answers.
  auto outcomes = std::make_shared<BlockingQueue<bool>>();
  const Deadline round{std::min(deadline.at, Deadline::after(options_.rpc_timeout).at)};
  for (const auto& peer : due) {
    caller().call(peer.endpoint, net::Outgoing::of(wire::Ping{now()}), round,
                  [this, outcomes, peer](Result<net::Incoming>&& reply) {
                    const bool back = reply && reply->decode<wire::Pong>().is_ok() &&
                                      (!peer.peer_id || reply->envelope().sender == *peer.peer_id);
                    if (back) note_alive(Contact{reply->envelope().sender, peer.endpoint, now()});
                    outcomes->push(back);
                  });
  }
  for (size_t i = 0; i < due.size(); ++i) {
    auto back = outcomes->pop(round);
    if (!back) break;
    if (*back) {
      options_.log->info(kLog) << "found the DHT again";
      return;
    }
  }
  options_.log->debug(kLog) << "none of them answered yet";
}

Lookup Node::run_lookup(const PeerId& target, const RequestMaker& make_request,
                        const AnswerReader& read, Deadline deadline, bool for_value) {
  find_way_back(deadline);
  std::vector<Contact> seeds;
  std::vector<PeerId> suspects;
  {
    std::lock_guard lock(mutex_);
    seeds = table_.nearest(target, options_.bucket_size);
    for (const auto& c : seeds) {
      if (suspected(c.id)) suspects.push_back(c.id);
    }
  }
  Lookup lookup(target, id(), seeds,
                LookupOptions{.k = options_.lookup_k,
                              .alpha = options_.alpha,
                              .stall_after = options_.rpc_stall_timeout,
                              .min_stall_after = options_.rpc_min_stall_timeout,
                              .wait_for_nearest = for_value});
  for (const auto& id : suspects) lookup.suspect(id);
  auto run = std::make_shared<LookupRun>(std::move(lookup), caller(), make_request, read, deadline);
  // The stall time may shrink once the first answers come (lookup.hpp), after the caller chose when to wake:
  // it wakes at least this often while queries are in flight, to hand on a slot that stalled meanwhile.
  const Duration recheck = options_.rpc_min_stall_timeout > Duration::zero() ? options_.rpc_min_stall_timeout
                                                                             : options_.rpc_stall_timeout;
  std::unique_lock guard(run->mutex);
  advance(run);
  while (!run->finished) {
    TimePoint wake = std::min(deadline.at, run->lookup.next_stall());
    if (recheck > Duration::zero()) wake = std::min(wake, std::chrono::steady_clock::now() + recheck);
    run->wake.wait_until(guard, wake);
    if (run->finished) break;
    if (deadline.passed()) break;  // the caller's deadline
    advance(run);
  }
  run->closed = true;
  return std::move(run->lookup);
}

std::vector<Contact> Node::replica_set(const PeerId& key, Deadline deadline) {
  auto lookup = run_lookup(
      key, [&](const Contact&) { return net::Outgoing::of(wire::DhtFindNode{key, sender_endpoint()}); },
      [&](const Contact&, const Result<net::Incoming>& reply, Lookup&) -> Result<std::vector<Contact>> {
        if (!reply) return reply.status();
        auto nodes = reply->decode<wire::DhtNodes>();
        if (!nodes) return nodes.status();
        return to_contacts(nodes->nearest, now());
      },
      deadline);
  auto nearest = lookup.nearest_answered(options_.replicas);
  if (server_ && !options_.client_mode) nearest.push_back(Contact{id(), advertised_, now()});
  std::sort(nearest.begin(), nearest.end(),
            [&](const Contact& a, const Contact& b) { return closer_to(key, a.id, b.id); });
  if (nearest.size() > options_.replicas) nearest.resize(options_.replicas);
  return nearest;
}

Result<StoreResult> Node::store_on(const std::vector<Contact>& targets, const std::string& key_name,
                                   const wire::RecordEntry& entry, Deadline deadline) {
  StoreResult result;
  std::optional<Status> first_refusal;
  auto inbox = std::make_shared<Inbox>();
  size_t outstanding = 0;
  for (const auto& target : targets) {
    ++result.attempted;
    if (target.id == id()) {
      Status local = store_locally(key_name, entry);
      if (local.is_ok()) ++result.stored;
      else if (!first_refusal) first_refusal = local;
      continue;
    }
    send_rpc(target, net::Outgoing::of(wire::DhtStore{key_name, entry, sender_endpoint()}), deadline,
             [inbox](Answer&& answer) { inbox->push(std::move(answer)); });
    ++outstanding;
  }
  for (; outstanding > 0; --outstanding) {
    auto answer = inbox->pop(deadline);
    if (!answer) break;
    if (answer->reply && answer->reply->type() == wire::DhtStored::kType) {
      ++result.stored;
    } else if (!first_refusal) {
      first_refusal = answer->reply ? error(Code::kMalformed, "unexpected reply to a store") : answer->reply.status();
    }
  }
  if (result.stored == 0) {
    if (targets.empty()) return error(Code::kUnavailable, "no DHT node to store on (not bootstrapped?)");
    if (first_refusal) return first_refusal->with_context("no replica stored '" + key_name + "'");
    return error(Code::kTimeout, "no replica of '" + key_name + "' answered before the deadline");
  }
  return result;
}

Result<StoreResult> Node::store(const std::string& key_name, const std::optional<Bytes>& subkey, Bytes value,
                                double expiration, Deadline deadline) {
  if (!client_) return error(Code::kUnavailable, "the DHT node is not started");
  if (key_name.empty() || key_name.size() > wire::kMaxKeyNameBytes) {
    return error(Code::kInvalidArgument, "a key name must have 1 to " + std::to_string(wire::kMaxKeyNameBytes) + " bytes");
  }
  wire::RecordEntry entry{subkey, std::move(value), expiration, {}};
  DEDLOC_RETURN_IF_ERROR(sign_entry(identity_, key_name, entry));
  // Refuse here what every replica would refuse, with the reason, before any network traffic.
  DEDLOC_RETURN_IF_ERROR(validator_.validate(key_name, entry, now()));

  PeerId key = key_id(key_name);
  StoreResult result;
  std::optional<Status> first_refusal;
  std::vector<Contact> refusers;  // nodes that answered no (not the silent ones)
  auto lookup = run_lookup(
      key,
      [&](const Contact&) {
        ++result.attempted;
        return net::Outgoing::of(wire::DhtStore{key_name, entry, sender_endpoint()});
      },
      [&](const Contact& from, const Result<net::Incoming>& reply, Lookup&) -> Result<std::vector<Contact>> {
        auto stored = reply ? reply->decode<wire::DhtStored>() : Result<wire::DhtStored>(reply.status());
        if (!stored) {
          if (!first_refusal) first_refusal = stored.status();
          if (stored.status().code() == Code::kRefused || stored.status().code() == Code::kUnauthorized) {
            refusers.push_back(from);
          }
          return stored.status();
        }
        ++result.stored;
        return to_contacts(stored->nearest, now());
      },
      deadline);
  // We keep a copy too when we are among the nearest nodes to the key.
  auto nearest = lookup.nearest_answered(options_.replicas);
  // If replicas nearest the key refused (they hold a newer value, or the entry is not ours to write), the
  // store failed, whatever nodes met on the way accepted: those copies are strays a newer value outlives.
  if (!refusers.empty()) {
    std::vector<Contact> replicas = nearest;
    replicas.insert(replicas.end(), refusers.begin(), refusers.end());
    std::sort(replicas.begin(), replicas.end(), [&](const Contact& a, const Contact& b) { return closer_to(key, a.id, b.id); });
    if (replicas.size() > options_.replicas) replicas.resize(options_.replicas);
    for (const auto& r : replicas) {
      for (const auto& refuser : refusers) {
        if (r.id == refuser.id) return first_refusal->with_context("the nodes nearest '" + key_name + "' refused it");
      }
    }
  }
  if (server_ && !options_.client_mode &&
      (nearest.size() < options_.replicas || closer_to(key, id(), nearest.back().id))) {
    ++result.attempted;
    Status local = store_locally(key_name, entry);
    if (local.is_ok()) ++result.stored;
    else if (!first_refusal) first_refusal = local;
  }
  if (result.stored > 0) return result;
  if (first_refusal) return first_refusal->with_context("no node stored '" + key_name + "'");
  if (result.attempted == 0) return error(Code::kUnavailable, "no DHT node to store on (not bootstrapped?)");
  return error(Code::kTimeout, "no node stored '" + key_name + "' before the deadline");
}

Result<std::optional<FoundRecord>> Node::get(const std::string& key_name, GetMode mode, Deadline deadline) {
  if (!client_) return error(Code::kUnavailable, "the DHT node is not started");
  PeerId key = key_id(key_name);
  // The newest valid entry per subkey (nullopt: the plain value), over every node that answered.
  std::map<std::optional<Bytes>, FoundEntry> merged;
  size_t answered = 0;
  auto merge = [&](const wire::RecordEntry& entry) {
    auto& slot = merged[entry.subkey];
    if (entry.expiration > slot.expiration) slot = FoundEntry{entry.subkey, entry.value, entry.expiration};
  };
  double t = now();
  {
    std::lock_guard lock(mutex_);
    if (auto record = storage_.get(key, t)) {
      for (auto& entry : to_entries(*record)) merge(entry);
      ++answered;
    }
  }
  // A latest-value read asks each replica only for what it stored since our last read there, and merges
  // that with what we kept from the earlier reads (read_cache.hpp).
  const bool incremental = mode == GetMode::kLatest;
  ReadCache::View cached;
  if (incremental) {
    std::lock_guard lock(read_cache_mutex_);
    cached = read_cache_.begin(key, t);
  }
  std::map<PeerId, StorageCursor> cursors;  // where this read's answers ended, per replica
  size_t asked = 0;   // requests the lookup sent
  bool heard = false;  // whether any node answered at all (with or without the record)
  if (answered == 0 || mode == GetMode::kLatest) {
    auto search = run_lookup(
        key,
        [&](const Contact& to) {
          ++asked;
          wire::DhtFindValue find{key, sender_endpoint()};
          if (auto cursor = cached.cursors.find(to.id); cursor != cached.cursors.end()) {
            find.since_instance = cursor->second.instance;
            find.since_seq = cursor->second.seq;
          }
          return net::Outgoing::of(find);
        },
        [&](const Contact& from, const Result<net::Incoming>& reply, Lookup& lookup) -> Result<std::vector<Contact>> {
          if (!reply) return reply.status();
          auto value = reply->decode<wire::DhtValue>();
          if (!value) return value.status();
          size_t valid = 0;
          for (const auto& entry : value->entries) {
            // A replica may be hostile: keep only entries that pass the same checks a store would.
            if (entry.expiration > t && validator_.validate(key_name, entry, t).is_ok()) {
              merge(entry);
              ++valid;
            }
          }
          if (value->instance != 0) cursors[from.id] = StorageCursor{value->instance, value->seq};
          // A replica with nothing new for us still holds the record.
          if (valid > 0 || (value->instance != 0 && value->held > 0)) {
            ++answered;
            if (mode == GetMode::kFirst) lookup.finish();
          }
          return to_contacts(value->nearest, now());
        },
        deadline, /*for_value=*/true);
    heard = !search.nearest_answered(1).empty();
  }
  if (incremental && heard) {
    // What the cursors we sent stand for; and for the next read, what this one saw.
    for (const auto& entry : cached.entries) merge(entry);
    std::vector<wire::RecordEntry> seen;
    seen.reserve(merged.size());
    for (const auto& [subkey, entry] : merged) seen.push_back({entry.subkey, entry.value, entry.expiration, {}});
    std::lock_guard lock(read_cache_mutex_);
    read_cache_.end(key, seen, cursors, t);
  }
  if (merged.empty()) {
    // "Nobody holds it" only when somebody said so (or there is nobody to ask): silence from every node
    // asked is an outage, and a caller must not take it for an empty record (no donors, no revocations).
    if (asked > 0 && !heard) {
      return error(deadline.passed() ? Code::kTimeout : Code::kUnavailable,
                   "no DHT node answered a lookup of '" + key_name + "' (" + std::to_string(asked) + " asked)");
    }
    return std::optional<FoundRecord>();
  }
  FoundRecord record;
  record.answered = answered;
  // A plain value and a dictionary under one key: whichever expires later is the record (as storage does).
  auto plain = merged.find(std::nullopt);
  double dict_expiration = 0;
  for (const auto& [subkey, entry] : merged) {
    if (subkey) dict_expiration = std::max(dict_expiration, entry.expiration);
  }
  if (plain != merged.end() && plain->second.expiration >= dict_expiration) {
    record.entries.push_back(plain->second);
  } else {
    for (auto& [subkey, entry] : merged) {
      if (subkey) record.entries.push_back(std::move(entry));
    }
  }
  return std::optional<FoundRecord>(std::move(record));
}

size_t Node::republish(Deadline deadline) {
  if (!client_) return 0;
  std::vector<std::pair<std::string, std::vector<wire::RecordEntry>>> held;
  {
    std::lock_guard lock(mutex_);
    double t = now();
    storage_.purge(t);
    for (const auto& key : storage_.live_keys(t)) {
      auto record = storage_.get(key, t);
      if (record && !record->name.empty()) held.emplace_back(record->name, to_entries(*record));
    }
  }
  size_t restored = 0;
  for (const auto& [name, entries] : held) {
    if (deadline.passed() || stopping_) break;
    auto targets = replica_set(key_id(name), deadline);
    for (const auto& entry : entries) {
      auto result = store_on(targets, name, entry, deadline);
      if (result && result->stored > 0) ++restored;
    }
  }
  options_.log->debug(kLog) << "republished " << restored << " entries of " << held.size() << " keys";
  return restored;
}

// ---------------------------------------------------------------------------------------------------------
// Joining

void Node::cancel_bootstrap() {
  bootstrap_cancelled_.store(true);
  std::lock_guard lock(maintenance_mutex_);  // stop() resets the client under the same flag's guard
  if (!stopping_.load() && client_) caller().cancel_pending();
}

Status Node::bootstrap(const std::vector<net::PeerAddress>& peers, Deadline deadline) {
  if (!client_) return error(Code::kUnavailable, "the DHT node is not started");
  if (peers.empty()) return Status::ok();  // the first node of a new swarm
  struct Reply {
    size_t peer;  // index in `peers`
    Result<net::Incoming> reply;
    double received_unix;
  };
  auto inbox = std::make_shared<BlockingQueue<Reply>>();
  std::vector<Contact> answered;
  std::vector<std::string> problem(peers.size(), "no answer before the deadline");
  std::vector<bool> settled(peers.size(), false);  // answered, or refused for good (wrong id, clock skew)
  size_t skewed = 0;
  // Pings in rounds of rpc_timeout until one peer answers or the caller's deadline passes: a busy or
  // just-started initial peer may miss one round.
  auto cancelled = [this] { return bootstrap_cancelled_.load(); };
  while (answered.empty() && !deadline.passed() && !cancelled()) {
    Deadline round{std::min(deadline.at, Deadline::after(options_.rpc_timeout).at)};
    size_t sent = 0;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (settled[i]) continue;
      ++sent;
      caller().call(peers[i].endpoint, net::Outgoing::of(wire::Ping{now()}), round,
                    [this, inbox, i](Result<net::Incoming>&& reply) { inbox->push(Reply{i, std::move(reply), now()}); });
    }
    if (sent == 0) break;
    for (size_t k = 0; k < sent; ++k) {
      auto outcome = inbox->pop(round);
      if (!outcome) break;
      const size_t i = outcome->peer;
      if (settled[i]) continue;  // a late answer to an earlier round, already counted
      const auto& peer = peers[i];
      if (!outcome->reply) {
        problem[i] = outcome->reply.status().message();  // unreachable this round: pinged again next round
        continue;
      }
      settled[i] = true;
      auto pong = outcome->reply->decode<wire::Pong>();
      crypto::PeerId who = outcome->reply->envelope().sender;
      if (!pong) {
        problem[i] = pong.status().message();
        continue;
      }
      if (peer.peer_id && who != *peer.peer_id) {
        problem[i] = "answered as peer " + who.to_string() + " (another node now runs there?)";
        continue;
      }
      // Their clock at the midpoint of the round trip against ours.
      double rtt = outcome->received_unix - pong->ping_sent_unix_time;
      double skew = pong->unix_time - (pong->ping_sent_unix_time + rtt / 2);
      if (std::abs(skew) > options_.max_clock_skew_seconds) {
        ++skewed;
        std::ostringstream why;
        why.precision(3);
        why << "its clock is " << skew << " s " << (skew > 0 ? "ahead of" : "behind") << " ours";
        problem[i] = why.str();
        continue;
      }
      problem[i].clear();
      answered.push_back(Contact{who, peer.endpoint, now()});
    }
    if (answered.empty() && !cancelled()) std::this_thread::sleep_until(round.at);  // failures can be instant: no busy loop
  }
  if (cancelled()) return error(Code::kCancelled, "joining was interrupted");
  std::vector<std::string> problems;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!problem[i].empty()) problems.push_back(peers[i].to_string() + ": " + problem[i]);
  }
  auto joined = [&] {
    std::string text;
    for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
    return text;
  };
  if (answered.empty()) {
    if (skewed > 0) {
      std::ostringstream message;
      message << "clocks differ by more than " << options_.max_clock_skew_seconds
              << " s from the initial peers (record expirations are absolute times): " << joined()
              << ". Synchronize this machine's clock (e.g. enable NTP: timedatectl set-ntp true)";
      return error(Code::kRefused, message.str());
    }
    return error(Code::kUnavailable, "none of the initial peers answered: " + joined() +
                                         ". Check the addresses (tcp://HOST:PORT/k/KEY) and that they are running");
  }
  for (const auto& skipped : problems) options_.log->warn(kLog) << "initial peer skipped: " << skipped;
  {
    std::lock_guard lock(mutex_);
    way_back_.set_initial(peers);
  }
  for (const auto& contact : answered) note_alive(contact);

  if (!options_.client_mode && server_) {
    // Others must be able to dial the endpoint we advertise, or we would poison their routing tables.
    const Contact& checker = answered.front();
    auto reply = caller().ask<wire::DhtReachability>(checker.endpoint, wire::DhtCheckReachable{advertised_},
                                                     std::min(deadline.remaining(), options_.rpc_timeout * 2));
    if (!reply) return reply.status().with_context("reachability check by " + checker.endpoint);
    if (!reply->reachable) {
      return error(Code::kUnavailable,
                   "the initial peer " + checker.endpoint + " cannot reach us back at " + advertised_ + ": " +
                       reply->detail +
                       ". Behind NAT or a firewall? Run with --client-mode (query and store only), join through a "
                       "relay (dedloc-relay), or pass --announce with an address others can dial");
    }
  }
  if (cancelled()) return error(Code::kCancelled, "joining was interrupted");
  // Looking up our own id fills the table with our neighbourhood and tells our neighbours about us.
  replica_set(id(), deadline);
  {
    // The revocation list read at start found an empty routing table: read it now that there are peers.
    std::lock_guard wake(maintenance_mutex_);
    revocations_due_ = true;
  }
  maintenance_wake_.notify_all();
  std::lock_guard lock(mutex_);
  Logger::Line(options_.log, server_ ? LogLevel::kInfo : LogLevel::kDebug, kLog) << "joined through " << answered.size() << " initial peer(s); " << table_.size()
                           << " contacts";
  return Status::ok();
}

Result<wire::DhtPeerList> Node::ask_peers(const std::string& endpoint, Deadline deadline) {
  if (!client_) return error(Code::kUnavailable, "the DHT node is not started");
  return caller().ask<wire::DhtPeerList>(endpoint, wire::DhtListPeers{wire::kMaxPeerListContacts}, deadline.remaining());
}

// ---------------------------------------------------------------------------------------------------------

std::vector<Contact> Node::contacts() const {
  std::lock_guard lock(mutex_);
  return table_.nearest(id(), table_.size());
}

size_t Node::stored_keys() const {
  std::lock_guard lock(mutex_);
  return storage_.live_keys(now()).size();
}

bool Node::holds(const std::string& key_name) const {
  std::lock_guard lock(mutex_);
  return storage_.get(key_id(key_name), now()).has_value();
}

NodeStats Node::stats() const {
  return {rpcs_sent_.load(),
          rpcs_failed_.load(),
          Duration(longest_rpc_wait_ns_.load()),
          entries_served_.load(),
          entry_bytes_served_.load(),
          entries_handed_over_.load(),
          server_ ? server_->stats() : net::ServerStats{},
          client_ ? client_->stats() : net::ClientStats{},
          datagrams_ ? datagrams_->stats() : net::DatagramStats{}};
}

void Node::revocation_loop(std::shared_ptr<net::AccessControl> access) {
  size_t revoked = 0;
  std::unique_lock lock(maintenance_mutex_);
  while (true) {
    // Read at start, once joined (bootstrap() wakes us), then every revocation_refresh. Before bootstrap, or
    // while the DHT is unreachable, a read fails: the list stays as it was until one succeeds (a revocation
    // takes effect once a node has seen it).
    maintenance_wake_.wait_for(lock, options_.revocation_refresh, [&] { return stopping_.load() || revocations_due_; });
    if (stopping_) return;
    revocations_due_ = false;
    lock.unlock();
    auto list = read_revocations(*this, access->authority(), Deadline::after(options_.rpc_timeout * 3));
    if (list && list->has_value()) {
      if ((*list)->size() != revoked) {
        Logger::Line(options_.log, LogLevel::kInfo, kLog) << "the authority's revocation list holds "
                                                          << (*list)->size() << " key(s)";
      }
      revoked = (*list)->size();
      access->set_revoked(std::move(**list));
    }
    lock.lock();
  }
}

void Node::maintenance_loop() {
  std::unique_lock lock(maintenance_mutex_);
  while (!maintenance_wake_.wait_for(lock, options_.maintenance_interval, [&] { return stopping_.load(); })) {
    lock.unlock();
    Deadline deadline = Deadline::after(options_.maintenance_interval);
    republish(deadline);
    replica_set(id(), deadline);  // refresh our neighbourhood
    lock.lock();
  }
}

Result<std::unique_ptr<Node>> join_as_client(zmq::context_t& context, crypto::Identity identity,
                                             const std::vector<net::PeerAddress>& peers, Deadline deadline,
                                             const std::function<void(RecordValidator&)>& register_schemas,
                                             NodeOptions options) {
  options.listen = "";
  options.client_mode = true;
  options.maintenance_interval = Duration::zero();
  auto node = std::make_unique<Node>(context, std::move(identity), options);
  if (register_schemas) register_schemas(node->validator());
  DEDLOC_RETURN_IF_ERROR(node->start());
  DEDLOC_RETURN_IF_ERROR(node->bootstrap(peers, deadline));
  return node;
}

}  // namespace dedloc::dht
