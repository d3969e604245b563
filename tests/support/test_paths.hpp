// Where tests find the source tree (corpora, configs) and built binaries.
#pragma once

#include <filesystem>
#include <string>

namespace dedloc::test {

std::string source_path(const std::string& relative);  // DEDLOC_SOURCE_DIR/relative
std::string binary_path(const std::string& relative);  // DEDLOC_BINARY_DIR/relative
// A fresh empty directory under the system temp dir, removed by the OS tmp cleaner, not by tests.
std::string make_temp_dir(const std::string& prefix);
// A fresh empty directory removed with everything in it when the object goes (for unit tests' files).
struct ScopedTempDir {
  explicit ScopedTempDir(const std::string& prefix = "dedloc-test") : path(make_temp_dir(prefix)) {}
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  std::filesystem::path path;
};
// Peak resident memory of this process in KiB (VmHWM).
long peak_rss_kib();

}  // namespace dedloc::test
