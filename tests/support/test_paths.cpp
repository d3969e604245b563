#include "support/test_paths.hpp"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

namespace dedloc::test {

std::string source_path(const std::string& relative) { return std::string(DEDLOC_SOURCE_DIR) + "/" + relative; }

std::string binary_path(const std::string& relative) { return std::string(DEDLOC_BINARY_DIR) + "/" + relative; }

std::string make_temp_dir(const std::string& prefix) {
  std::string templ = "/tmp/" + prefix + "-XXXXXX";
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    std::string rest;
    std::getline(status, rest);
  }
  return -1;
}

}  // namespace dedloc::test
