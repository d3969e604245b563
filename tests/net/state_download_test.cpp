// State download between in-process peers on real loopback sockets (docs/architecture.md): donors serve their training
// state, joiners fetch it in stripes from several donors at once, listed in a DHT swarm. Exact round trips,
// codec bounds, busy donors, donors that die or move on midway, dead swarms, dead donors ranked first
// (crashed, frozen or silent) and mixed epochs.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <set>
#include <thread>

#include <zmq_addon.hpp>

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/local_swarm.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

Logger& quiet() {
  static Logger log(LogLevel::kError);
  return log;
}

// Tensors of odd sizes, a scalar and an empty one: parts of any size cut across their boundaries.
std::vector<TensorSpec> odd_specs(std::uint64_t scale = 1) {
  return {{"embed.weight", {97, 31 * scale}}, {"ln.weight", {31}}, {"step", {}}, {"empty", {0, 5}},
          {"ffn.weight", {10007 * scale}},    {"conv", {3, 5, 7}}};
}

StateServer::Snapshot make_state(std::uint64_t epoch, std::uint64_t seed, std::vector<TensorSpec> specs = odd_specs()) {
  auto state = TrainingState::with_tensors(std::move(specs), {epoch, {{"lr", 0.00125}, {"optimizer", std::string("lamb")},
                                                                      {"scheduler_step", 1000.0 + static_cast<double>(epoch)}}});
  REQUIRE(state.is_ok());
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& x : state->flat()) x = normal(rng);
  return std::make_shared<const TrainingState>(std::move(state.value()));
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// A peer that serves its state: an RPC server with a StateServer on it.
struct Donor {
  crypto::Identity identity = crypto::Identity::generate();
  std::unique_ptr<net::Server> server;
  std::unique_ptr<StateServer> state;

  Donor(zmq::context_t& context, StateServer::Snapshot snapshot, size_t max_downloads = 4) {
    server = std::make_unique<net::Server>(context, net::ServerOptions{"tcp://127.0.0.1:0", identity.peer_id(), {}, &quiet()});
    StateServerOptions options;
    options.run_id = "run1";
    options.max_downloads = max_downloads;
    options.log = &quiet();
    state = std::make_unique<StateServer>(*server, options);
    state->set_state(std::move(snapshot));
    REQUIRE(server->start().is_ok());
  }
  net::PeerAddress address() const { return {server->endpoint(), identity.peer_id()}; }
  DonorInfo info(double priority = 0) const { return state->donor_info(address(), priority); }
  // As a crashed process looks to the others: its socket closes, nothing answers.
  void kill() { server->stop(); }
};

// A peer that downloads: just a client with its own identity (donors count downloaders by peer id).
struct Joiner {
  crypto::Identity identity = crypto::Identity::generate();
  std::unique_ptr<net::Client> client;
  explicit Joiner(zmq::context_t& context)
      : client(std::make_unique<net::Client>(context, net::ClientOptions{identity.peer_id(), {}, 60s, &quiet()})) {}
};

std::unique_ptr<net::Client> joiner_client(zmq::context_t& context) {
  return std::make_unique<net::Client>(context, net::ClientOptions{crypto::Identity::generate().peer_id(), {}, 60s, &quiet()});
}

DownloadOptions options_for(size_t max_donors, std::uint64_t part_elements, Codec codec = Codec::kNone) {
  DownloadOptions o;
  o.run_id = "run1";
  o.max_donors = max_donors;
  o.part_elements = part_elements;
  o.codec = codec;
  o.request_timeout = 1s;
  o.seed = 7;
  o.log = &quiet();
  return o;
}


void advertise(dht::LocalSwarm& swarm, size_t node, const DonorInfo& info) {
  auto stored = advertise_donor(swarm.node(node), "run1", info, 60s, Deadline::after(10s));
  REQUIRE(stored.is_ok());
}

// Donors free a downloader's slot when told it is done, a message nobody waits for: poll a little.
bool slots_freed(const std::vector<Donor*>& donors) {
  auto until = Deadline::after(3s);
  while (!until.passed()) {
    bool all = true;
    for (auto* d : donors) all = all && d->state->stats().downloads == 0;
    if (all) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// A peer alive at TCP that never answers, like a SIGSTOPped process: the kernel completes the TCP
// handshake (the connection waits in the listen backlog), nobody ever reads.
struct FrozenListener {
  int fd = -1;
  std::string endpoint;
  FrozenListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t length = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0);
    endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~FrozenListener() { ::close(fd); }
};

// A ZeroMQ peer that takes requests and never replies: it counts them, so a test can tell how often a
// downloader asked.
struct SilentPeer {
  zmq::socket_t socket;
  std::string endpoint;
  std::atomic<bool> stop{false};
  std::atomic<int> requests{0};
  std::thread reader;
  explicit SilentPeer(zmq::context_t& context) : socket(context, zmq::socket_type::router) {
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("tcp://127.0.0.1:*");
    endpoint = socket.get(zmq::sockopt::last_endpoint);
    reader = std::thread([this] {
      while (!stop) {
        zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0) continue;
        std::vector<zmq::message_t> frames;
        if (zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) ++requests;
      }
    });
  }
  ~SilentPeer() {
    stop = true;
    reader.join();
  }
};

double seconds_since(TimePoint start) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }

// A download during which `fault` strikes (donors killed) once `watched` has served `parts` parts; the
// download's outcome and how long it took.
struct FaultedDownload {
  Result<DownloadedState> got;
  double took = 0;
};
FaultedDownload download_with_fault(Joiner& joiner, const std::vector<DonorInfo>& donors, const DownloadOptions& options,
                                    const Donor& watched, std::uint64_t parts, const std::function<void()>& fault) {
  std::atomic<bool> stop{false};
  std::thread striker([&] {
    while (!stop && watched.state->stats().parts < parts) std::this_thread::sleep_for(200us);
    fault();
  });
  auto start = std::chrono::steady_clock::now();
  FaultedDownload out{download_state(*joiner.client, donors, options, Deadline::after(60s)), 0};
  out.took = seconds_since(start);
  stop = true;
  striker.join();
  return out;
}

}  // namespace

TEST_CASE("State download: an exact round trip of a multi-tensor state of odd sizes", "[net][avg][state]") {
  zmq::context_t context;
  auto original = make_state(12, 1);
  Donor donor(context, original);
  Joiner joiner(context);

  // Odd parts, tiny ones, exactly the whole state, more than the whole state.
  for (std::uint64_t part : std::vector<std::uint64_t>{1000, 7, 13151, 1u << 20}) {
    INFO("part elements " << part);
    auto got = download_state(*joiner.client, {donor.info()}, options_for(1, part), Deadline::after(30s));
    REQUIRE(got.is_ok());
    const TrainingState& state = got->state;
    CHECK(state.tensors() == original->tensors());
    CHECK(state.schema_hash() == original->schema_hash());
    CHECK(state.metadata == original->metadata);
    CHECK(state.epoch() == 12);
    CHECK(same_bits(state.flat(), original->flat()));
    REQUIRE(got->donors.size() == 1);
    CHECK(got->donors[0].failure.is_ok());
    CHECK(got->donors[0].parts == (13151 + part - 1) / part);
  }
  CHECK(slots_freed({&donor}));
  CHECK(donor.state->stats().peak_downloads == 1);
}

TEST_CASE("State download with lossy codecs stays within each codec's bound", "[net][avg][state]") {
  zmq::context_t context;
  auto original = make_state(3, 2);
  Donor donor(context, original);
  Joiner joiner(context);
  const std::uint64_t part = 1000;
  for (Codec codec : {Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit, Codec::kBlockwise8Bit}) {
    INFO("codec " << codec_name(codec));
    auto got = download_state(*joiner.client, {donor.info()}, options_for(1, part, codec), Deadline::after(30s));
    REQUIRE(got.is_ok());
    auto want = original->flat();
    auto have = got->state.flat();
    REQUIRE(have.size() == want.size());
    // Each part is encoded on its own, so its bound is that of its values.
    double worst_excess = 0;
    for (size_t begin = 0; begin < want.size(); begin += part) {
      auto values = want.subspan(begin, std::min<size_t>(part, want.size() - begin));
      double bound = error_bound(codec, values);
      for (size_t k = 0; k < values.size(); ++k) {
        worst_excess = std::max(worst_excess, std::abs(static_cast<double>(have[begin + k]) - values[k]) - bound);
      }
    }
    CHECK(worst_excess <= 0);
    CHECK_FALSE(same_bits(have, want));  // really compressed
  }
}

TEST_CASE("Stripes come from three donors listed in the DHT, each serving part of the state", "[net][avg][state]") {
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  auto original = make_state(40, 3, odd_specs(20));  // about 260k elements
  std::vector<std::unique_ptr<Donor>> donors;
  for (size_t i = 0; i < 3; ++i) {
    donors.push_back(std::make_unique<Donor>(context, original));
    advertise(*swarm, i, donors[i]->info());
  }
  Joiner joiner(context);
  auto options = options_for(3, 4099);
  auto got = download_state(swarm->node(0), *joiner.client, options, Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(same_bits(got->state.flat(), original->flat()));
  const std::uint64_t parts = (original->total_elements() + 4098) / 4099;
  std::uint64_t served = 0;
  for (const auto& d : donors) {
    auto stats = d->state->stats();
    CHECK(stats.parts > 0);  // every donor served a stripe
    CHECK(stats.descriptions == 1);
    served += stats.parts;
  }
  CHECK(served == parts);  // and no part twice
  REQUIRE(got->donors.size() == 3);
  for (const auto& use : got->donors) {
    CHECK(use.failure.is_ok());
    CHECK(use.parts > 0);
  }
  std::vector<Donor*> all{donors[0].get(), donors[1].get(), donors[2].get()};
  CHECK(slots_freed(all));
}

TEST_CASE("A donor at its download limit refuses with 'busy' and the joiner goes to another", "[net][avg][state]") {
  zmq::context_t context;
  auto original = make_state(5, 4);
  Donor full(context, original, 1);
  Donor spare(context, original, 4);
  // Someone else holds the full donor's only slot.
  Joiner occupier(context);
  wire::AvgStateRequest describe{"run1", std::nullopt, 0, 0, 0, true, false};
  REQUIRE(occupier.client->ask<wire::AvgStateReply>(full.server->endpoint(), describe, 5s).is_ok());

  Joiner joiner(context);
  auto refused = joiner.client->ask<wire::AvgStateReply>(full.server->endpoint(), describe, 5s);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == Code::kRefused);
  CHECK_THAT(refused.status().message(), Contains("busy: 1 downloads in progress"));

  // The full donor is ranked first (same epoch and advertised load, higher priority) and refuses.
  DonorInfo first = full.info(1), second = spare.info(0);
  first.downloads = second.downloads = 0;
  auto got = download_state(*joiner.client, {second, first}, options_for(1, 2000), Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(same_bits(got->state.flat(), original->flat()));
  REQUIRE(got->donors.size() == 2);
  CHECK(got->donors[0].address == full.address().to_string());
  CHECK(got->donors[0].failure.code() == Code::kRefused);
  CHECK_THAT(got->donors[0].failure.message(), Contains("busy"));
  CHECK(got->donors[1].parts == (original->total_elements() + 1999) / 2000);
  CHECK(full.state->stats().parts == 0);
  CHECK(full.state->stats().refused_busy == 2);
  CHECK(full.state->stats().peak_downloads == 1);
}

TEST_CASE("A crowd of joiners spreads over donors without ever exceeding a donor's limit", "[net][avg][state]") {
  zmq::context_t context;
  auto original = make_state(8, 5, odd_specs(10));
  std::vector<std::unique_ptr<Donor>> donors;
  std::vector<DonorInfo> infos;
  for (size_t i = 0; i < 3; ++i) {
    donors.push_back(std::make_unique<Donor>(context, original, 2));
    infos.push_back(donors[i]->info());
  }
  // Four joiners, six slots: whoever a joiner finds full, some donor has room.
  std::vector<std::unique_ptr<Joiner>> joiners;
  for (size_t i = 0; i < 4; ++i) joiners.push_back(std::make_unique<Joiner>(context));
  std::vector<std::future<Result<DownloadedState>>> futures;
  for (size_t i = 0; i < 4; ++i) {
    futures.push_back(std::async(std::launch::async, [&, i] {
      auto options = options_for(1, 997);
      options.seed = 100 + i;
      return download_state(*joiners[i]->client, infos, options, Deadline::after(30s));
    }));
  }
  for (auto& f : futures) {
    auto got = f.get();
    REQUIRE(got.is_ok());
    CHECK(same_bits(got->state.flat(), original->flat()));
  }
  size_t used = 0;
  for (const auto& d : donors) {
    CHECK(d->state->stats().peak_downloads <= 2);
    used += d->state->stats().parts > 0;
  }
  // Their seeds rank the donors differently (equals are shuffled), and a full donor sends a joiner on: the
  // crowd never lands on one donor.
  CHECK(used >= 2);
}

TEST_CASE("A donor killed mid-download: the others finish the download in bounded time", "[net][avg][state]") {
  zmq::context_t context;
  auto original = make_state(21, 6, odd_specs(40));  // about 520k elements
  Donor a(context, original), b(context, original), c(context, original);
  Joiner joiner(context);
  auto options = options_for(2, 512);  // about 1000 parts from two donors at once; c is the spare
  options.window = 1;

  auto [got, took] = download_with_fault(joiner, {a.info(2), b.info(1), c.info(0)}, options, a, 5, [&] { a.kill(); });

  REQUIRE(got.is_ok());
  CHECK(same_bits(got->state.flat(), original->flat()));
  const std::uint64_t parts = (original->total_elements() + 511) / 512;
  const std::uint64_t by_a = a.state->stats().parts;
  CHECK(by_a >= 5);
  CHECK(by_a < parts);  // it died midway...
  REQUIRE(got->donors.size() >= 2);
  CHECK(got->donors[0].address == a.address().to_string());
  CHECK(got->donors[0].failure.code() == Code::kTimeout);  // ...and was dropped after one request timeout
  CHECK(b.state->stats().parts + c.state->stats().parts + got->donors[0].parts == parts);
  CHECK(took < 1.0 + 10.0);  // one request timeout, plus a generous allowance for a busy machine
}

TEST_CASE("Spares probed long ago are probed again before one is asked for a part", "[net][avg][state]") {
  // One donor at a time (max_donors 1): a serves, b and c answered their probes at the start and wait as
  // spares. b dies, then a; a is dropped after its request timeout (5 s). b, asked for a part as it was
  // when its probe answered, would cost another 5 s before c; probed again with c, it costs one probe.
  zmq::context_t context;
  auto original = make_state(21, 6, odd_specs(40));
  Donor a(context, original), b(context, original), c(context, original);
  Joiner joiner(context);
  auto options = options_for(1, 512);
  options.window = 1;
  options.request_timeout = 5s;
  options.probe_timeout = 200ms;

  auto [got, took] = download_with_fault(joiner, {a.info(2), b.info(1), c.info(0)}, options, a, 5, [&] {
    b.kill();
    a.kill();
  });

  REQUIRE(got.is_ok());
  CHECK(same_bits(got->state.flat(), original->flat()));
  REQUIRE_FALSE(got->donors.empty());
  CHECK(got->donors[0].address == a.address().to_string());
  CHECK(got->donors[0].failure.code() == Code::kTimeout);
  CHECK(got->donors.back().address == c.address().to_string());
  // b was never asked for a part: passed over after its second probe.
  for (const auto& used : got->donors) CHECK(used.address != b.address().to_string());
  CHECK(took < 5.0 + 3.0);  // a's request timeout and a probe, with room for a busy machine (before: 10 s and more)
}

TEST_CASE("All donors dead: a clear error within the deadline", "[net][avg][state]") {
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  auto original = make_state(2, 7);
  Donor a(context, original), b(context, original);
  advertise(*swarm, 1, a.info());
  advertise(*swarm, 2, b.info());
  a.kill();
  b.kill();
  Joiner joiner(context);

  auto start = std::chrono::steady_clock::now();
  auto got = download_state(swarm->node(0), *joiner.client, options_for(3, 1000), Deadline::after(10s));
  double took = seconds_since(start);
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kUnavailable);
  CHECK_THAT(got.status().message(), Contains("no donor reachable"));
  CHECK_THAT(got.status().message(), Contains(a.address().to_string()));
  CHECK(took < 1.0 + 3.0);  // both asked at once: one request timeout

  // A deadline shorter than the request and probe timeouts ends the wait at the deadline.
  auto impatient = options_for(3, 1000);
  impatient.request_timeout = 30s;
  impatient.probe_timeout = 30s;
  start = std::chrono::steady_clock::now();
  got = download_state(*joiner.client, {a.info(), b.info()}, impatient, Deadline::after(1500ms));
  took = seconds_since(start);
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kTimeout);
  CHECK(took < 1.5 + 2.0);

  // Nobody listed at all.
  auto nobody = options_for(3, 1000);
  nobody.run_id = "run2";
  got = download_state(swarm->node(0), *joiner.client, nobody, Deadline::after(10s));
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kNotFound);
  CHECK_THAT(got.status().message(), Contains("run2_donors"));
}

TEST_CASE("Donors at mixed epochs: the newest is downloaded and never mixed with older ones", "[net][avg][state]") {
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  auto epoch5 = make_state(5, 50), epoch7 = make_state(7, 70), epoch6 = make_state(6, 60);
  Donor d5(context, epoch5), d7(context, epoch7), d6(context, epoch6);
  advertise(*swarm, 0, d5.info());
  advertise(*swarm, 1, d7.info());
  advertise(*swarm, 2, d6.info());
  // The listing carries every advert.
  auto listed = list_donors(swarm->node(2), "run1", Deadline::after(10s));
  REQUIRE(listed.is_ok());
  CHECK(listed->size() == 3);

  Joiner joiner(context);
  auto got = download_state(swarm->node(0), *joiner.client, options_for(3, 1000), Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 7);
  CHECK(got->state.metadata == epoch7->metadata);
  CHECK(same_bits(got->state.flat(), epoch7->flat()));
  CHECK(d7.state->stats().parts == (epoch7->total_elements() + 999) / 1000);
  CHECK(d5.state->stats().parts == 0);
  CHECK(d6.state->stats().parts == 0);
  CHECK(slots_freed({&d5, &d6, &d7}));  // the older donors were released at once
}

TEST_CASE("A download capped at an epoch passes over donors further on, even one whose advert lags", "[net][avg][state]") {
  // A peer taking part in a round at weight 0 needs the state that round averages for (max_epoch), not the
  // swarm's front a round further on.
  zmq::context_t context;
  auto epoch5 = make_state(5, 50), epoch6 = make_state(6, 60), epoch7 = make_state(7, 70);
  Donor d6(context, epoch6), d7(context, epoch7), lagging(context, epoch5);
  const DonorInfo lagging_advert = lagging.info();  // listed at epoch 5...
  lagging.state->set_state(epoch7);                 // ...and stepped twice since
  Joiner joiner(context);
  auto options = options_for(2, 1000);
  options.max_epoch = 6;

  auto got = download_state(*joiner.client, {lagging_advert, d7.info(), d6.info()}, options, Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 6);
  CHECK(same_bits(got->state.flat(), epoch6->flat()));
  CHECK(d7.state->stats().parts == 0);
  CHECK(lagging.state->stats().parts == 0);
  // The lagging donor was probed and passed over with the reason; the one listed past the cap, never asked.
  bool lagging_passed_over = false;
  for (const auto& use : got->passed_over) {
    if (use.address != lagging_advert.address.to_string()) continue;
    lagging_passed_over = true;
    CHECK_THAT(use.failure.message(), Contains("it holds epoch 7, past the 6 wanted"));
  }
  CHECK(lagging_passed_over);
  CHECK(d7.state->stats().peak_downloads == 0);
  CHECK(slots_freed({&d6, &d7, &lagging}));

  // Uncapped, the same donors give the newest.
  got = download_state(*joiner.client, {lagging_advert, d7.info(), d6.info()}, options_for(2, 1000), Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 7);

  // Nobody listed at or before the cap: nobody to ask.
  options.max_epoch = 4;
  got = download_state(*joiner.client, {d6.info(), d7.info()}, options, Deadline::after(30s));
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kNotFound);
}

TEST_CASE("Donors disagreeing on the schema: an error, unless the joiner names its own", "[net][avg][state]") {
  zmq::context_t context;
  auto ours = make_state(3, 8);
  auto other = make_state(3, 9, {{"embed.weight", {97, 32}}, {"ln.weight", {31}}});
  Donor a(context, ours), b(context, other);
  Joiner joiner(context);

  auto got = download_state(*joiner.client, {a.info(), b.info()}, options_for(2, 1000), Deadline::after(30s));
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kRefused);
  CHECK_THAT(got.status().message(), Contains("donors disagree on schema at epoch 3"));

  auto options = options_for(2, 1000);
  options.expected_schema = ours->schema_hash();
  got = download_state(*joiner.client, {a.info(), b.info()}, options, Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(same_bits(got->state.flat(), ours->flat()));
  CHECK(b.state->stats().parts == 0);
  CHECK(slots_freed({&a, &b}));
}

TEST_CASE("A donor that moves on midway keeps serving the epoch the download started with", "[net][avg][state]") {
  zmq::context_t context;
  auto old_state = make_state(10, 10, odd_specs(20));
  auto new_state = make_state(11, 11, odd_specs(20));
  Donor donor(context, old_state);
  Joiner joiner(context);
  auto options = options_for(1, 1000);
  options.window = 1;

  std::atomic<bool> stop{false};
  std::thread owner([&] {
    while (!stop && donor.state->stats().parts < 3) std::this_thread::sleep_for(200us);
    donor.state->set_state(new_state);  // the next epoch, published mid-download
  });
  auto got = download_state(*joiner.client, {donor.info()}, options, Deadline::after(30s));
  stop = true;
  owner.join();
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 10);
  CHECK(same_bits(got->state.flat(), old_state->flat()));

  // A download that starts now gets the new epoch.
  got = download_state(*joiner.client, {donor.info()}, options, Deadline::after(30s));
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 11);
  CHECK(same_bits(got->state.flat(), new_state->flat()));

  // A request naming an epoch no longer held is refused with the reason.
  Joiner late(context);
  wire::AvgStateRequest stale{"run1", 10, 0, 10, 0, false, false};
  auto refused = late.client->ask<wire::AvgStateReply>(donor.server->endpoint(), stale, 5s);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == Code::kNotFound);
  CHECK_THAT(refused.status().message(), Contains("epoch 10 is not held here (serving epoch 11)"));
  CHECK(donor.state->stats().refused_epoch == 1);
}

TEST_CASE("Dead donors ranked first: a joiner still downloads from a live one within a bound", "[net][avg][state]") {
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  // Two epochs ahead: an advert one epoch ahead ranks alike with the live donor's (rank_donors).
  auto swarm_state = make_state(30, 30), lost_state = make_state(32, 31);
  Donor live(context, swarm_state);
  advertise(*swarm, 0, live.info());

  // Four peers that advertised a newer epoch just before they died, so that they rank first: two crashed
  // processes (their ports closed), one frozen process (TCP accepts, nothing reads) and one peer whose
  // ZeroMQ socket takes requests and never answers.
  Donor crashed_a(context, lost_state), crashed_b(context, lost_state);
  FrozenListener frozen;
  SilentPeer silent(context);
  std::vector<DonorInfo> dead{crashed_a.info(), crashed_b.info(), crashed_a.info(), crashed_a.info()};
  dead[2].address = net::PeerAddress{frozen.endpoint, crypto::Identity::generate().peer_id()};
  dead[3].address = net::PeerAddress{silent.endpoint, crypto::Identity::generate().peer_id()};
  for (const auto& d : dead) advertise(*swarm, 1, d);
  crashed_a.kill();
  crashed_b.kill();
  auto listed = list_donors(swarm->node(0), "run1", Deadline::after(10s));
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 5);
  std::mt19937_64 rng(1);
  CHECK(rank_donors(*listed, rng).back().address.endpoint == live.server->endpoint());

  // As the trainer downloads: one donor for the transfer, the default 10 s request timeout, which the old
  // download spent on each dead donor in turn. The bound is well under one request timeout.
  constexpr double kBound = 3.0;
  auto options = options_for(1, 1000);
  options.request_timeout = DownloadOptions{}.request_timeout;
  REQUIRE(options.request_timeout >= 10s);
  auto start = std::chrono::steady_clock::now();
  auto got = download_state(swarm->node(0), *joiner_client(context), options, Deadline::after(25s));
  double took = seconds_since(start);
  REQUIRE(got.is_ok());
  CHECK(took < kBound);
  CHECK(got->state.epoch() == 30);
  CHECK(same_bits(got->state.flat(), swarm_state->flat()));
  CHECK(live.state->stats().parts == (swarm_state->total_elements() + 999) / 1000);
  // Only the live donor was asked for the state; every dead one was probed once, failed and was passed over.
  REQUIRE(got->donors.size() == 1);
  CHECK(got->donors[0].address == live.address().to_string());
  std::set<std::string> passed_over;
  for (const auto& use : got->passed_over) {
    CHECK_FALSE(use.failure.is_ok());
    passed_over.insert(use.address);
  }
  CHECK(got->passed_over.size() == 4);
  CHECK(passed_over.size() == 4);
  CHECK(silent.requests == 1);

  // Probing two at a time, the live donor is reached in the third round: every listed donor is eligible
  // once the first choices fail, and the wait grows by one probe timeout per round, not a request timeout.
  auto narrow = options;
  narrow.probe_fanout = 2;
  start = std::chrono::steady_clock::now();
  got = download_state(swarm->node(0), *joiner_client(context), narrow, Deadline::after(25s));
  took = seconds_since(start);
  REQUIRE(got.is_ok());
  CHECK(got->state.epoch() == 30);
  CHECK(took < 2 * std::chrono::duration<double>(narrow.probe_timeout).count() + kBound);
  CHECK(silent.requests == 2);
}

TEST_CASE("No donor reachable: kUnavailable (retry later), not kNotFound (nobody listed)", "[net][avg][state]") {
  zmq::context_t context;
  FrozenListener frozen;
  SilentPeer silent(context);
  DonorInfo a, b;
  a.address.endpoint = frozen.endpoint;
  b.address.endpoint = silent.endpoint;
  a.epoch = b.epoch = 9;
  auto options = options_for(1, 1000);
  options.request_timeout = 10s;
  auto start = std::chrono::steady_clock::now();
  auto got = download_state(*joiner_client(context), {a, b}, options, Deadline::after(25s));
  double took = seconds_since(start);
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().code() == Code::kUnavailable);
  CHECK_THAT(got.status().message(), Contains("no donor reachable"));
  CHECK(took < 3.0);  // one probe timeout, not a request timeout
}
