// dedloc-dht's commands for private runs (crypto/access_token.hpp):
//   identity                         print this peer's PeerID and public key (what an authority signs)
//   token issue --authority-key FILE --peer-key PUBKEY --name NAME --expires 21d [--out FILE]
//   token show FILE [--authority PUBKEY]
//   token revoke --authority-key FILE --peer-key PUBKEY --initial-peers ADDR   (dht/revocations.hpp)
#pragma once

#include "dedloc/cli/app.hpp"

namespace dedloc::tools {

struct TokenIssueOptions {
  std::string authority_key;  // the authority's identity file
  std::string peer_key;       // hex public key of the peer
  std::string name;
  std::string expires = "30d";
  std::string out;            // empty: print the token
  std::string show_path;      // token show FILE
  std::vector<std::string> initial_peers;  // token revoke
  double timeout_seconds = 10;
};

int print_identity(const cli::CommonFlags& common);
int issue_token(const TokenIssueOptions& o, const cli::CommonFlags& common);
int show_token(const TokenIssueOptions& o, const cli::CommonFlags& common);
int revoke_token(const TokenIssueOptions& o, const cli::CommonFlags& common);

}  // namespace dedloc::tools
