#include "support/private_run.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace dedloc::test {

CommandOutput run_dht(const std::string& args) {
  return run_command(binary_path("tools/dedloc-dht/dedloc-dht") + " " + args);
}

PrivateRun::PrivateRun()
    : dir_(scoped_dir_.path.string()), authority_key_(dir_ + "/authority.key"), authority_(public_key(authority_key_)) {}

std::string PrivateRun::public_key(const std::string& path) {
  auto out = run_dht("--identity " + path + " identity --json");
  INFO(out.output);
  REQUIRE(out.exit_code == 0);
  return nlohmann::json::parse(out.output)["public_key"].get<std::string>();
}

std::vector<std::string> PrivateRun::member(const std::string& name, const std::string& expires,
                                            const std::string& signer_key) const {
  const std::string key = dir_ + "/" + name + ".key";
  const std::string token = dir_ + "/" + name + ".token";
  auto issued = run_dht("token issue --authority-key " + (signer_key.empty() ? authority_key_ : signer_key) +
                    " --peer-key " + public_key(key) + " --name " + name + " --expires " + expires + " --out " + token);
  INFO(issued.output);
  REQUIRE(issued.exit_code == 0);
  return {"--identity", key, "--token", token, "--authority", authority_};
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace dedloc::test
