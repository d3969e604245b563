// YAML configuration with strict keys.
//
// Precedence is CLI > YAML > defaults: an Options struct starts with its defaults, a ConfigReader
// overwrites the fields whose keys appear in the file, then CLI11 overwrites the fields given as flags
// (see dedloc/cli). A key the program does not know is an error that names the key and the file, so a
// typo never silently falls back to a default.
//
//   auto reader = ConfigReader::from_file("configs/dht.yaml");
//   if (!reader) return reader.status();
//   reader->read("listen", options.listen);
//   reader->read("bucket_size", options.bucket_size);
//   DEDLOC_RETURN_IF_ERROR(reader->finish());
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc {

class ConfigReader {
 public:
  // Parses a YAML file whose top level is a mapping (an empty file is an empty mapping).
  static Result<ConfigReader> from_file(const std::string& path);
  // Parses YAML text; `source` names it in errors.
  static Result<ConfigReader> from_string(const std::string& text, const std::string& source);

  // Each read() leaves `out` untouched when the key is absent and records an error (reported by finish())
  // when the value has the wrong type. Durations are given in seconds (a number).
  void read(std::string_view key, std::string& out);
  void read(std::string_view key, bool& out);
  void read(std::string_view key, std::int64_t& out);
  void read(std::string_view key, int& out);
  void read(std::string_view key, std::uint64_t& out);
  void read(std::string_view key, double& out);
  void read(std::string_view key, Duration& out);
  void read(std::string_view key, std::vector<std::string>& out);

  bool has(std::string_view key) const;
  // The keys present at this level, in file order (for checks a reader cannot express key by key).
  std::vector<std::string> keys() const;

  // A nested mapping ("averaging:" ...). Absent key: an empty section. Errors are shared with the parent.
  ConfigReader section(std::string_view key);
  // A sequence of mappings ("peers:" - {name: a} ...), each as its own reader.
  std::vector<ConfigReader> list(std::string_view key);
  // The raw node for values a reader cannot type (used sparingly).
  YAML::Node raw(std::string_view key);

  // Where this reader's keys live, for messages: "configs/dht.yaml" or "configs/dht.yaml: averaging".
  std::string where() const;
  // The file (or the source name given to from_string) the keys come from: relative paths in a config are
  // resolved against its directory.
  const std::string& source() const;

  // Reports the first type error, else every key that no read() consumed, at this level and below.
  Status finish() const;

 private:
  struct Shared {
    std::string source;
    std::vector<std::string> errors;
  };
  ConfigReader(YAML::Node node, std::shared_ptr<Shared> shared, std::string path);

  std::string key_path(std::string_view key) const;
  YAML::Node take(std::string_view key);
  void type_error(std::string_view key, const YAML::Node& node, std::string_view expected);
  void collect_unknown(std::vector<std::string>& out) const;

  // Copies of a reader share what has been consumed and its children, so a section handed to a caller
  // and the parent's record of it stay one and the same.
  struct Level {
    std::set<std::string, std::less<>> consumed;
    std::vector<ConfigReader> children;
  };

  YAML::Node node_;
  std::shared_ptr<Shared> shared_;
  std::string path_;  // "averaging.compression" for nested sections; "" at the top
  std::shared_ptr<Level> level_ = std::make_shared<Level>();
};

}  // namespace dedloc
