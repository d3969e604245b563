// Each tool offers only the common flags it honours (cli::HonouredFlags): its --help lists no flag it would
// ignore, and giving one is a usage error that names it, rather than a flag silently ignored.
#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace std::chrono_literals;

namespace {

dedloc::test::CommandOutput run_tool(const std::string& tool, const std::string& args) {
  return dedloc::test::run_command(dedloc::test::binary_path("tools/" + tool + "/" + tool) + " " + args, 30s);
}

// The tool refuses `args` as a usage error (exit 2) whose message names `flag`.
void check_refused(const std::string& tool, const std::string& args, const std::string& flag) {
  auto run = run_tool(tool, args);
  INFO(tool << " " << args << "\n" << run.output);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.output, Catch::Contains(flag) && Catch::Contains("error"));
}

}  // namespace

TEST_CASE("dedloc-relay offers no --config, --print-config or --json and refuses them", "[cli][relay]") {
  auto help = run_tool("dedloc-relay", "--help");
  INFO(help.output);
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.output,
             Catch::Contains("--identity") && Catch::Contains("--token") && Catch::Contains("--plaintext"));
  CHECK_THAT(help.output,
             !Catch::Contains("--config") && !Catch::Contains("--print-config") && !Catch::Contains("--json"));
  check_refused("dedloc-relay", "--config relay.yaml serve", "--config");
  check_refused("dedloc-relay", "serve --config relay.yaml", "--config");
  check_refused("dedloc-relay", "serve --json", "--json");
}

TEST_CASE("dedloc-plan offers no --identity, --authority, --token or --plaintext and refuses them", "[cli][plan]") {
  auto help = run_tool("dedloc-plan", "--help");
  INFO(help.output);
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.output,
             Catch::Contains("--config") && Catch::Contains("--print-config") && Catch::Contains("--json"));
  CHECK_THAT(help.output, !Catch::Contains("--identity") && !Catch::Contains("--authority") &&
                              !Catch::Contains("--token") && !Catch::Contains("--plaintext"));
  const std::string peers = " --peers " + dedloc::test::source_path("configs/peers/gpu-plus-cpu.yaml");
  check_refused("dedloc-plan", "--identity plan.key" + peers, "--identity");
  check_refused("dedloc-plan", "--token plan.token" + peers, "--token");
  check_refused("dedloc-plan", "--plaintext" + peers, "--plaintext");
}

TEST_CASE("dedloc-avg's subcommands refuse the common flags they do not use, before or after the subcommand",
          "[cli][avg]") {
  auto help = run_tool("dedloc-avg", "--help");
  INFO(help.output);
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("--identity") && Catch::Contains("--json"));
  CHECK_THAT(help.output, !Catch::Contains("--config") && !Catch::Contains("--print-config"));
  check_refused("dedloc-avg", "--config avg.yaml aux --run r --initial-peers tcp://127.0.0.1:1", "--config");
  check_refused("dedloc-avg", "bench --identity bench.key --peers 2 --size 1KiB", "--identity");
  check_refused("dedloc-avg", "--token t bench --peers 2 --size 1KiB", "--token");
  check_refused("dedloc-avg", "aux --json --run r --initial-peers tcp://127.0.0.1:1", "--json");
}

TEST_CASE("dedloc-dht's subcommands refuse the common flags they do not use", "[cli][dht]") {
  check_refused("dedloc-dht", "serve --json --listen tcp://127.0.0.1:0", "--json");
  check_refused("dedloc-dht", "--plaintext token issue --authority-key a.key --peer-key 00 --name n", "--plaintext");
  check_refused("dedloc-dht", "token show t.token --identity x.key", "--identity");
  check_refused("dedloc-dht", "identity --identity x.key --token t.token", "--token");
}

#ifdef DEDLOC_TEST_TOKENIZE
TEST_CASE("dedloc-tokenize offers only --log-level of the common flags", "[cli][tokenize]") {
  auto help = run_tool("dedloc-tokenize", "--help");
  INFO(help.output);
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("--log-level"));
  for (const char* absent : {"--config", "--print-config", "--identity", "--token", "--plaintext", "--json"}) {
    CHECK_THAT(help.output, !Catch::Contains(absent));
  }
  check_refused("dedloc-tokenize", "--config t.yaml --out /nonexistent/tokens.bin", "--config");
}
#endif
