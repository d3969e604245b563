// A private collaboration with the real tools: an authority issues tokens with `dedloc-dht token
// issue`; two `dedloc-dht serve` nodes of the run join each other; a peer with a valid token stores and
// reads records; a peer without a token, with another authority's token, or with an expired one is refused
// with one line that says why.
#include <catch2/catch.hpp>

#include <thread>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/private_run.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

const std::string& dht_binary() {
  static const std::string path = test::binary_path("tools/dedloc-dht/dedloc-dht");
  return path;
}

// A `dedloc-dht serve` member of the run: the process and its address.
std::pair<test::ChildProcess, std::string> serve(const test::PrivateRun& run, const std::string& name,
                                                 const std::string& initial_peer = "",
                                                 const std::string& revocation_refresh = "1") {
  std::vector<std::string> argv{dht_binary(), "--log-level", "warning"};
  for (auto& flag : run.member(name)) argv.push_back(flag);
  argv.insert(argv.end(), {"serve", "--listen", "tcp://127.0.0.1:0", "--revocation-refresh", revocation_refresh});
  if (!initial_peer.empty()) argv.insert(argv.end(), {"--initial-peers", initial_peer});
  auto [node, ready] = test::start_ready(argv);
  return {std::move(node), ready["endpoints"][0].get<std::string>()};
}

}  // namespace

TEST_CASE("A private run: members join and store, outsiders are refused with the reason", "[proc][access]") {
  test::PrivateRun run;
  auto [first, first_address] = serve(run, "first");
  auto [second, second_address] = serve(run, "second", first_address);  // a member joins through a member

  const std::string alice = test::joined(run.member("alice"));
  auto stored = test::run_dht(alice + " store greeting hello --initial-peers " + second_address + " --json");
  INFO(stored.output);
  REQUIRE(stored.exit_code == 0);
  CHECK(nlohmann::json::parse(stored.output)["stored"] == 2);
  auto got = test::run_dht(alice + " get greeting --initial-peers " + first_address);
  CHECK(got.exit_code == 0);
  CHECK_THAT(got.output, Catch::Contains("hello"));

  SECTION("no token") {
    auto outsider = test::run_dht("get greeting --initial-peers " + first_address);
    INFO(outsider.output);
    CHECK(outsider.exit_code != 0);
    CHECK_THAT(outsider.output, Catch::Contains("this run is private"));
    CHECK_THAT(outsider.output, Catch::Contains("--authority and --token"));
  }
  SECTION("a token from another authority") {
    const std::string other_authority = run.dir() + "/other-authority.key";
    (void)test::PrivateRun::public_key(other_authority);
    auto flags = run.member("mallory", "1d", other_authority);
    auto refused = test::run_dht(test::joined(flags) + " get greeting --initial-peers " + first_address);
    INFO(refused.output);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Catch::Contains("not this run's authority"));
  }
  SECTION("an expired token: refused before the peer starts, naming the flag") {
    auto flags = run.member("late", "1s");
    std::this_thread::sleep_for(1100ms);  // the token's lifetime, not a wait for the system under test
    auto refused = test::run_dht(test::joined(flags) + " get greeting --initial-peers " + first_address);
    INFO(refused.output);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Catch::Contains("--token"));
    CHECK_THAT(refused.output, Catch::Contains("expired"));
  }
  SECTION("a token issued to someone else") {
    auto flags = run.member("bob");
    flags[1] = run.dir() + "/not-bob.key";  // bob's token with another identity
    auto refused = test::run_dht(test::joined(flags) + " get greeting --initial-peers " + first_address);
    INFO(refused.output);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Catch::Contains("not to this identity"));
  }
  SECTION("revoked by the authority: refused once the nodes have read the list") {
    auto bob = run.member("bob");
    const std::string bob_key = test::PrivateRun::public_key(run.dir() + "/bob.key");
    REQUIRE(test::run_dht(test::joined(bob) + " get greeting --initial-peers " + first_address).exit_code == 0);
    auto revoked = test::run_dht("token revoke --authority-key " + run.authority_key() + " --peer-key " + bob_key +
                       " --initial-peers " + first_address);
    INFO(revoked.output);
    REQUIRE(revoked.exit_code == 0);
    CHECK_THAT(revoked.output, Catch::Contains("the list holds 1 key"));
    // Bob's get through `address`, repeated until it is refused as revoked or `within` has passed. Another
    // failure (a lookup nobody answered in time, on a loaded machine) is not the refusal awaited: try again.
    auto refused_through = [&bob](const std::string& address, Duration within) {
      test::CommandOutput out;
      const auto until = std::chrono::steady_clock::now() + within;
      do {
        out = test::run_dht(test::joined(bob) + " get greeting --initial-peers " + address);
      } while ((out.exit_code == 0 || out.output.find("revoked") == std::string::npos) &&
               std::chrono::steady_clock::now() < until);
      return out;
    };
    // The nodes read the list every second: poll until bob is refused, for 20 s at most.
    auto refused = refused_through(first_address, 20s);
    INFO(refused.output);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Catch::Contains("revoked"));
    // Alice is still served.
    CHECK(test::run_dht(alice + " get greeting --initial-peers " + second_address).exit_code == 0);

    // A node that joins now, reading the list only every 30 s, refuses bob at once: it reads the list as
    // soon as it has joined (at its start the routing table was still empty).
    auto [late, late_address] = serve(run, "late", first_address, "30");
    refused = refused_through(late_address, 10s);  // well inside its 30 s refresh
    INFO(refused.output);
    CHECK(refused.exit_code != 0);
    CHECK_THAT(refused.output, Catch::Contains("revoked"));
  }
  SECTION("--authority without --token") {
    auto refused = test::run_dht("--authority " + run.authority() + " get greeting --initial-peers " + first_address);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.output, Catch::Contains("--authority needs --token FILE"));
  }
}
