// One list of codecs for the planner, averaging and every configuration (core/codec_id.hpp): its numbers,
// names and bytes per value pinned against literal values, the files the project ships parsed with it, and
// the part grid and defaults that averaging shares (avg/defaults.hpp).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/avg/averager.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/defaults.hpp"
#include "dedloc/avg/matchmaking.hpp"
#include "dedloc/core/codec_id.hpp"
#include "dedloc/core/config.hpp"
#include "dedloc/plan/cost_model.hpp"
#include "dedloc/plan/peers_file.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;

namespace {

struct Expected {
  Codec codec;
  std::uint64_t number;  // on the wire: never changes
  std::string_view name;
  double bytes_per_value;
};

// Written out by hand on purpose: changing any of these breaks peers of other versions, recipes or the
// planner's prices, so it must take a change here too.
constexpr Expected kExpected[] = {
    {Codec::kNone, 0, "none", 4},
    {Codec::kFloat16, 1, "fp16", 2},
    {Codec::kScaledFloat16, 2, "scaled-fp16", 2},
    {Codec::kUniform8Bit, 3, "uint8", 1},
    {Codec::kBlockwise8Bit, 4, "blockwise8", 1},
};

// What `log` wrote while `f` ran.
template <class F>
std::string logged(F f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    Logger log(LogLevel::kInfo, fds[1]);
    f(&log);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  return text;
}

std::vector<std::filesystem::path> yaml_files(const std::string& relative_dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path(relative_dir)))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("every codec's number, name and bytes per value are pinned", "[unit][avg][codec-names]") {
  // The planner and averaging speak of the same codecs: one type, not two that happen to agree.
  STATIC_REQUIRE(std::is_same_v<avg::Codec, Codec>);
  STATIC_REQUIRE(std::is_same_v<decltype(plan::Collaboration::codec), Codec>);
  STATIC_REQUIRE(std::is_same_v<decltype(avg::AllReduceOptions::codec), Codec>);

  REQUIRE(kCodecs.size() == std::size(kExpected));
  for (const Expected& e : kExpected) {
    INFO(e.name);
    CHECK(static_cast<std::uint64_t>(e.codec) == e.number);
    CHECK(kCodecs[e.number].codec == e.codec);
    CHECK(kCodecs[e.number].name == e.name);
    CHECK(codec_name(e.codec) == e.name);
    CHECK(avg::codec_name(e.codec) == e.name);
    CHECK(bytes_per_value(e.codec) == e.bytes_per_value);
    auto parsed = parse_codec(e.name, nullptr);
    REQUIRE(parsed.is_ok());
    CHECK(*parsed == e.codec);
    auto wire = codec_from_wire(e.number);
    REQUIRE(wire.is_ok());
    CHECK(*wire == e.codec);
    // The planner's price of a value is the format's size, headers left out (under 2% for big parts).
    const std::size_t n = std::size_t{1} << 20;
    CHECK(static_cast<double>(avg::encoded_bytes(e.codec, n)) / n == Approx(e.bytes_per_value).epsilon(0.02));
    // The cost model prices a vector with it.
    plan::Collaboration collaboration;
    collaboration.params = 1e6;
    collaboration.codec = e.codec;
    collaboration.peers = {{"a", 10, 1e6, 1e6, false}, {"b", 10, 1e6, 1e6, false}};
    auto model = plan::CostModel::create(collaboration);
    REQUIRE(model.is_ok());
    CHECK(model->gradient_bytes() == Approx(1e6 * e.bytes_per_value));
  }
  CHECK(codec_from_wire(kCodecs.size()).status().code() == Code::kMalformed);
}

TEST_CASE("the old spelling blockwise-8bit still parses, with a warning naming blockwise8", "[unit][avg][codec-names]") {
  Result<Codec> parsed = error(Code::kInternal, "not parsed");
  const std::string warning = logged([&](Logger* log) { parsed = parse_codec("blockwise-8bit", log); });
  REQUIRE(parsed.is_ok());
  CHECK(*parsed == Codec::kBlockwise8Bit);
  CHECK_THAT(warning, Catch::Contains("'blockwise-8bit'") && Catch::Contains("'blockwise8'"));
  // The canonical names parse silently.
  CHECK(logged([](Logger* log) { (void)parse_codec("blockwise8", log); }).empty());
  CHECK(logged([](Logger* log) { (void)parse_codec("fp16", log); }).empty());
  // Averaging's codec policy (recipes' averaging.codec) takes it too.
  auto policy = avg::CodecPolicy::parse("blockwise-8bit");
  REQUIRE(policy.is_ok());
  CHECK(policy->fixed == Codec::kBlockwise8Bit);
  CHECK(policy->name() == "blockwise8");
}

TEST_CASE("unknown codec names are refused with the list of valid ones", "[unit][avg][codec-names]") {
  for (std::string_view bad : {"", "FP16", "fp8", "blockwise-8-bit", "blockwise_8bit", "int8", " fp16"}) {
    INFO(bad);
    auto parsed = parse_codec(bad, nullptr);
    REQUIRE_FALSE(parsed.is_ok());
    CHECK(parsed.status().code() == Code::kInvalidArgument);
    CHECK_THAT(parsed.status().message(), Catch::Contains("none fp16 scaled-fp16 uint8 blockwise8"));
  }
}

TEST_CASE("the recipes and peers files the project ships name codecs by their canonical names", "[unit][avg][codec-names]") {
  std::size_t seen = 0;
  auto check_name = [&](const std::filesystem::path& file, const std::string& name) {
    INFO(file.string() << ": codec '" << name << "'");
    auto parsed = parse_codec(name, nullptr);
    REQUIRE(parsed.is_ok());
    CHECK(codec_name(*parsed) == name);  // not an old spelling
    ++seen;
  };
  for (const auto& dir : {"recipes", "tests/data"}) {
    for (const auto& file : yaml_files(dir)) {
      auto recipe = ConfigReader::from_file(file.string());
      REQUIRE(recipe.is_ok());
      ConfigReader averaging = recipe->section("averaging");
      std::string codec;
      averaging.read("codec", codec);
      if (codec.empty()) continue;
      check_name(file, codec);
      CHECK(avg::CodecPolicy::parse(codec).is_ok());
    }
  }
  for (const auto& file : yaml_files("configs/peers")) {
    auto collaboration = plan::load_peers_file(file.string());
    INFO(file.string());
    REQUIRE(collaboration.is_ok());
    auto raw = ConfigReader::from_file(file.string());
    REQUIRE(raw.is_ok());
    std::string codec;
    raw->read("codec", codec);
    if (codec.empty()) continue;
    check_name(file, codec);
    CHECK(collaboration->codec == *parse_codec(codec, nullptr));
  }
  CHECK(seen >= 10);  // the three recipes and the peers files: the scan found them
}

TEST_CASE("part_elements_for is the most elements that fit, and training's grid is 128 Ki", "[unit][avg][codec-names]") {
  constexpr std::uint64_t kKiB = 1024;
  // Training's grid (the averager's and the matchmaker's default): 512 KiB of float32.
  CHECK(avg::default_part_elements() == 128 * kKiB);
  CHECK(avg::part_elements_for(Codec::kNone, 512 * kKiB) == 128 * kKiB);
  CHECK(avg::AveragerOptions{}.part_elements == 128 * kKiB);
  CHECK(avg::MatchmakingOptions{}.part_elements == 128 * kKiB);
  // The same budget with a codec gives more elements per part.
  CHECK(avg::part_elements_for(Codec::kFloat16, 512 * kKiB) == 256 * kKiB);
  CHECK(avg::part_elements_for(Codec::kScaledFloat16, 512 * kKiB) == 256 * kKiB - 4);
  CHECK(avg::part_elements_for(Codec::kUniform8Bit, 512 * kKiB) == 512 * kKiB - 8);
  for (const CodecInfo& known : kCodecs) {
    for (std::uint64_t budget : {std::uint64_t{1}, std::uint64_t{9}, std::uint64_t{1000}, 512 * kKiB, 16 * kKiB * kKiB}) {
      INFO(known.name << ", " << budget << " bytes");
      const std::uint64_t n = avg::part_elements_for(known.codec, budget);
      CHECK(n >= 1);
      // The largest that fits (or one element, when not even that fits).
      if (avg::encoded_bytes(known.codec, n) <= budget) {
        CHECK(avg::encoded_bytes(known.codec, n + 1) > budget);
      } else {
        CHECK(n == 1);
      }
    }
  }
}

TEST_CASE("the averager and the matchmaker start from the same defaults", "[unit][avg][codec-names]") {
  const avg::AveragerOptions averager;
  const avg::MatchmakingOptions matchmaking;
  CHECK(avg::kDefaultTargetGroupSize == 16);
  CHECK(avg::kDefaultMinGroupSize == 2);
  CHECK(avg::kDefaultMatchmakingTime == std::chrono::seconds(5));
  CHECK(avg::kDefaultBandwidth == 1.25e8);
  CHECK(averager.target_group_size == avg::kDefaultTargetGroupSize);
  CHECK(matchmaking.target_group_size == avg::kDefaultTargetGroupSize);
  CHECK(averager.min_group_size == avg::kDefaultMinGroupSize);
  CHECK(matchmaking.min_group_size == avg::kDefaultMinGroupSize);
  CHECK(averager.matchmaking_time == avg::kDefaultMatchmakingTime);
  CHECK(matchmaking.matchmaking_time == avg::kDefaultMatchmakingTime);
  CHECK(averager.bandwidth == avg::kDefaultBandwidth);
  CHECK(matchmaking.bandwidth == avg::kDefaultBandwidth);
}
