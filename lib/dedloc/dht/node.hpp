// A DHT node, docs/architecture.md: the sans-IO pieces (routing table, lookup, storage, validator) wired to real
// sockets.
//
// Threads: the RPC server's loop answers other nodes (handlers only touch the table and storage under a
// lock, so they never block on the network); the datagram transport's loop (NodeOptions::datagrams) does
// the same for requests in datagrams, and sends our requests and runs their completions, which read a
// lookup's answers and send its next queries (the RPC client's loop does that for what goes over
// ZeroMQ); store()/get() start their lookups on the caller's thread and sleep until done (or a query
// stalls), so many may run at once from many threads; an optional maintenance thread purges expired
// records and re-stores what we hold to the nodes currently nearest to each key.
//
// Every wait has a deadline: each RPC its own (rpc_timeout), each operation the caller's. A lookup waits for
// an RPC only a stall time (4x its slowest answer so far, 100 to 500 ms by default) before asking the next
// candidate instead, and ends on the answers of responsive nodes without waiting for the silent ones; a
// node that stalled or missed a deadline is asked but not waited for again, and after a second missed
// deadline is dropped from the routing table. So dead contacts cost a lookup a few stall times, well under
// one RPC deadline, not one deadline per round of queries.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "dedloc/core/blocking_queue.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/lookup.hpp"
#include "dedloc/dht/routing_table.hpp"
#include "dedloc/dht/read_cache.hpp"
#include "dedloc/dht/storage.hpp"
#include "dedloc/dht/way_back.hpp"
#include "dedloc/dht/validator.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/datagram_rpc.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/dht_messages.hpp"

namespace dedloc::dht {

struct NodeOptions {
  // Where to listen. Empty: no server at all (a client-mode node that only asks, like `dedloc-dht get`).
  std::string listen = "tcp://127.0.0.1:0";
  // The endpoint others should dial; empty: the bound one, a wildcard host replaced by our local address.
  std::string announce;
  // Behind NAT: query and store, but never advertise an endpoint, so nobody puts us in a routing table.
  bool client_mode = false;

  size_t bucket_size = 20;  // k
  size_t alpha = 4;         // lookup RPCs in flight
  size_t lookup_k = 5;      // a lookup is done when this many nearest nodes have answered (= replicas)
  size_t replicas = 5;      // a value is stored on this many nodes nearest to its key
  Duration rpc_timeout = std::chrono::seconds(2);
  // A lookup query unanswered for a stall time stops being waited for: the lookup asks the next candidate
  // and may end without it (its answer still counts if it comes before the lookup ends; lookup.hpp). The
  // stall time is 4x the lookup's slowest answer so far, within [rpc_min_stall_timeout, rpc_stall_timeout].
  // Zero rpc_stall_timeout: wait for every query until rpc_timeout.
  Duration rpc_stall_timeout = std::chrono::milliseconds(500);
  Duration rpc_min_stall_timeout = std::chrono::milliseconds(100);
  double max_clock_skew_seconds = 5;  // bootstrap refuses peers whose clocks differ more (expirations are absolute)
  // A node that failed to answer is asked but never waited for by our lookups for this long, and after a
  // second failure is skipped (unless it talks to us first), so contacts that other nodes have not yet
  // noticed are dead cost us a stall timeout once, not a deadline per lookup.
  Duration failed_node_memory = std::chrono::seconds(60);

  // Copy a node new to our table the records of keys it became a replica of (dht/hand_over.hpp), so that
  // a reader whose lookup ends at nodes that joined after a store finds it. False: only the republish
  // below moves records (bench/dht compares the two).
  bool hand_over = true;
  // Every interval: purge expired records, re-store held records to their current nearest nodes, and
  // refresh our neighbourhood. Zero: never (tests and tools call republish() themselves).
  Duration maintenance_interval = std::chrono::minutes(5);
  // In a private run (an access control in `socket`, or the process's): how often the node reads the
  // authority's revocation list (dht/revocations.hpp) and hands it to the access control. Zero: never.
  Duration revocation_refresh = std::chrono::seconds(30);

  StorageLimits storage;
  ValidatorOptions validation;
  net::SocketOptions socket;
  // Talk to other nodes in UDP datagrams (net/datagram_rpc.hpp), bound on the port of our ZeroMQ server,
  // which carries what does not fit in one (max_datagram_bytes: large values and dictionaries) and what
  // arrives from nodes that do not use datagrams. False: every RPC over ZeroMQ connections, which hold
  // ~70-140 KiB each for as long as they stay open (bench/dht/README.md).
  bool datagrams = true;
  size_t max_datagram_bytes = net::DatagramOptions{}.max_datagram_bytes;
  Duration idle_connection_close = std::chrono::seconds(60);
  // Outgoing ZeroMQ connections (what does not fit in a datagram, or every RPC with datagrams off) kept
  // open at most (net::ClientOptions::max_connections, least recently used closed first; 0: no bound). A
  // lookup talks to nodes all over the id space, so without a bound a node of a big swarm holds a
  // connection to every node it asked within `idle_connection_close`: ~70-140 KiB of ZeroMQ
  // buffers and 2 file descriptors each in its process (and 1 descriptor in the peer's), more than the usual
  // limit of 1,024 descriptors allows. With 64, a node of a 64-node swarm keeps all its peers connected
  // (bench/dht/README.md).
  size_t max_connections = 64;
  const Clock* clock = &SystemClock::instance();  // its unix time stamps expirations (deadlines are steady time)
  Logger* log = &Logger::global();
};

// One entry of a record as a get returns it.
struct FoundEntry {
  std::optional<Bytes> subkey;
  Bytes value;
  double expiration = 0;
};

struct FoundRecord {
  std::vector<FoundEntry> entries;  // a plain value: one entry without subkey; a dictionary: one per subkey
  size_t answered = 0;              // nodes that returned something for the key
};

struct StoreResult {
  size_t stored = 0;     // nodes that accepted the value: the `replicas` nearest, plus any met on the way
  size_t attempted = 0;  // nodes asked
};

enum class GetMode {
  kFirst,   // stop at the first node that holds the key (fast; may miss subkeys or a newer value)
  kLatest,  // ask all nearest nodes and merge: the newest value of every subkey
};

struct NodeStats {
  std::uint64_t rpcs_sent = 0;
  std::uint64_t rpcs_failed = 0;      // timed out, refused or garbled
  Duration longest_rpc_wait{0};       // the longest any RPC of ours waited for its outcome
  // Record entries our answers to value lookups carried, and their bytes (values, signatures, subkeys):
  // what serving reads costs this node's upload.
  std::uint64_t entries_served = 0;
  std::uint64_t entry_bytes_served = 0;
  // Record entries we copied to nodes that joined near keys we hold (dht/hand_over.hpp).
  std::uint64_t entries_handed_over = 0;
  net::ServerStats server;            // requests others sent us over ZeroMQ (none for a client-mode node)
  net::ClientStats client;            // our outgoing ZeroMQ connections
  net::DatagramStats datagrams;       // what we served and asked in datagrams (NodeOptions::datagrams)
};

class Node {
 public:
  Node(zmq::context_t& context, crypto::Identity identity, NodeOptions options = {});
  ~Node();  // stops
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Binds (unless `listen` is empty) and starts serving. kUnavailable when the address cannot be bound.
  Status start();
  // Stops serving and fails our RPCs in flight; never waits on remote peers. Idempotent.
  void stop();

  // Joins the network through `peers`: pings them all at once, checks their identities and clocks, asks one
  // of them to dial us back (unless in client mode), then looks up our own id to fill the routing table.
  // Errors say what to do: no peer answered, clocks differ, or nobody can reach us (client mode or a relay).
  Status bootstrap(const std::vector<net::PeerAddress>& peers, Deadline deadline);
  // For a process told to stop while it joins (another thread): bootstrap() in progress, and any later
  // one, return kCancelled at once, and our RPCs in flight fail (net::Client::cancel_pending). Thread-safe.
  void cancel_bootstrap();

  // Stores `value` under `key_name` (and `subkey`) until `expiration` (unix seconds) on the `replicas` nodes
  // nearest to the key, ourselves included when we are among them. The lookup stores as it goes (each store
  // reply names nearer nodes), so nodes it meets on the way keep a copy too, as Kademlia's path caching does.
  // Owned entries are signed with our identity. An error when no node accepted it (the first refusal's
  // reason: older than held, unauthorized…).
  Result<StoreResult> store(const std::string& key_name, const std::optional<Bytes>& subkey, Bytes value,
                            double expiration, Deadline deadline);

  // The record under `key_name`, or nullopt when no node holds anything live there. Every entry returned has
  // passed validation here (a hostile replica cannot forge an owned entry). kTimeout or kUnavailable when
  // nodes were asked and none answered: not knowing is not the same as "nobody holds it".
  Result<std::optional<FoundRecord>> get(const std::string& key_name, GetMode mode, Deadline deadline);

  // Re-stores every live record we hold to the nodes now nearest to its key (after nodes left or joined).
  // Returns how many entries were re-stored somewhere.
  size_t republish(Deadline deadline);

  // What another node knows (its routing table and key count): `dedloc-dht peers`.
  Result<wire::DhtPeerList> ask_peers(const std::string& endpoint, Deadline deadline);

  // Schemas for record families (the trainer registers its progress and metrics schemas). Before start().
  RecordValidator& validator() { return validator_; }

  const crypto::PeerId& id() const { return identity_.peer_id(); }
  const crypto::Identity& identity() const { return identity_; }
  const crypto::PublicKey& public_key() const { return identity_.public_key(); }
  // Where we can be dialled ("tcp://host:port"); empty without a server. A client-mode node serves local
  // tools there but never tells other nodes.
  const std::string& endpoint() const { return advertised_; }
  // The full address others pass as an initial peer: the endpoint with its key, or endpoint + "/p/<id>" in
  // plaintext.
  net::PeerAddress address() const { return {advertised_, id()}; }
  std::vector<Contact> contacts() const;
  size_t stored_keys() const;
  // Whether this node's own storage holds a live entry under `key_name` (no network traffic).
  bool holds(const std::string& key_name) const;
  NodeStats stats() const;

 private:
  struct Answer;  // one RPC's outcome, as the lookup driver sees it
  using Inbox = BlockingQueue<Answer>;
  struct LookupRun;  // a lookup in progress (node.cpp)

  double now() const { return options_.clock->unix_seconds(); }
  std::string sender_endpoint() const { return options_.client_mode ? std::string() : advertised_; }

  // Runs one iterative lookup for `target`, asking with `make_request` and reading each outcome with `read`
  // (which returns the contacts to go on with, or an error, and may finish the lookup).
  using AnswerReader = std::function<Result<std::vector<Contact>>(
      const Contact& from, const Result<net::Incoming>& reply, Lookup& lookup)>;
  // `for_value`: a get, which waits for its nearest candidates (LookupOptions::wait_for_nearest).
  using RequestMaker = std::function<net::Outgoing(const Contact& to)>;
  Lookup run_lookup(const PeerId& target, const RequestMaker& make_request,
                    const AnswerReader& read, Deadline deadline, bool for_value = false);
  // Sends one RPC with the node's RPC deadline (capped by `deadline`); `deliver` gets the outcome, on the
  // caller's loop thread.
  void send_rpc(const Contact& to, net::Outgoing request, Deadline deadline, std::function<void(Answer&&)> deliver);
  void send_rpc(net::Caller& caller, const Contact& to, net::Outgoing request, Deadline deadline,
                std::function<void(Answer&&)> deliver);
  // How we ask other nodes: in datagrams when they are on (large messages then go over client_), over
  // client_'s connections otherwise.
  net::Caller& caller();
  // Binds the ZeroMQ server and, with datagrams on, UDP on its port (another free port pair when the
  // listen port is 0 and UDP's twin is taken).
  Status start_serving();
  // Under run->mutex: hands stalled slots on, sends the next queries, and marks the run finished when done.
  void advance(const std::shared_ptr<LookupRun>& run);
  // An RPC of the run answered or failed (on the client's loop thread).
  void on_lookup_answer(const std::shared_ptr<LookupRun>& run, Answer&& answer);
  // Sends `entry` to the nodes of `targets` (ourselves stored locally) and waits for all outcomes.
  Result<StoreResult> store_on(const std::vector<Contact>& targets, const std::string& key_name,
                               const wire::RecordEntry& entry, Deadline deadline);
  // The `replicas` nodes nearest to `key`, among those a lookup heard from plus ourselves.
  std::vector<Contact> replica_set(const PeerId& key, Deadline deadline);
  Status store_locally(const std::string& key_name, const wire::RecordEntry& entry);

  // Registers our handlers with the server and the datagram transport (before they start).
  void install_handlers();
  template <class Message>
  void serve(std::function<void(Message&& message, net::Incoming&& request, net::Replier replier)> handler) {
    const net::Handler typed = net::typed_handler<Message>(std::move(handler));
    server_->handle(Message::kType, typed);
    if (datagrams_) datagrams_->handle(Message::kType, typed);
  }
  // A node wrote to us from `endpoint`: put it in the routing table (pinging the bucket's oldest if full).
  void note_sender(const crypto::PeerId& id, const std::string& endpoint);
  // How we know a contact is alive: it answered a request of ours (which proves its endpoint: only the holder
  // of the endpoint's key can answer there), or it wrote to us (its endpoint is what it says it is).
  enum class Heard { kAnswered, kWrote };
  void note_alive(const Contact& contact, Heard how = Heard::kAnswered);
  // A contact new to our table: copy it the keys it is now a replica of (hand_over.hpp); one that only wrote
  // to us must answer a ping first.
  void hand_over(const Contact& newcomer, Heard how);
  std::vector<std::pair<std::string, wire::RecordEntry>> entries_to_hand_over(const PeerId& newcomer);
  void note_dead(const PeerId& id);
  void note_stalled(const PeerId& id);  // a lookup stopped waiting for it
  bool recently_failed(const PeerId& id);  // under mutex_: failed twice lately, skip it
  bool suspected(const PeerId& id) const;  // under mutex_: failed lately, do not wait for it
  // With the routing table empty, pings the contacts dropped last and the initial peers (way_back.hpp), and
  // returns once one answered (it is back in the table), all failed, or `deadline` or an RPC deadline passed.
  void find_way_back(Deadline deadline);
  void check_reachable(const std::string& endpoint, const crypto::PeerId& expected, net::Replier replier);
  std::vector<wire::ContactInfo> nearest_infos(const PeerId& target) const;
  void maintenance_loop();
  void revocation_loop(std::shared_ptr<net::AccessControl> access);

  zmq::context_t& context_;
  crypto::Identity identity_;
  NodeOptions options_;
  RecordValidator validator_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<net::Client> client_;
  std::unique_ptr<net::DatagramRpc> datagrams_;
  std::string advertised_;

  mutable std::mutex mutex_;  // guards table_, storage_, pinging_
  RoutingTable table_;
  Storage storage_;
  // Latest-value reads' entries and replicas' cursors between reads (read_cache.hpp); its own lock, taken
  // at a read's start and end only.
  std::mutex read_cache_mutex_;
  ReadCache read_cache_;
  std::set<PeerId> pinging_;  // oldest contacts being checked because a newcomer wants their bucket slot
  struct Failure {
    TimePoint last{};
    int strikes = 0;  // missed deadlines since it last answered
  };
  static constexpr int kStrikesToDrop = 2;
  std::map<PeerId, Failure> failed_;  // nodes that stopped answering (or were slow to), and when (bounded)
  WayBack way_back_;  // under mutex_: where to look once every contact is gone

  std::atomic<std::uint64_t> rpcs_sent_{0};
  std::atomic<std::uint64_t> rpcs_failed_{0};
  std::atomic<std::int64_t> longest_rpc_wait_ns_{0};
  std::atomic<std::uint64_t> entries_served_{0};
  std::atomic<std::uint64_t> entry_bytes_served_{0};
  std::atomic<std::uint64_t> entries_handed_over_{0};
  std::atomic<int> reachability_checks_{0};

  std::mutex maintenance_mutex_;
  std::condition_variable maintenance_wake_;
  bool revocations_due_ = true;  // under maintenance_mutex_: read the revocation list now (at start, once joined)
  std::atomic<bool> bootstrap_cancelled_{false};  // cancel_bootstrap()
  std::atomic<bool> stopping_{false};  // lookups and republishing give up early once set
  std::thread maintenance_;
  std::thread revocation_watch_;
  bool started_ = false;
};

// A node that asks and stores but serves nothing (no port; never in anyone's routing table): how tools
// reach a DHT from anywhere, NAT included. `options` is taken as the base (listen, client_mode and
// maintenance are set here); `register_schemas` adds validators for the record families the caller reads,
// before start(). Started and bootstrapped through `peers` before `deadline`.
Result<std::unique_ptr<Node>> join_as_client(zmq::context_t& context, crypto::Identity identity,
                                             const std::vector<net::PeerAddress>& peers, Deadline deadline,
                                             const std::function<void(RecordValidator&)>& register_schemas = {},
                                             NodeOptions options = {});

}  // namespace dedloc::dht
