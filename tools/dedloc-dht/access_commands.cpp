#include "access_commands.hpp"

#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "dedloc/crypto/access_token.hpp"
#include "dedloc/dht/revoke_access.hpp"

namespace dedloc::tools {

namespace {

constexpr std::string_view kTool = "dedloc-dht";

// Parses "21d", "12h", "90m", "3600s" or plain seconds; kInvalidArgument naming --expires.
Result<double> parse_duration_seconds(std::string_view text) {
  static const std::pair<char, double> kUnits[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  double unit = 1;
  if (!text.empty()) {
    for (auto [suffix, seconds] : kUnits) {
      if (text.back() == suffix) {
        unit = seconds;
        text.remove_suffix(1);
        break;
      }
    }
  }
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(std::string(text), &used);
    if (used != text.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    return error(Code::kInvalidArgument, "--expires: '" + std::string(text) + "' is not a duration (e.g. 21d, 12h, 90m, 3600)");
  }
  if (!(value > 0) || !std::isfinite(value)) return error(Code::kInvalidArgument, "--expires must be positive");
  return value * unit;
}

}  // namespace

int print_identity(const cli::CommonFlags& common) {
  if (common.identity.empty()) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, "identity: --identity FILE is required "
                                                                    "(a fresh in-memory identity would be useless)"));
  }
  auto identity = crypto::Identity::load_or_create(common.identity);
  if (!identity) return cli::report_failure(kTool, identity.status().with_context("--identity"));
  if (common.json) {
    std::cout << nlohmann::json{{"peer_id", identity->peer_id().to_string()}, {"public_key", to_hex(identity->public_key())}}.dump()
              << "\n";
  } else {
    std::cout << "peer id:    " << identity->peer_id().to_string() << "\npublic key: " << to_hex(identity->public_key())
              << "\n";
  }
  return cli::kExitOk;
}

int issue_token(const TokenIssueOptions& o, const cli::CommonFlags& common) {
  auto authority = crypto::Identity::load(o.authority_key);
  if (!authority) return cli::report_failure(kTool, authority.status().with_context("--authority-key"));
  auto peer = crypto::parse_public_key(o.peer_key, "--peer-key");
  if (!peer) return cli::report_failure(kTool, peer.status());
  auto lifetime = parse_duration_seconds(o.expires);
  if (!lifetime) return cli::report_failure(kTool, lifetime.status());
  auto expires = static_cast<std::uint64_t>(SystemClock::instance().unix_seconds() + *lifetime);
  auto token = crypto::AccessToken::issue(*authority, *peer, o.name, expires);
  if (!token) return cli::report_failure(kTool, token.status().with_context("--name"));
  if (o.out.empty()) {
    std::cout << token->to_text() << "\n";
  } else if (auto saved = token->save(o.out); !saved.is_ok()) {
    return cli::report_failure(kTool, saved.with_context("--out"));
  } else if (common.json) {
    std::cout << nlohmann::json{{"token", o.out}, {"peer_id", token->peer_id().to_string()}, {"name", token->name},
                                {"expires", token->expires}}.dump()
              << "\n";
  } else {
    std::cout << "wrote " << o.out << ": peer " << token->peer_id().to_string() << " ('" << token->name
              << "') until " << format_utc(static_cast<double>(token->expires)) << "\n"
              << "the peer runs with --authority " << to_hex(authority->public_key()) << " --token " << o.out << "\n";
  }
  return cli::kExitOk;
}

int show_token(const TokenIssueOptions& o, const cli::CommonFlags& common) {
  auto token = crypto::AccessToken::load(o.show_path);
  if (!token) return cli::report_failure(kTool, token.status());
  Status valid = Status::ok();
  if (!common.authority.empty()) {
    auto trusted = crypto::parse_public_key(common.authority, "--authority");
    if (!trusted) return cli::report_failure(kTool, trusted.status());
    valid = token->verify(*trusted, SystemClock::instance().unix_seconds());
  }
  if (common.json) {
    nlohmann::json out{{"peer_id", token->peer_id().to_string()}, {"peer_key", to_hex(token->peer)},
                       {"name", token->name}, {"expires", token->expires}, {"authority", to_hex(token->authority)}};
    if (!common.authority.empty()) out["valid"] = valid.is_ok();
    if (!valid.is_ok()) out["why"] = valid.message();
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "peer:      " << token->peer_id().to_string() << " ('" << token->name << "')\n"
              << "expires:   " << format_utc(static_cast<double>(token->expires)) << "\n"
              << "authority: " << to_hex(token->authority) << "\n";
    if (!common.authority.empty()) std::cout << "valid:     " << (valid.is_ok() ? "yes" : "no: " + valid.message()) << "\n";
  }
  return valid.is_ok() ? cli::kExitOk : cli::kExitFailure;
}

int revoke_token(const TokenIssueOptions& o, const cli::CommonFlags& common) {
  auto authority = crypto::Identity::load(o.authority_key);
  if (!authority) return cli::report_failure(kTool, authority.status().with_context("--authority-key"));
  auto peer = crypto::parse_public_key(o.peer_key, "--peer-key");
  if (!peer) return cli::report_failure(kTool, peer.status());
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  zmq::context_t context;
  auto revoked = dht::revoke_access(context, *authority, *peer, *peers, Deadline::after(from_seconds(o.timeout_seconds)));
  if (!revoked) return cli::report_failure(kTool, revoked.status());
  const std::string peer_id = crypto::PeerId::from_public_key(*peer).to_string();
  if (common.json) {
    std::cout << nlohmann::json{{"revoked", peer_id}, {"listed", revoked->listed}, {"list_expires", revoked->list_expires}}
                     .dump()
              << "\n";
  } else {
    std::cout << "revoked " << peer_id << "; the list holds " << revoked->listed << " key(s) until "
              << format_utc(revoked->list_expires) << " (run again, or re-publish monthly, to keep it)\n"
              << "peers of the run refuse it once they read the list (every 30 s by default)\n";
  }
  return cli::kExitOk;
}

}  // namespace dedloc::tools
