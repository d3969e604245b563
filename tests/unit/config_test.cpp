#include <catch2/catch.hpp>

#include "dedloc/cli/app.hpp"
#include "dedloc/core/config.hpp"
#include "dedloc/core/files.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;

namespace {

struct DemoOptions {
  std::string listen = "tcp://0.0.0.0:31337";
  int bucket_size = 20;
  Duration timeout = std::chrono::seconds(5);
  std::vector<std::string> initial_peers;
  double ratio = 0.5;
  bool client_mode = false;
  std::string codec = "fp16";  // in section "averaging"
};

void read_demo(ConfigReader& r, DemoOptions& o) {
  r.read("listen", o.listen);
  r.read("bucket_size", o.bucket_size);
  r.read("timeout", o.timeout);
  r.read("initial_peers", o.initial_peers);
  r.read("ratio", o.ratio);
  r.read("client_mode", o.client_mode);
  auto averaging = r.section("averaging");
  averaging.read("codec", o.codec);
}

// Reads `yaml` (named `source`) into `o` and returns what finish() reports.
Status read_demo_text(const std::string& yaml, const std::string& source, DemoOptions& o) {
  auto reader = ConfigReader::from_string(yaml, source);
  REQUIRE(reader.is_ok());
  read_demo(*reader, o);
  return reader->finish();
}

}  // namespace

TEST_CASE("YAML values override defaults and absent keys keep them", "[unit][config]") {
  auto reader = ConfigReader::from_string("listen: tcp://127.0.0.1:9000\ntimeout: 0.25\ninitial_peers: [a, b]\n"
                                          "averaging:\n  codec: uniform8\n",
                                          "demo.yaml");
  REQUIRE(reader.is_ok());
  DemoOptions o;
  read_demo(*reader, o);
  REQUIRE(reader->finish().is_ok());
  CHECK(o.listen == "tcp://127.0.0.1:9000");
  CHECK(o.bucket_size == 20);
  CHECK(o.timeout == std::chrono::milliseconds(250));
  CHECK(o.initial_peers == std::vector<std::string>{"a", "b"});
  CHECK(o.codec == "uniform8");
}

TEST_CASE("An unknown key is an error naming the key and the file", "[unit][config]") {
  DemoOptions o;
  Status st = read_demo_text("listen: tcp://127.0.0.1:9000\nlisten_addr: oops\n", "configs/dht.yaml", o);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.message() == "configs/dht.yaml: unknown key 'listen_addr'");
  CHECK(read_demo_text("averaging:\n  codecs: fp16\n", "r.yaml", o).message() ==
        "r.yaml: unknown key 'averaging.codecs'");
}

TEST_CASE("A mistyped value is an error naming the key, the file and the line", "[unit][config]") {
  DemoOptions o;
  Status st = read_demo_text("listen: x\nbucket_size: twenty\n", "demo.yaml", o);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.code() == Code::kInvalidArgument);
  CHECK(st.message() == "demo.yaml:2: key 'bucket_size' must be an integer");
  CHECK(o.bucket_size == 20);  // the default survives a bad value

  CHECK(read_demo_text("timeout: -1\n", "demo.yaml", o).message() ==
        "demo.yaml:1: key 'timeout' must be a non-negative number of seconds");
  // More seconds than a Duration holds (the conversion would be undefined behaviour).
  CHECK(read_demo_text("timeout: 1.5e300\n", "demo.yaml", o).message() ==
        "demo.yaml:1: key 'timeout' must be a number of seconds up to 1e9");
}

TEST_CASE("A null, sequence or mapping as a key is an unknown key, not an exception", "[unit][config]") {
  // YAML allows any node as a key; keys() and finish() used to throw on them (found by the config fuzz target).
  DemoOptions o;
  CHECK(read_demo_text("? [a, b]\n: 1\n", "k.yaml", o).message() == "k.yaml: unknown key '<a sequence as a key, line 1>'");
  CHECK(read_demo_text("~: 1\n", "k.yaml", o).message() == "k.yaml: unknown key '~'");
  auto reader = ConfigReader::from_string("{a: 1}: x\nlisten: y\n", "k.yaml");
  REQUIRE(reader.is_ok());
  CHECK(reader->keys() == std::vector<std::string>{"<a mapping as a key, line 1>", "listen"});
}

TEST_CASE("Invalid YAML and missing files give clear errors", "[unit][config]") {
  auto bad = ConfigReader::from_string("listen: [unclosed\n", "broken.yaml");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().rfind("broken.yaml:", 0) == 0);

  auto list = ConfigReader::from_string("- a\n- b\n", "list.yaml");
  REQUIRE_FALSE(list.is_ok());
  CHECK(list.status().message() == "list.yaml: the top level must be a mapping of keys");

  auto missing = ConfigReader::from_file("/nonexistent/dedloc.yaml");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == Code::kNotFound);
}

TEST_CASE("CLI flags override YAML which overrides defaults", "[unit][config][cli]") {
  std::string dir = test::make_temp_dir("dedloc-config");
  std::string path = dir + "/demo.yaml";
  REQUIRE(write_file_atomically(path, "listen: tcp://127.0.0.1:9000\nbucket_size: 8\n").is_ok());

  const char* argv[] = {"demo", "--config", path.c_str(), "--bucket-size", "4"};
  int argc = 5;
  DemoOptions o;
  cli::CommonFlags common;
  auto config = cli::find_config_flag(argc, argv);
  REQUIRE(config == path);
  REQUIRE(cli::load_config_file(*config, [&](ConfigReader& r) { read_demo(r, o); }).is_ok());

  CLI::App app("demo");
  cli::add_common_flags(app, common, cli::HonouredFlags::all());
  app.add_option("--listen", o.listen);
  app.add_option("--bucket-size", o.bucket_size);
  REQUIRE_FALSE(cli::parse(app, argc, argv).has_value());
  CHECK(o.bucket_size == 4);                      // CLI wins
  CHECK(o.listen == "tcp://127.0.0.1:9000");      // YAML beats the default
  CHECK(o.ratio == 0.5);                          // default
  CHECK(common.config == path);
}

TEST_CASE("A bad flag is a usage error, --help exits 0", "[unit][cli]") {
  CLI::App app("demo");
  cli::CommonFlags common;
  cli::add_common_flags(app, common, cli::HonouredFlags::all());
  const char* bad[] = {"demo", "--no-such-flag"};
  CHECK(cli::parse(app, 2, bad) == cli::kExitUsage);
  CLI::App app2("demo");
  cli::add_common_flags(app2, common, cli::HonouredFlags::all());
  const char* help[] = {"demo", "--help"};
  CHECK(cli::parse(app2, 2, help) == cli::kExitOk);
}

TEST_CASE("A tool offers only the common flags it honours", "[unit][cli]") {
  cli::CommonFlags common;
  CLI::App app("demo");
  cli::add_common_flags(app, common, {.print_config = true, .json = true});
  const std::string help = app.help();
  CHECK_THAT(help, Catch::Contains("--log-level") && Catch::Contains("--json") && Catch::Contains("--print-config"));
  for (const char* absent : {"--config", "--identity", "--authority", "--token", "--plaintext"}) {
    INFO(absent);
    CHECK_THAT(help, !Catch::Contains(absent));
    const char* argv[] = {"demo", absent, "x"};
    CHECK(cli::parse(app, 3, argv) == cli::kExitUsage);
  }
}

TEST_CASE("A subcommand refuses the common flags it does not honour, naming the flag", "[unit][cli]") {
  cli::CommonFlags common;
  CLI::App app("demo");
  app.fallthrough();
  const cli::HonouredFlags bench{.plaintext = true, .json = true};
  cli::add_common_flags(app, common, cli::HonouredFlags::peer() | bench);
  app.add_subcommand("bench", "");
  const char* ok[] = {"demo", "--plaintext", "bench", "--json"};
  REQUIRE_FALSE(cli::parse(app, 4, ok).has_value());
  CHECK(cli::refuse_unhonoured(app, bench, "bench").is_ok());
  const char* ignored[] = {"demo", "bench", "--identity", "k.key"};
  REQUIRE_FALSE(cli::parse(app, 4, ignored).has_value());
  auto refused = cli::refuse_unhonoured(app, bench, "bench");
  CHECK(refused.code() == Code::kInvalidArgument);
  CHECK_THAT(refused.message(), Catch::Contains("--identity") && Catch::Contains("demo bench"));
}
