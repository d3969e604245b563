#include "dedloc/net/peer_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <charconv>

namespace dedloc::net {

namespace {

constexpr std::string_view kTcpScheme = "tcp://";
constexpr std::string_view kRelayScheme = "relay://";
constexpr std::string_view kPeerSuffix = "/p/";
constexpr std::string_view kKeySuffix = "/k/";

bool is_relay(std::string_view endpoint) { return endpoint.substr(0, kRelayScheme.size()) == kRelayScheme; }

// A host ZeroMQ can dial or bind: a name or IPv4 address (letters, digits, '-', '.'), "[v6]" (hex digits, ':',
// '.'), or "*". Anything else (a '/', a ':' outside brackets) would make an address that prints back as
// another one.
bool is_valid_host(std::string_view host) {
  if (host == "*") return true;
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.empty()) return false;
  for (char c : host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || (bracketed ? c == ':' : c == '-');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<KeyedEndpoint> split_endpoint_key(std::string_view endpoint) {
  size_t at = endpoint.find(kKeySuffix);
  if (at == std::string_view::npos) return KeyedEndpoint{std::string(endpoint), std::nullopt};
  auto key = crypto::parse_public_key(endpoint.substr(at + kKeySuffix.size()), "the key after /k/");
  if (!key) return key.status().with_context("'" + std::string(endpoint) + "'");
  // Whether the key is a valid curve point is checked when it is dialled (net::connect_to): this runs for
  // every request's sender endpoint, and the conversion costs tens of µs.
  return KeyedEndpoint{std::string(endpoint.substr(0, at)), *key};
}

std::string with_endpoint_key(std::string_view endpoint, const crypto::PublicKey& key) {
  return std::string(endpoint) + std::string(kKeySuffix) + to_hex(key);
}

namespace {

bool key_names(const std::optional<crypto::PublicKey>& key, const crypto::PeerId& id) {
  return !key || crypto::PeerId::from_public_key(*key) == id;
}

}  // namespace

bool endpoint_key_matches(std::string_view endpoint, const crypto::PeerId& id) {
  if (is_relay(endpoint)) return true;  // a relay's key names the relay, not the peer behind it
  auto keyed = split_endpoint_key(endpoint);
  return keyed && key_names(keyed->key, id);
}

bool is_contact_endpoint(std::string_view endpoint, const crypto::PeerId& id) {
  auto host_port = parse_tcp_endpoint(endpoint);
  return host_port && key_names(host_port->key, id);
}

Result<HostPort> parse_tcp_endpoint(std::string_view keyed_endpoint) {
  auto keyed = split_endpoint_key(keyed_endpoint);
  if (!keyed) return keyed.status();
  std::string_view endpoint = keyed->dial;
  if (endpoint.substr(0, kTcpScheme.size()) != kTcpScheme) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "' is not a tcp:// endpoint");
  }
  std::string_view rest = endpoint.substr(kTcpScheme.size());
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "' has no host:port (tcp://HOST:PORT)");
  }
  std::string_view host = rest.substr(0, colon);
  std::string_view port_text = rest.substr(colon + 1);
  if (!is_valid_host(host)) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "' has a bad host '" + std::string(host) + "'");
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "' has a bad port '" + std::string(port_text) + "'");
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return HostPort{std::string(host), static_cast<std::uint16_t>(port), keyed->key};
}

Result<std::optional<RelayRoute>> parse_relay_endpoint(std::string_view endpoint) {
  if (!is_relay(endpoint)) return std::optional<RelayRoute>{};
  size_t suffix = endpoint.find(kPeerSuffix);
  auto id = suffix == std::string_view::npos ? std::nullopt
                                             : crypto::PeerId::parse(endpoint.substr(suffix + kPeerSuffix.size()));
  if (!id) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) +
                                             "': expected relay://HOST:PORT[/k/RELAYKEY]/p/PEERID (40 hex digits)");
  }
  std::string relay = std::string(kTcpScheme) + std::string(endpoint.substr(kRelayScheme.size(), suffix - kRelayScheme.size()));
  auto host_port = parse_tcp_endpoint(relay);
  if (!host_port) return host_port.status();
  if (host_port->port == 0) {
    return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "': the relay needs HOST:PORT");
  }
  return std::optional<RelayRoute>(RelayRoute{relay, *id});
}

std::string relay_address(const std::string& relay_endpoint, const crypto::PeerId& peer) {
  std::string_view hostport = relay_endpoint;
  if (hostport.substr(0, kTcpScheme.size()) == kTcpScheme) hostport.remove_prefix(kTcpScheme.size());
  return std::string(kRelayScheme) + std::string(hostport) + std::string(kPeerSuffix) + peer.to_string();
}

Result<PeerAddress> PeerAddress::parse(std::string_view text) {
  PeerAddress address;
  auto relayed = parse_relay_endpoint(text);
  if (!relayed) return relayed.status();
  if (*relayed) {
    address.endpoint = std::string(text);
    address.peer_id = (*relayed)->target;
    return address;
  }
  std::string_view endpoint = text;
  size_t suffix = text.find(kPeerSuffix);
  if (suffix != std::string_view::npos) {
    std::string_view id_text = text.substr(suffix + kPeerSuffix.size());
    auto id = crypto::PeerId::parse(id_text);
    if (!id) {
      return error(Code::kInvalidArgument, "'" + std::string(text) + "': the peer id after /p/ must be 40 hex digits");
    }
    address.peer_id = *id;
    endpoint = text.substr(0, suffix);
  }
  address.endpoint = endpoint.substr(0, kTcpScheme.size()) == kTcpScheme ? std::string(endpoint)
                                                                         : std::string(kTcpScheme) + std::string(endpoint);
  auto host_port = parse_tcp_endpoint(address.endpoint);
  if (!host_port) {
    return error(Code::kInvalidArgument, "bad peer address '" + std::string(text) +
                                             "' (expected tcp://HOST:PORT/k/KEY or tcp://HOST:PORT/p/PEERID): " + host_port.status().message());
  }
  if (host_port->port == 0) return error(Code::kInvalidArgument, "peer address '" + std::string(text) + "' has port 0");
  if (host_port->key) {
    auto keyed_id = crypto::PeerId::from_public_key(*host_port->key);
    if (address.peer_id && *address.peer_id != keyed_id) {
      return error(Code::kInvalidArgument, "peer address '" + std::string(text) + "': the key after /k/ is peer " +
                                               keyed_id.to_string() + "'s, not the /p/ id's");
    }
    address.peer_id = keyed_id;
  }
  return address;
}

Result<std::vector<PeerAddress>> PeerAddress::parse_all(const std::vector<std::string>& texts, std::string_view flag) {
  std::vector<PeerAddress> out;
  for (const auto& text : texts) {
    auto peer = parse(text);
    if (!peer) return peer.status().with_context(std::string(flag));
    out.push_back(*peer);
  }
  return out;
}

std::string PeerAddress::to_string() const {
  if (is_relay(endpoint)) return endpoint;  // names its peer already
  auto keyed = split_endpoint_key(endpoint);
  if (keyed && keyed->key) return endpoint;  // the key names the peer
  return peer_id ? endpoint + std::string(kPeerSuffix) + peer_id->to_string() : endpoint;
}

bool PeerAddress::encrypted() const {
  auto relayed = parse_relay_endpoint(endpoint);
  auto keyed = split_endpoint_key(relayed && *relayed ? (*relayed)->relay_endpoint : endpoint);
  return keyed && keyed->key.has_value();
}

bool is_wildcard_host(std::string_view host) {
  return host == "0.0.0.0" || host == "*" || host == "::" || host == "[::]";
}

std::string local_address_toward(const std::string& remote_host) {
  constexpr const char* kFallback = "127.0.0.1";
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(9);  // any port: nothing is sent
  if (inet_pton(AF_INET, remote_host.c_str(), &remote.sin_addr) != 1) return kFallback;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return kFallback;
  std::string result = kFallback;
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text))) result = text;
  }
  ::close(fd);
  return result;
}

std::string dialable_endpoint(const std::string& bound, const std::string& toward_host) {
  auto host_port = parse_tcp_endpoint(bound);
  if (!host_port || !is_wildcard_host(host_port->host)) return bound;
  std::string dialable = std::string(kTcpScheme) + local_address_toward(toward_host) + ":" + std::to_string(host_port->port);
  return host_port->key ? with_endpoint_key(dialable, *host_port->key) : dialable;
}

}  // namespace dedloc::net
