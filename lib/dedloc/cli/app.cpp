#include "dedloc/cli/app.hpp"

#include <cstring>
#include <iostream>
#include <utility>

#include "dedloc/net/access_control.hpp"
#include "dedloc/net/transport_security.hpp"

#ifndef DEDLOC_VERSION
#define DEDLOC_VERSION "unknown"
#endif

namespace dedloc::cli {

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case Code::kOk: return kExitOk;
    case Code::kInvalidArgument: return kExitUsage;
    case Code::kUnavailable: return kExitUnavailable;
    case Code::kTimeout: return kExitTimeout;
    case Code::kCancelled: return kExitInterrupted;
    default: return kExitFailure;
  }
}

HonouredFlags HonouredFlags::all() {
  return {.config = true,
          .print_config = true,
          .identity = true,
          .authority = true,
          .token = true,
          .plaintext = true,
          .json = true};
}

HonouredFlags HonouredFlags::peer() { return {.identity = true, .authority = true, .token = true, .plaintext = true}; }

HonouredFlags HonouredFlags::operator|(const HonouredFlags& other) const {
  return {.config = config || other.config,
          .print_config = print_config || other.print_config,
          .identity = identity || other.identity,
          .authority = authority || other.authority,
          .token = token || other.token,
          .plaintext = plaintext || other.plaintext,
          .json = json || other.json};
}

void add_common_flags(CLI::App& app, CommonFlags& flags, const HonouredFlags& honoured) {
  if (honoured.config) {
    app.add_option("--config", flags.config, "YAML file with this tool's settings (flags override it)");
  }
  app.add_option("--log-level", flags.log_level, "debug, info, warning, error or off (logs go to stderr)")
      ->capture_default_str();
  if (honoured.identity) {
    app.add_option("--identity", flags.identity,
                   "file holding this peer's ed25519 key; created with mode 0600 if missing "
                   "(default: a new identity at every start)");
  }
  if (honoured.authority) {
    app.add_option("--authority", flags.authority,
                   "a private run: the run authority's public key (hex); only peers with its tokens take part");
  }
  if (honoured.token) {
    app.add_option("--token", flags.token,
                   "a private run: this peer's access token file (`dedloc-dht token issue` writes one)");
  }
  if (honoured.plaintext) {
    app.add_flag("--plaintext", flags.plaintext,
                 "talk without transport encryption: listen in plaintext and advertise addresses without /k/KEY "
                 "(default: ZeroMQ CURVE, keyed by --identity)");
  }
  if (honoured.json) app.add_flag("--json", flags.json, "print machine-readable JSON on stdout");
  if (honoured.print_config) {
    app.add_flag("--print-config", flags.print_config, "print the effective settings and exit");
  }
  app.set_version_flag("--version", "dedloc " DEDLOC_VERSION);
}

Status refuse_unhonoured(const CLI::App& app, const HonouredFlags& honoured, std::string_view subcommand) {
  const std::pair<bool, const char*> flags[] = {
      {honoured.config, "--config"},     {honoured.print_config, "--print-config"},
      {honoured.identity, "--identity"}, {honoured.authority, "--authority"},
      {honoured.token, "--token"},       {honoured.plaintext, "--plaintext"},
      {honoured.json, "--json"},
  };
  for (const auto& [used, name] : flags) {
    if (used) continue;
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option != nullptr && option->count() > 0) {
      return error(Code::kInvalidArgument,
                   std::string(name) + ": `" + app.get_name() + " " + std::string(subcommand) + "` does not use it");
    }
  }
  return Status::ok();
}

std::optional<std::string> find_config_flag(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) return std::string(argv[i + 1]);
    if (std::strncmp(argv[i], "--config=", 9) == 0) return std::string(argv[i] + 9);
  }
  return std::nullopt;
}

Status load_config_file(const std::string& path, const std::function<void(ConfigReader&)>& apply) {
  auto reader = ConfigReader::from_file(path);
  if (!reader) return reader.status();
  apply(*reader);
  return reader->finish();
}

std::optional<int> parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << " (see --help)\n";
    return kExitUsage;
  }
  return std::nullopt;
}

Status setup_logging(const CommonFlags& flags, Logger& log) {
  auto level = parse_log_level(flags.log_level);
  if (!level) return level.status().with_context("--log-level");
  log.set_level(*level);
  return Status::ok();
}

namespace {

Status install_access(const CommonFlags& flags, const crypto::Identity& identity) {
  if (flags.authority.empty() && flags.token.empty()) return Status::ok();  // an open run
  if (flags.authority.empty() || flags.token.empty()) {
    return error(Code::kInvalidArgument, std::string(flags.token.empty() ? "--authority" : "--token") +
                                             " needs " + (flags.token.empty() ? "--token FILE" : "--authority PUBKEY") +
                                             ": a private run takes both");
  }
  net::AccessOptions options;
  auto authority = crypto::parse_public_key(flags.authority, "--authority");
  if (!authority) return authority.status();
  options.authority = *authority;
  auto token = crypto::AccessToken::load(flags.token);
  if (!token) return token.status().with_context("--token");
  options.token = *token;
  auto access = net::AccessControl::create(identity, options);
  if (!access) return access.status().with_context("--token " + flags.token);
  net::AccessControl::set_process_default(*access);
  return Status::ok();
}

}  // namespace

Result<crypto::Identity> load_identity(const CommonFlags& flags) {
  auto id = flags.identity.empty() ? Result<crypto::Identity>(crypto::Identity::generate())
                                   : crypto::Identity::load_or_create(flags.identity);
  if (!id) return id.status().with_context("--identity");
  DEDLOC_RETURN_IF_ERROR(install_access(flags, *id));
  if (!flags.plaintext) {
    DEDLOC_RETURN_IF_ERROR(net::require_curve());
    net::TransportKeys::set_process_default(net::TransportKeys::of(*id));
  }
  return id;
}

Result<std::vector<net::PeerAddress>> peer_addresses(const CommonFlags& flags, const std::vector<std::string>& texts,
                                                     std::string_view flag) {
  auto peers = net::PeerAddress::parse_all(texts, flag);
  if (!peers || flags.plaintext) return peers;
  for (size_t i = 0; i < peers->size(); ++i) {
    if (!(*peers)[i].encrypted()) {
      return error(Code::kInvalidArgument,
                   std::string(flag) + " " + texts[i] +
                       ": the address has no key (/k/KEY), so it could only be dialled in plaintext; give the "
                       "address the peer printed (tcp://HOST:PORT/k/KEY), or run every peer with --plaintext");
    }
  }
  return peers;
}

int report_failure(std::string_view tool, const Status& status) {
  std::cerr << tool << ": error: " << status.to_string() << "\n";
  return exit_code_for(status);
}

}  // namespace dedloc::cli
