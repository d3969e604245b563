// Shared command-line plumbing for the dedloc tools: common flags, config precedence, logging setup, exit
// codes. Every tools/dedloc-*/main.cpp uses this so the tools behave alike.
//
// Precedence is CLI > YAML > defaults. A tool fills its Options struct with defaults, calls
// load_config_file() with the --config path found by find_config_flag() (before CLI parsing), then binds
// the same Options fields to CLI11 flags: CLI11 only overwrites fields whose flags were given.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "dedloc/core/config.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::cli {

// Exit codes shared by all tools (documented in docs/operators.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // the work failed (see the error line)
  kExitUsage = 2,        // bad flags or arguments
  kExitConfig = 3,       // a config file is missing or invalid
  kExitUnavailable = 4,  // a peer or address could not be reached or bound
  kExitTimeout = 5,      // a deadline passed
  kExitInterrupted = 130,
};

// The exit code that fits a failed Status.
int exit_code_for(const Status& status);

struct CommonFlags {
  std::string config;             // --config FILE: YAML with this tool's settings
  std::string log_level = "info"; // --log-level
  std::string identity;           // --identity FILE: ed25519 key; created (mode 0600) if missing
  bool json = false;              // --json: machine-readable output on stdout
  bool print_config = false;      // --print-config: print the effective settings and exit
  std::string authority;          // --authority PUBKEY: a private run's authority (hex ed25519 public key)
  std::string token;              // --token FILE: this peer's access token from that authority
  bool plaintext = false;         // --plaintext: no transport encryption (net/transport_security.hpp)
};

// The common flags a tool honours. A tool offers only those: its --help lists no flag it would ignore, and
// giving one is a usage error (CLI11's "The following argument was not expected"). --log-level, --version and
// --help are always offered. Declared at the call site with designated initializers:
//   cli::add_common_flags(app, common, {.config = true, .print_config = true, .json = true});
struct HonouredFlags {
  bool config = false;        // --config FILE: the tool reads its settings from YAML (find_config_flag)
  bool print_config = false;  // --print-config: the tool prints its effective settings
  bool identity = false;      // --identity FILE: the tool takes part as a peer (load_identity)
  bool authority = false;     // --authority PUBKEY: a private run's authority
  bool token = false;         // --token FILE: this peer's access token in a private run
  bool plaintext = false;     // --plaintext: the tool talks to peers (load_identity, peer_addresses)
  bool json = false;          // --json: the tool has machine-readable output

  static HonouredFlags all();
  // What a tool that joins a run as a peer honours through load_identity and peer_addresses: --identity,
  // --authority, --token and --plaintext.
  static HonouredFlags peer();
  // Both sets together: what a tool offers when its subcommands honour different sets (refuse_unhonoured).
  HonouredFlags operator|(const HonouredFlags& other) const;
};

// Adds --log-level and --version, and of --config, --print-config, --identity, --authority, --token,
// --plaintext and --json those in `honoured`.
void add_common_flags(CLI::App& app, CommonFlags& flags, const HonouredFlags& honoured);

// For a tool whose subcommands honour different common flags: the tool offers their union (so the flags may
// come before the subcommand: `dedloc-avg --identity aux.key aux ...`), and once argv is parsed this refuses
// a common flag given that `subcommand` does not honour, as a kInvalidArgument naming the flag.
Status refuse_unhonoured(const CLI::App& app, const HonouredFlags& honoured, std::string_view subcommand);

// The value of --config FILE / --config=FILE in argv, looked up before the real parse.
std::optional<std::string> find_config_flag(int argc, const char* const* argv);

// Loads `path` with `apply` (which reads keys into the tool's Options), then checks for unknown keys.
Status load_config_file(const std::string& path, const std::function<void(ConfigReader&)>& apply);

// Parses argv. Returns an exit code when the tool should exit now (--help, --version, a usage error,
// which is printed as one line), nullopt to go on.
std::optional<int> parse(CLI::App& app, int argc, const char* const* argv);

// Applies --log-level to `log`.
Status setup_logging(const CommonFlags& flags, Logger& log);

// The identity from --identity (created if missing), or a fresh in-memory one when none is given.
// With --authority and --token (a private run), it also installs the process's access control
// (net/access_control.hpp: every message this process sends is sealed with the token, every message it
// receives must carry a valid one); errors name the flag: one without the other, an unreadable or expired
// token, a token of another authority or issued to another identity.
// Unless --plaintext, it installs the process's transport keys, derived from the identity: servers listen
// with CURVE and advertise "/k/KEY" endpoints (net/transport_security.hpp).
Result<crypto::Identity> load_identity(const CommonFlags& flags);

// Parses the peer addresses an operator gave with `flag` (--initial-peers, --relay). Without --plaintext,
// an address with no key ("tcp://HOST:PORT" or ".../p/PEERID") is refused, naming the flag: the peers
// there listen encrypted, and a plaintext dial would only time out.
Result<std::vector<net::PeerAddress>> peer_addresses(const CommonFlags& flags, const std::vector<std::string>& texts,
                                                     std::string_view flag);

// Prints "<tool>: error: <status>" to stderr and returns its exit code.
int report_failure(std::string_view tool, const Status& status);

}  // namespace dedloc::cli
