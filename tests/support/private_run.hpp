// A private collaboration for proc tests: an authority key and tokens issued with the real
// `dedloc-dht identity` and `dedloc-dht token issue`, in a temporary folder.
#pragma once

#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dedloc::test {

class PrivateRun {
 public:
  PrivateRun();

  const std::string& dir() const { return dir_; }
  const std::string& authority() const { return authority_; }  // the authority's public key (hex)
  const std::string& authority_key() const { return authority_key_; }

  // The flags of a peer `name` with its own identity file and a token for it signed with `signer_key` (the
  // run's authority when empty), valid for `expires` ("1d", "1s"): --identity, --token, --authority.
  std::vector<std::string> member(const std::string& name, const std::string& expires = "1d",
                                  const std::string& signer_key = "") const;

  // `dedloc-dht identity` for the key file at `path` (created if missing): its public key in hex.
  static std::string public_key(const std::string& path);

 private:
  ScopedTempDir scoped_dir_{"dedloc-private-run"};
  std::string dir_;
  std::string authority_key_;
  std::string authority_;
};

// `dedloc-dht ARGS` run to its end (stdout and stderr together).
CommandOutput run_dht(const std::string& args);

// Words joined with spaces, for a shell command line.
std::string joined(const std::vector<std::string>& words);

}  // namespace dedloc::test
