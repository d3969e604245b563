// State download (docs/architecture.md): a peer that is new or behind fetches the latest training state from donors.
//
// Donors. A peer that holds a state runs a StateServer on its RPC server and lists itself in the DHT under
// "{run_id}_donors" (advertise_donor, refreshed by its owner before the TTL runs out), one subkey per donor:
// its address, with its endpoint, epoch, load, priority and refresh time as the value. A donor serves at most
// `max_downloads` downloaders at once (a downloader is a peer id; its slot is freed when it says it is done
// or after it stays silent for `idle_release`); the next one is refused with "busy: N downloads in progress"
// and goes to another donor, so a crowd of joiners spreads over the donors instead of swamping one.
//
// Snapshots. The owner publishes its state as a std::shared_ptr<const TrainingState> and swaps in a new one
// each epoch; a downloader's slot pins the snapshot it started with, so a download never mixes two epochs
// of one donor even when the donor moves on midway (the old snapshot stays alive until the slot is freed).
//
// Download (download_state). Protocol, all requests bounded in size and time:
//   1. rank the donors (rank_donors): records that stopped being refreshed last (a dead peer stops
//      refreshing its advert, which lingers until its TTL runs out); then the newest advertised epoch
//      (the newest and the one before it alike: right after a step only the first peers to take it
//      advertise it, and a wave of joiners would all pick those), donors the downloader disfavours last
//      (`disfavoured`: a trainer names the peers whose parameters left the swarm's, whose state it would
//      refuse after downloading it), direct donors before those behind a
//      relay (every byte would cross the relay and a home upload), the least loaded, the owner's priority
//      (a trainer advertises its upload rate: a slow peer's upload is what its all-reduce waits on),
//      ties in random order (joiners with the same list do not all pick the same donors);
//   2. probe them for liveness, `probe_fanout` at once in rank order, a new one as each probe fails: a probe
//      is the "done" request (it takes no slot; every donor answers it with its current epoch, schema hash
//      and load), dropped after `probe_timeout`. Probing stops when the best-ranked donors not yet failed
//      answered, enough of them (max_donors) at the newest epoch answered, or a probe timeout after it began
//      with a live donor found, or when nobody is left to probe. A dead donor thus costs one short probe,
//      shared with the others in flight, never a long request: the time to reach a live donor does not
//      grow with the dead records ranked ahead of it (up to probe_fanout of them; beyond that, one probe
//      timeout per probe_fanout more);
//   3. ask up to `max_donors` of the live ones (newest answered epoch first, then rank) to describe their
//      state (epoch, schema hash, tensor names and shapes, metadata); take the newest epoch E among the
//      answers; donors at E must agree on the schema hash ("donors disagree on schema" otherwise), older
//      ones are released at once;
//   4. cut the flattened tensors into parts of `part_elements` (a few MiB) and fetch them from the donors
//      at E, `window` requests in flight per donor, each request naming E; every reply is checked (epoch,
//      schema, stripe, codec, size, the donor's identity) and decoded straight into place;
//   5. a donor that fails a request (silent past `request_timeout`, refused, gone to another epoch,
//      garbled) is dropped: its parts go back to the queue and a live spare at E takes its place (when
//      none is left, more donors are probed); a spare whose probe answered more than two probe timeouts
//      ago is probed again first (it may have died or moved on while the donor it replaces held out);
//   6. at the end every donor used is told "done", freeing its slot.
// A donor that failed (a probe or a request) is not asked again in the same download; every listed donor
// stays eligible until it fails.
// Every wait is bounded by the request timeout (a probe's by the probe timeout) and the caller's deadline.
//
// Stripes from different donors at the same epoch are combined: after the same all-reduce, peers at one
// epoch hold the same parameters (up to float rounding); a state where that is not so (e.g. unaveraged
// optimizer statistics) should be downloaded with max_donors = 1.
//
// Threads: StateServer's handler runs on the RPC server's loop thread and never blocks; set_state() and
// stats() may be called from any thread. download_state() runs on the caller's thread (the client's loop
// only queues the replies) and may run on several threads at once (but donors count downloaders by peer
// id: downloads through one client share a slot at each donor, and one's "done" or probe frees it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/training_state.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::avg {

// ---- Donors in the DHT ----

// "{run_id}_donors": the DHT key every donor of a run lists itself under (the record's format, key and
// schema: wire/records.hpp).
using wire::donors_key;

// A donor as a downloader sees it.
struct DonorInfo {
  net::PeerAddress address;          // where to ask; with a peer id, replies from anyone else are refused
  std::uint64_t epoch = 0;           // as advertised (the donor's description is what counts)
  std::uint64_t downloads = 0;       // in progress when advertised
  std::uint64_t max_downloads = 0;   // the donor's limit (0: unknown)
  double priority = 0;               // the owner's preference, higher first (trainers say their upload, Mbit/s)
  double expiration = 0;             // of the advertisement, unix seconds (0 for a hand-made list)
  double refreshed = 0;              // when the advertisement was last stored, unix seconds by the donor's
                                     // clock (0: not said: a hand-made list, or a peer older than the field)
};

// An advertisement whose owner missed refreshes: older than half its TTL (expiration - refreshed) when
// compared with the most recently refreshed advertisement of its list. Owners refresh every third of the
// TTL, so a live donor's advert is rarely that old; a dead donor's stays listed until its TTL runs out.
// Comparing with the list's newest rather than this machine's clock spares the reader clock skew. Never
// stale when `refreshed` is not said.
bool stale_advert(const DonorInfo& donor, double newest_refresh);

// Lists `donor` under donors_key(run_id) until now + `ttl` (subkey: the address; value: a msgpack map
// {"ep": endpoint, "epoch": uint, "load": uint, "max": uint, "prio": float, "t": now}; `donor.refreshed`
// is ignored). The owner calls it again before the TTL runs out (the trainer: every ttl/3, and after each
// global step): downloaders rank adverts that missed refreshes last (stale_advert).
Result<dht::StoreResult> advertise_donor(dht::Node& node, std::string_view run_id, const DonorInfo& donor,
                                         Duration ttl, Deadline deadline,
                                         const Clock& clock = SystemClock::instance());

// The donors listed for `run_id` (unordered; entries that do not parse are skipped). An empty list when
// nobody is listed; the DHT's error when the lookup itself failed.
Result<std::vector<DonorInfo>> list_donors(dht::Node& node, std::string_view run_id, Deadline deadline);
// One entry of the list as list_donors reads it (subkey: the donor's address; value: the map above), with
// the entry's expiration: kMalformed when it does not parse or is withdrawn (empty).
Result<DonorInfo> parse_donor(const dht::FoundEntry& entry);

// Registers the schema of donor records ("_donors") with a node's validator (before node.start()).
void add_donor_schema(dht::RecordValidator& validator);

// The order a download probes donors in (see step 1 above); `rng` breaks ties.
std::vector<DonorInfo> rank_donors(std::vector<DonorInfo> donors, std::mt19937_64& rng,
                                   const std::vector<crypto::PeerId>& disfavoured = {});

// The priority a trainer advertises as a donor: its upload rate (`bandwidth`, bytes/s) in Mbit/s, so that
// among equally loaded donors the fastest serve first. A download crosses the donor's upload, and a slow
// peer's upload is what its group's all-reduce waits on; the fast ones have room to spare.
double donor_priority(double bandwidth);

// ---- Serving ----

struct StateServerOptions {
  std::string run_id;                                     // the key requests name; others get not_found
  size_t max_downloads = 4;                               // downloaders served at once; more are refused
  Duration idle_release = std::chrono::seconds(15);       // a downloader silent this long loses its slot
  std::uint64_t max_part_elements = wire::kMaxStatePartElements;  // larger stripes are refused (too_large)
  const Clock* clock = &SystemClock::instance();          // for idle slots
  Logger* log = &Logger::global();
};

struct StateServerStats {
  std::uint64_t descriptions = 0;     // replies that described the state
  std::uint64_t parts = 0;            // replies with a payload
  std::uint64_t elements = 0;         // in those payloads
  std::uint64_t refused_busy = 0;     // requests refused because every slot was taken
  std::uint64_t refused_epoch = 0;    // requests for an epoch no longer held
  size_t downloads = 0;               // slots taken now
  size_t peak_downloads = 0;          // the most slots ever taken at once (never above max_downloads)
};

class StateServer {
 public:
  using Snapshot = std::shared_ptr<const TrainingState>;
  // Returns the state to serve to a download that starts now (nullptr: none yet). Called on the server's
  // loop thread: it must be quick (hand out a shared_ptr, never copy a state here).
  using SnapshotSource = std::function<Snapshot()>;

  // Registers the AvgStateRequest handler on `server` (call before server.start()). Without a `source`,
  // serves what set_state() last published. The handler keeps what it needs alive: destroying the
  // StateServer before the server is safe (later requests are answered unavailable).
  StateServer(net::Server& server, StateServerOptions options, SnapshotSource source = nullptr);
  ~StateServer();
  StateServer(const StateServer&) = delete;
  StateServer& operator=(const StateServer&) = delete;

  // Publishes the state for downloads that start from now on (those in progress keep theirs).
  void set_state(Snapshot state);
  // What a download starting now would get.
  Snapshot state() const;

  StateServerStats stats() const;
  // This donor as advertise_donor lists it: the current epoch and load, with `address` and `priority`.
  DonorInfo donor_info(const net::PeerAddress& address, double priority = 0) const;

  struct Core;  // state_transfer.cpp

 private:
  std::shared_ptr<Core> core_;
};

// ---- Downloading ----

struct DownloadOptions {
  std::string run_id;                                  // the state key (donors serve one run each)
  size_t max_donors = 3;                               // K: stripes come from this many donors at once
  size_t window = 2;                                   // requests in flight to each donor
  std::uint64_t part_elements = std::uint64_t{1} << 20;  // elements per request (4 MiB of float32)
  Codec codec = Codec::kNone;                          // lossy codecs trade accuracy for bandwidth
  Duration request_timeout = std::chrono::seconds(10);  // a donor silent this long on one request is dropped
  size_t probe_fanout = 8;                             // liveness probes in flight at once (step 2)
  Duration probe_timeout = std::chrono::seconds(1);    // a donor silent this long on a probe is passed over
                                                       // (a probe is answered at once on the donor's loop)
  std::optional<Bytes> expected_schema;                // our model's schema hash: skip donors of other models
  std::vector<std::string> exclude;                    // endpoints never asked (our own server's)
  std::vector<crypto::PeerId> disfavoured;             // donors asked after the rest at their epoch (step 1)
  std::optional<std::uint64_t> max_epoch;              // donors past this epoch are passed over: a peer that
                                                       // takes part in a round at weight 0 while it downloads
                                                       // needs the state that round averages for
  std::uint64_t seed = 0;                              // order among equally good donors; 0: random
  Logger* log = &Logger::global();
};

// How one donor took part in a download.
struct DonorUse {
  std::string address;
  std::uint64_t epoch = 0;       // as it described itself (0 if it never did)
  std::uint64_t parts = 0;       // parts it delivered
  std::uint64_t elements = 0;
  Status failure;                // why it was dropped; ok if it was not
};

struct DownloadedState {
  TrainingState state;
  std::vector<DonorUse> donors;       // every donor asked for the state, in the order first asked
  std::vector<DonorUse> passed_over;  // donors only probed: those that failed the probe (dead, silent, of
                                      // another model), and live spares never needed (failure ok)
};

// Downloads the newest state of `options.run_id` from `donors` (see the protocol above). Errors:
//   kNotFound     no donors to ask: nobody is listed (the first peer of a run starts from its own state)
//   kUnavailable  "no donor reachable: ..." (each donor's reason): donors are listed but none answered
//                 (dead, busy, of another model), or the donors that served the epoch all failed before
//                 the last part. The swarm may well be ahead: try again later, with backoff (dead donors'
//                 adverts run out with their TTL, live ones free their slots)
//   kRefused      "donors disagree on schema at epoch E: ..."
//   kTimeout      `deadline` passed first (like kUnavailable: worth another try later)
Result<DownloadedState> download_state(net::Client& client, std::vector<DonorInfo> donors,
                                       const DownloadOptions& options, Deadline deadline);

// The same with the donors listed in the DHT under donors_key(options.run_id); the DHT's own error (with
// context) when the listing fails.
Result<DownloadedState> download_state(dht::Node& node, net::Client& client, const DownloadOptions& options,
                                       Deadline deadline);

}  // namespace dedloc::avg
