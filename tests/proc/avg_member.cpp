// A test helper process: one member of a fixed averaging group, so proc tests can SIGKILL a real member
// mid-round. Not a product binary (the product forms groups by matchmaking: dedloc-avg, the trainer).
//
//   avg_member --index I --ports P0,P1,... --roles node,client,aux,... --length L --part E
//              [--codec none] [--sender-timeout-ms 1000] [--reducer-timeout-ms 2000]
//              [--liveness-timeout-ms 0] [--die-after-parts N] [--relay tcp://HOST:PORT/k/KEY]
//              [--wait-out-refusals] --out FILE
//
// Member i has identity seed (i+1)×32, listens on 127.0.0.1:P_i, holds x_i[k] = (i+1)·g(k) (g: a fixed
// pattern), weighs i+1, and averages once with the others. With --die-after-parts it SIGKILLs itself after
// its N-th part event (a part sent, or a part it reduced). It prints {"ready": true} once it serves the
// round, one JSON line with what it saw at the end, and writes its final vector to FILE (raw float32),
// atomically. With --relay, client members attach to that relay and every member lists their addresses
// through it in the group (wire::AvgBegin::relays), where the liveness pings reach them. Its client fails a
// call whose connection is refused at once, as the averager's does, unless --wait-out-refusals: then only
// a ping's timeout finds a member gone, as it finds a machine that went away.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/relay_link.hpp"

using namespace dedloc;

namespace {

// Whether 127.0.0.1:`port` accepts a connection within `within` (tried every 20 ms).
bool wait_until_listening(std::uint16_t port, std::chrono::seconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool listening = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (listening) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

crypto::Identity identity_of(size_t index) {
  Bytes seed(32, static_cast<std::uint8_t>(index + 1));
  return *crypto::Identity::from_seed(seed);
}

float pattern(size_t k) { return static_cast<float>(static_cast<int>(k % 101) - 50) / 8.0f; }

avg::AvgRole role_of(const std::string& name) {
  if (name == "client") return avg::AvgRole::kClient;
  if (name == "aux") return avg::AvgRole::kAux;
  return avg::AvgRole::kNode;
}

}  // namespace

int main(int argc, char** argv) {
  size_t index = 0, length = 0, part = 0, die_after = 0;
  std::vector<int> ports;
  std::vector<std::string> roles;
  std::string codec_name = "none", out, relay;
  int sender_ms = 1000, reducer_ms = 2000, liveness_ms = 0;
  CLI::App app{"one member of a fixed averaging group (proc tests)"};
  app.add_option("--index", index)->required();
  app.add_option("--ports", ports)->required()->delimiter(',');
  app.add_option("--roles", roles)->required()->delimiter(',');
  app.add_option("--length", length)->required();
  app.add_option("--part", part)->required();
  app.add_option("--codec", codec_name);
  app.add_option("--sender-timeout-ms", sender_ms);
  app.add_option("--reducer-timeout-ms", reducer_ms);
  app.add_option("--liveness-timeout-ms", liveness_ms);
  app.add_option("--die-after-parts", die_after);
  app.add_option("--relay", relay);
  bool wait_out_refusals = false;
  app.add_flag("--wait-out-refusals", wait_out_refusals);
  app.add_option("--out", out)->required();
  CLI11_PARSE(app, argc, argv);
  const size_t n = ports.size();
  if (roles.size() != n || index >= n) return 2;
  auto codec = avg::parse_codec(codec_name);
  if (!codec) return 2;

  // The group every member derives alike: equal shares among the members that reduce.
  wire::AvgBegin begin;
  begin.group_id = Bytes(wire::kGroupIdBytes, 0x61);
  size_t reducers = 0;
  for (const auto& r : roles) reducers += role_of(r) != avg::AvgRole::kClient;
  for (size_t i = 0; i < n; ++i) {
    avg::AvgRole role = role_of(roles[i]);
    begin.ids.push_back(identity_of(i).peer_id());
    begin.endpoints.push_back(role == avg::AvgRole::kClient ? "" : "tcp://127.0.0.1:" + std::to_string(ports[i]));
    begin.roles.push_back(role);
    begin.relays.push_back(role == avg::AvgRole::kClient && !relay.empty()
                               ? net::relay_address(relay, identity_of(i).peer_id()) : "");
    begin.counts.push_back(role == avg::AvgRole::kClient ? 0 : length / reducers);
  }
  for (size_t i = n; i-- > 0;) {
    if (begin.counts[i] > 0) {
      begin.counts[i] += length - (length / reducers) * reducers;  // the rest to the last reducer
      break;
    }
  }
  begin.length = length;
  begin.part_elements = part;
  auto group = avg::Group::from_begin(begin);
  if (!group) {
    std::cerr << group.status().to_string() << "\n";
    return 2;
  }

  Logger quiet(LogLevel::kError);
  zmq::context_t context;
  crypto::Identity me = identity_of(index);
  const avg::AvgRole my_role = role_of(roles[index]);
  std::string listen = my_role == avg::AvgRole::kClient ? "tcp://127.0.0.1:0" : "tcp://127.0.0.1:" + std::to_string(ports[index]);
  net::Server server(context, net::ServerOptions{listen, me.peer_id(), {}, &quiet});
  net::ClientOptions calling{me.peer_id(), {}, std::chrono::seconds(60), &quiet};
  calling.fail_when_refused = !wait_out_refusals;  // as the averager's client (avg/averager.cpp)
  net::Client client(context, calling);
  avg::AllReduce all_reduce(server, client, me.peer_id(), &quiet);
  // Parts that arrive between the ready line and run() are held, not refused as "not yet" and sent again
  // (a resend would count as another part event of their sender's --die-after-parts).
  all_reduce.expect(*group);
  if (!server.start().is_ok()) return 4;
  std::optional<net::RelayLink> relay_link;
  if (my_role == avg::AvgRole::kClient && !relay.empty()) {
    auto relay_address = net::PeerAddress::parse(relay);
    if (!relay_address) return 2;
    relay_link.emplace(context, me, net::RelayLinkOptions{.relay = *relay_address, .local_endpoint = server.endpoint(), .log = &quiet});
    if (auto attached = relay_link->start(); !attached.is_ok()) {
      std::cerr << attached.to_string() << "\n";
      return 4;
    }
  }
  std::cout << nlohmann::json{{"ready", true}}.dump() << std::endl;
  // The members start one after another: a port not yet listening refuses our parts, which the client fails
  // at once (it takes a refusal for a member that died). The round starts once every port listens.
  for (size_t i = 0; i < n; ++i) {
    if (i == index || role_of(roles[i]) == avg::AvgRole::kClient) continue;
    if (!wait_until_listening(static_cast<std::uint16_t>(ports[i]), std::chrono::seconds(30))) {
      std::cerr << "member " << i << " never listened on port " << ports[i] << "\n";
      return 3;
    }
  }

  std::vector<float> vector;
  if (my_role != avg::AvgRole::kAux) {
    vector.resize(length);
    for (size_t k = 0; k < length; ++k) vector[k] = static_cast<float>(index + 1) * pattern(k);
  }
  avg::AllReduceOptions options;
  options.codec = *codec;
  options.window = 2;
  options.sender_timeout = std::chrono::milliseconds(sender_ms);
  options.reducer_timeout = std::chrono::milliseconds(reducer_ms);
  options.liveness_timeout = std::chrono::milliseconds(liveness_ms);
  std::atomic<size_t> events{0};
  if (die_after > 0) {
    options.on_progress = [&events, die_after] {
      if (++events == die_after) raise(SIGKILL);
    };
  }
  auto started = std::chrono::steady_clock::now();
  auto result = all_reduce.run(*group, vector, static_cast<double>(index + 1), options, Deadline::after(std::chrono::seconds(60)));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Serve a moment longer: answers our reducer queued for slower members must leave before the socket
  // closes (closing drops them, and the member waiting for them would count us gone or failed).
  std::this_thread::sleep_for(std::chrono::seconds(1));
  server.stop();  // before the all-reduce its handler points into goes away
  if (!result) {
    std::cerr << result.status().to_string() << "\n";
    return 1;
  }
  Bytes raw(vector.size() * sizeof(float));
  if (!vector.empty()) std::memcpy(raw.data(), vector.data(), raw.size());
  if (auto written = write_file_atomically(out, std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
      !written.is_ok()) {
    std::cerr << written.to_string() << "\n";
    return 1;
  }
  nlohmann::json banned = nlohmann::json::array(), failed = nlohmann::json::array(), gone = nlohmann::json::array();
  for (const auto& id : result->gone) gone.push_back(*group->index_of(id));
  for (const auto& id : result->banned_senders) banned.push_back(*group->index_of(id));
  for (const auto& id : result->failed_reducers) failed.push_back(*group->index_of(id));
  std::cout << nlohmann::json{{"index", index}, {"seconds", seconds}, {"averaged_fraction", result->averaged_fraction},
                              {"weight", result->weight}, {"least_weight", result->least_weight},
                              {"banned", banned}, {"failed", failed}, {"gone", gone}}.dump()
            << std::endl;
  return 0;
}
