// The file side of checkpoint export: the lock that keeps two cron runs apart, and the checkpoints and
// Hugging Face folders it lists and rotates.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "dedloc/core/file_lock.hpp"
#include "dedloc/monitor/checkpoint_export.hpp"
#include "dedloc/monitor/dashboard_server.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;

TEST_CASE("A held lock refuses a second holder until it is released", "[unit][monitor]") {
  test::ScopedTempDir dir{"dedloc-export"};
  const std::string path = (dir.path / ".export.lock").string();
  {
    auto first = FileLock::try_acquire(path);
    REQUIRE(first.is_ok());
    auto second = FileLock::try_acquire(path);  // another open file description: as another process would
    REQUIRE_FALSE(second.is_ok());
    CHECK(second.status().code() == Code::kRefused);
    CHECK(second.status().message().find(path) != std::string::npos);
  }
  CHECK(FileLock::try_acquire(path).is_ok());
  CHECK(FileLock::try_acquire("/proc/no-such-dir/lock").status().code() == Code::kIo);
}

TEST_CASE("Exported checkpoints are listed newest epoch first, other files ignored", "[unit][monitor]") {
  test::ScopedTempDir dir{"dedloc-export"};
  for (auto name : {"checkpoint-e00000009.safetensors", "checkpoint-e00000010.safetensors",
                    "checkpoint-e00000002.safetensors", "checkpoint-e00000010.json", "latest.safetensors",
                    "checkpoint-e00000011.safetensors.tmp.12.34", "notes.txt"}) {
    std::ofstream(dir.path / name) << "x";
  }
  auto found = monitor::list_exported_checkpoints(dir.path.string());
  REQUIRE(found.size() == 3);
  CHECK(found[0].first == 10);
  CHECK(found[1].first == 9);
  CHECK(found[2].first == 2);
  CHECK(found[0].second == (dir.path / "checkpoint-e00000010.safetensors").string());
}

TEST_CASE("Exported Hugging Face folders are listed newest epoch first, other entries ignored", "[unit][monitor]") {
  test::ScopedTempDir dir{"dedloc-export"};
  for (auto name : {"hf-e00000003", "hf-e00000012", "hf-e00000007", "hf-e00000013.tmp.12.0"}) {
    std::filesystem::create_directory(dir.path / name);
  }
  std::ofstream(dir.path / "hf-e00000020") << "a file, not an export";
  std::filesystem::create_directory_symlink("hf-e00000012", dir.path / "latest-hf");
  auto found = monitor::list_exported_hf_folders(dir.path.string());
  REQUIRE(found.size() == 3);
  CHECK(found[0] == std::pair<std::uint64_t, std::string>{12, (dir.path / "hf-e00000012").string()});
  CHECK(found[1].first == 7);
  CHECK(found[2].first == 3);
}

TEST_CASE("The monitor's --http address parses as HOST:PORT", "[unit][monitor]") {
  using monitor::parse_http_address;
  CHECK(*parse_http_address("127.0.0.1:8008") == std::pair<std::string, int>{"127.0.0.1", 8008});
  CHECK(*parse_http_address(":0") == std::pair<std::string, int>{"0.0.0.0", 0});
  CHECK(*parse_http_address("[::1]:80") == std::pair<std::string, int>{"::1", 80});
  CHECK(parse_http_address("8008").status().code() == Code::kInvalidArgument);
  CHECK(parse_http_address("host:99999").status().code() == Code::kInvalidArgument);
  CHECK(parse_http_address("host:8x").status().code() == Code::kInvalidArgument);
}
