// SIGINT ends dedloc-train promptly whatever it waits on: joining the DHT through an initial peer that never
// answers, downloading the swarm's state from a donor that never answers, and matchmaking for a group whose
// other member stopped answering. Each time the process exits with 130 (docs/operators.md: interrupted)
// within 2 s of the signal, and its progress record, when it had published one, is withdrawn.
//
// "Never answers" is a SIGSTOPped process (the kernel still accepts connections to its sockets, so every
// request waits out its deadline, as with a machine that hangs), or, for the DHT's datagrams, a UDP socket
// nobody reads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include <catch2/catch.hpp>
#include <zmq.hpp>

#include "dedloc/collab/progress.hpp"
#include "dedloc/dht/node.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::ChildProcess;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

constexpr auto kPromptly = 2s;  // from the signal to the exit

std::pair<ChildProcess, std::string> start_dht_node() {
  auto [node, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                  "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  return {std::move(node), ready["endpoints"][0].get<std::string>()};
}

// SIGINT, then the exit code and how long the process took to exit after it.
std::pair<std::optional<int>, std::chrono::duration<double>> interrupt(ChildProcess& process) {
  const auto sent = std::chrono::steady_clock::now();
  process.kill(SIGINT);
  auto code = process.wait(30s);
  return {code, std::chrono::steady_clock::now() - sent};
}

// The run's progress records as the DHT holds them, read by an in-test client-mode node.
class ProgressReader {
 public:
  explicit ProgressReader(const std::string& bootstrap)
      : node_(context_, dedloc::crypto::Identity::generate(), options()) {
    dedloc::collab::add_progress_schema(node_.validator());
    REQUIRE(node_.start().is_ok());
    auto address = dedloc::net::PeerAddress::parse(bootstrap);
    REQUIRE(address);
    REQUIRE(node_.bootstrap({*address}, dedloc::Deadline::after(10s)).is_ok());
  }

  // The epochs of the live (not withdrawn) records.
  std::vector<std::uint64_t> epochs(const std::string& run_id) {
    auto records = dedloc::collab::read_progress(node_, run_id, dedloc::Deadline::after(5s));
    REQUIRE(records);
    std::vector<std::uint64_t> out;
    for (const auto& record : *records) out.push_back(record.epoch);
    return out;
  }

 private:
  static dedloc::dht::NodeOptions options() {
    dedloc::dht::NodeOptions o;
    o.listen = "";
    o.client_mode = true;
    o.maintenance_interval = dedloc::Duration::zero();
    return o;
  }
  zmq::context_t context_;
  dedloc::dht::Node node_;
};

std::string recipe_with(const std::string& name, const std::vector<std::pair<std::string, std::string>>& changes) {
  return dedloc::test::write_recipe_variant("recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-interrupt"), name,
                                            changes);
}

}  // namespace

TEST_CASE("dedloc-train: SIGINT while joining through an initial peer that never answers exits 130 within 2 s",
          "[proc][train][interrupt]") {
  auto [dht, address] = start_dht_node();
  // The trainer's first ping goes to the node's key at a UDP port of the test's that never answers (DHT nodes
  // talk in datagrams), so the test sees when its join has begun.
  const int sink = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(sink >= 0);
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t bound_size = sizeof(bound);
  REQUIRE(::bind(sink, reinterpret_cast<const sockaddr*>(&bound), sizeof(bound)) == 0);
  REQUIRE(::getsockname(sink, reinterpret_cast<sockaddr*>(&bound), &bound_size) == 0);
  const std::string through =
      "tcp://127.0.0.1:" + std::to_string(ntohs(bound.sin_port)) + address.substr(address.find("/k/"));

  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = through, .run_id = "interrupt-join"};
  auto trainer = ChildProcess::spawn(dedloc::test::trainer_command(args));
  pollfd ping{sink, POLLIN, 0};
  REQUIRE(::poll(&ping, 1, 60000) == 1);
  ::close(sink);
  std::this_thread::sleep_for(300ms);  // well into the first ping's 2 s deadline

  auto [code, took] = interrupt(trainer);
  INFO("exited " << took.count() << " s after SIGINT");
  CHECK(code == 130);
  CHECK(took < kPromptly);
}

TEST_CASE("dedloc-train: SIGINT while downloading the state from a donor that never answers exits 130 within 2 s, "
          "its progress record withdrawn",
          "[proc][train][interrupt]") {
  auto [dht, address] = start_dht_node();
  // The donor trains alone past epoch 3, then stops answering: its donor and progress records stay in the
  // DHT (their TTL is 30 s), so a joiner sees the swarm ahead and insists on downloading from it.
  TrainerArgs donor_args{.recipe = "recipes/mlp.yaml", .initial_peer = address, .run_id = "interrupt-download",
                         .max_time = 300};
  auto donor = TrainerProcess::start("donor", donor_args);
  REQUIRE(donor.has_value());
  REQUIRE(pump_until({&*donor}, 60s, [&] { return donor->epoch() >= 3; }));
  donor->process().kill(SIGSTOP);

  ProgressReader reader(address);
  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = address, .run_id = "interrupt-download", .data_seed = 2};
  auto joiner = ChildProcess::spawn(dedloc::test::trainer_command(args));
  // Its progress record (epoch 0) is published just before the download starts.
  auto joined = [&] {
    for (auto epoch : reader.epochs("interrupt-download")) {
      if (epoch == 0) return true;
    }
    return false;
  };
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!joined() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  REQUIRE(joined());
  std::this_thread::sleep_for(1s);  // into the first request to the silent donor (its timeout: 10 s)

  auto [code, took] = interrupt(joiner);
  INFO("exited " << took.count() << " s after SIGINT");
  CHECK(code == 130);
  CHECK(took < kPromptly);
  CHECK_FALSE(joined());  // only the stopped donor's record is left
  // It never pretended to train: no step line, no ready line on its stdout.
  auto line = joiner.read_line(100ms);
  CHECK_FALSE(line.has_value());
  donor->process().kill(SIGCONT);
}

TEST_CASE("dedloc-train: SIGINT while matchmaking for a group whose other member stopped exits 130 within 2 s, "
          "its progress record withdrawn",
          "[proc][train][interrupt]") {
  auto [dht, address] = start_dht_node();
  // Two peers that average every step; with a long matchmaking time, the survivor of its partner's stop
  // waits for it in matchmaking (its micro-batches take milliseconds, so that is where it spends its time).
  // Its partner may stop inside a round they had formed: the survivor's first signal would let that round
  // run to its end (leaving gracefully), so rounds end within 3 s, and the survivor must be quiet for
  // longer than that before the signal.
  const auto recipe = recipe_with("mlp-long-matchmaking.yaml", {{"  matchmaking_time: 1 ", "  matchmaking_time: 60 "},
                                                                {"  averaging_timeout: 30", "  averaging_timeout: 3"}});
  TrainerArgs a_args{.recipe = recipe, .initial_peer = address, .run_id = "interrupt-mm", .data_seed = 1,
                     .max_time = 300, .min_peers = 2};
  TrainerArgs b_args = a_args;
  b_args.data_seed = 2;
  auto a = ChildProcess::spawn(dedloc::test::trainer_command(a_args));
  auto b = TrainerProcess::start("b", b_args);
  REQUIRE(b.has_value());
  REQUIRE(pump_until({&*b}, 120s, [&] { return b->averaged_rounds() >= 2; }));
  a.kill(SIGSTOP);
  // b is stuck in its next round once its steps stop coming (a step there would be "local", not averaged).
  std::uint64_t last = b->epoch();
  for (int quiet = 0; quiet < 40;) {
    b->pump(100ms);
    quiet = b->epoch() == last ? quiet + 1 : 0;
    last = b->epoch();
  }
  ProgressReader reader(address);
  REQUIRE(reader.epochs("interrupt-mm").size() == 2);

  const size_t steps_before = b->steps().size();
  auto [code, took] = interrupt(b->process());
  INFO("exited " << took.count() << " s after SIGINT");
  CHECK(code == 130);
  CHECK(took < kPromptly);
  b->pump(100ms);
  CHECK(b->steps().size() == steps_before);  // the step whose averaging was cut short was not taken
  CHECK(reader.epochs("interrupt-mm").size() == 1);  // a's, which nobody withdrew
  a.kill(SIGCONT);
}
