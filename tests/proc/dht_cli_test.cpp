// Three `dedloc-dht serve` processes; store and get through the CLI; one node SIGKILLed.
#include <catch2/catch.hpp>

#include <csignal>
#include <regex>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

std::string dht_binary() { return test::binary_path("tools/dedloc-dht/dedloc-dht"); }

struct Finished {
  std::optional<int> exit_code;
  std::string out;
};

// Runs a one-shot dedloc-dht command to completion, with a deadline.
Finished run(std::vector<std::string> args) {
  args.insert(args.begin(), dht_binary());
  auto child = test::ChildProcess::spawn(args);
  Finished result;
  while (auto line = child.read_line(30s)) result.out += *line + "\n";
  result.exit_code = child.wait(10s);
  return result;
}

// Starts `dedloc-dht serve` and returns it with the address from its ready line.
std::pair<test::ChildProcess, std::string> serve(const std::vector<std::string>& initial_peers) {
  std::vector<std::string> args{dht_binary(), "serve", "--listen", "tcp://127.0.0.1:0", "--log-level", "warning"};
  for (const auto& peer : initial_peers) args.insert(args.end(), {"--initial-peers", peer});
  auto [child, json] = test::start_ready(args);
  REQUIRE(json["role"] == "dht");
  std::string address = json["endpoints"][0];
  // Encrypted by default: the address carries the node's key (which names the peer: net/peer_address.hpp).
  CHECK(std::regex_match(address, std::regex("tcp://127\\.0\\.0\\.1:\\d+/k/[0-9a-f]{64}")));
  return {std::move(child), address};
}

}  // namespace

TEST_CASE("Three dedloc-dht processes: store and get through the CLI, survive a SIGKILL", "[proc][dht]") {
  auto [first, first_address] = serve({});
  auto [second, second_address] = serve({first_address});
  auto [third, third_address] = serve({second_address});

  auto stored = run({"store", "greeting", "hello world", "--initial-peers", third_address, "--json"});
  REQUIRE(stored.exit_code == 0);
  auto stored_json = nlohmann::json::parse(stored.out);
  CHECK(stored_json["stored"] == 3);  // three nodes: all of them are among the 5 nearest

  auto dict_a = run({"store", "run_progress", R"({"step": 7, "samples": 512})", "--subkey", "peer-a",
                     "--initial-peers", first_address});
  auto dict_b = run({"store", "run_progress", R"({"step": 8, "samples": 640})", "--subkey", "peer-b",
                     "--initial-peers", second_address});
  REQUIRE(dict_a.exit_code == 0);
  REQUIRE(dict_b.exit_code == 0);
  CHECK_THAT(dict_a.out, Catch::Contains("stored 'run_progress' subkey 'peer-a' on 3 of 3 replicas"));

  auto got = run({"get", "greeting", "--initial-peers", first_address, "--json"});
  REQUIRE(got.exit_code == 0);
  auto got_json = nlohmann::json::parse(got.out);
  CHECK(got_json["found"] == true);
  CHECK(got_json["value"] == "hello world");
  CHECK(got_json["expiration"].get<double>() > 0);

  // The first node dies without a word; the others still answer.
  first.kill(SIGKILL);
  CHECK(first.wait(10s) == 128 + SIGKILL);

  auto after = run({"get", "run_progress", "--latest", "--initial-peers", third_address, "--json"});
  REQUIRE(after.exit_code == 0);
  auto after_json = nlohmann::json::parse(after.out);
  CHECK(after_json["subkeys"]["peer-a"]["value"]["step"] == 7);
  CHECK(after_json["subkeys"]["peer-b"]["value"]["samples"] == 640);

  auto human = run({"get", "greeting", "--initial-peers", second_address});
  REQUIRE(human.exit_code == 0);
  CHECK_THAT(human.out, Catch::Contains("greeting = \"hello world\""));
  CHECK_THAT(human.out, Catch::Contains("expires"));

  auto missing = run({"get", "no-such-key", "--initial-peers", second_address});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.out, Catch::Contains("not found"));

  auto peers = run({"peers", "--initial-peers", third_address, "--json"});
  REQUIRE(peers.exit_code == 0);
  CHECK(nlohmann::json::parse(peers.out)["stored_keys"] == 2);

  // A dead initial peer is a clear error, not a hang.
  auto dead = run({"get", "greeting", "--initial-peers", first_address, "--timeout", "2"});
  CHECK(dead.exit_code == 4);

  // SIGTERM: a clean exit.
  second.kill(SIGTERM);
  CHECK(second.wait(10s) == 0);
  third.kill(SIGTERM);
  CHECK(third.wait(10s) == 0);
}

TEST_CASE("A node started with --plaintext listens unencrypted, and only peers that say --plaintext too dial it",
          "[proc][dht][curve]") {
  auto [child, json] = test::start_ready(
      {dht_binary(), "serve", "--plaintext", "--listen", "tcp://127.0.0.1:0", "--log-level", "warning"});
  const std::string address = json["endpoints"][0];
  CHECK(std::regex_match(address, std::regex("tcp://127\\.0\\.0\\.1:\\d+/p/" + json["peer_id"].get<std::string>())));

  // An encrypted peer refuses to fall back to plaintext on its own, and says what to do.
  auto refused = test::run_command(dht_binary() + " store k v --initial-peers " + address);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("--initial-peers " + address));
  CHECK_THAT(refused.output, Catch::Contains("no key (/k/KEY)"));
  CHECK_THAT(refused.output, Catch::Contains("--plaintext"));

  auto stored = run({"store", "k", "v", "--plaintext", "--initial-peers", address});
  CHECK(stored.exit_code == 0);
  auto got = run({"get", "k", "--plaintext", "--initial-peers", address});
  CHECK(got.exit_code == 0);
  CHECK_THAT(got.out, Catch::Contains("k = \"v\""));
  child.kill(SIGTERM);
  CHECK(child.wait(10s) == 0);
}
