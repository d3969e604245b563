#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "dedloc/core/files.hpp"
#include "dedloc/core/log.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;

TEST_CASE("Log lines carry time, level and component, and respect the level", "[unit][core][log]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    Logger log(LogLevel::kInfo, fds[1]);
    log.debug("rpc") << "hidden";
    log.info("rpc") << "bound " << 42;
    log.set_level(LogLevel::kError);
    log.warn("dht") << "hidden too";
    log.error("dht") << "no bootstrap peer answered";
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (I rpc: bound 42|E dht: no bootstrap peer answered)\n)");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, line));
  CHECK(out.find("hidden") == std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);
  CHECK(parse_log_level("warn").value() == LogLevel::kWarning);
  CHECK(parse_log_level("loud").status().message() ==
        "unknown log level 'loud' (use debug, info, warning, error or off)");
}

TEST_CASE("Files are replaced atomically with the requested mode and no temporary left", "[unit][core][files]") {
  std::string dir = test::make_temp_dir("dedloc-files");
  std::string path = dir + "/checkpoint.meta";
  REQUIRE(write_file_atomically(path, "epoch: 1\n", 0600).is_ok());
  REQUIRE(write_file_atomically(path, "epoch: 2\n", 0600).is_ok());
  CHECK(read_file(path).value() == "epoch: 2\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);

  CHECK(read_file(path, 4).status().code() == Code::kTooLarge);
  CHECK(write_file_atomically("/nonexistent-dir/x", "y").code() == Code::kIo);
}
