// Writes the seed corpus for envelope_target: one valid header per message type (DHT ones included) plus a
// few edge cases.
// Usage: fuzz_make_seeds tests/fuzz/corpus/envelope   (built with -DDEDLOC_FUZZ=ON)
#include <cstdio>
#include <fstream>
#include <string>

#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/dht_messages.hpp"
#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

template <class Message>
Bytes header_of(const Message& m, std::uint32_t frames = 0, std::uint64_t rid = 1) {
  MapWriter body;
  m.encode(body);
  crypto::PeerId from(std::array<std::uint8_t, 20>{1, 2, 3});
  return encode_header({Message::kType, rid, from, frames}, body.to_bytes());
}

crypto::PeerId id_of(std::uint8_t byte) {
  std::array<std::uint8_t, 20> id{};
  id.fill(byte);
  return crypto::PeerId(id);
}

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

void write(const std::string& dir, const std::string& name, const Bytes& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                         static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  write(dir, "seed-error", header_of(ErrorReply{Code::kRefused, "group is full"}));
  write(dir, "seed-ping", header_of(Ping{1.7e9}));
  write(dir, "seed-pong", header_of(Pong{1.7e9, 1.7e9 + 0.01, "dedloc 0.1.0"}));
  write(dir, "seed-probe", header_of(Probe{3, true}, 2));
  write(dir, "seed-probe-reply", header_of(ProbeReply{3, 1024}, 2));
  write(dir, "seed-stream-part", header_of(StreamPart{9, 1 << 20, 1 << 28}, 1));
  write(dir, "seed-stream-ack", header_of(StreamAck{9, 1 << 20, 2 << 20}));
  const std::string ep = "tcp://10.0.0.1:7000";
  const std::vector<ContactInfo> contacts{{id_of(2), "tcp://10.0.0.2:7000", 0}, {id_of(3), "tcp://10.0.0.3:7000", 0}};
  const RecordEntry plain{std::nullopt, bytes_of("{\"epoch\": 3}"), 1.7e9 + 0.5, Bytes(64, 0x51)};
  const RecordEntry dict_a{bytes_of("peer-a"), bytes_of("epoch 3"), 1.7e9 + 0.5, {}};
  const RecordEntry dict_b{bytes_of("[owner:" + std::string(64, 'a') + "]"), bytes_of("epoch 4"), 1.7e9,
                           Bytes(64, 0x5a)};
  write(dir, "seed-dht-find-node", header_of(DhtFindNode{id_of(0xaa), ep}));
  write(dir, "seed-dht-nodes", header_of(DhtNodes{contacts}));
  write(dir, "seed-dht-find-value", header_of(DhtFindValue{id_of(0xbb), ""}));
  write(dir, "seed-dht-value-plain", header_of(DhtValue{{plain}, contacts}));
  write(dir, "seed-dht-value-dict", header_of(DhtValue{{dict_a, dict_b}, contacts}));
  write(dir, "seed-dht-store", header_of(DhtStore{"run1_progress", dict_a, ep}));
  write(dir, "seed-dht-store-plain", header_of(DhtStore{"run1_metrics", plain, ""}));
  write(dir, "seed-dht-stored", header_of(DhtStored{contacts}));
  write(dir, "seed-dht-list-peers", header_of(DhtListPeers{1000}));
  const std::vector<ContactInfo> table{{id_of(2), "tcp://10.0.0.2:7000", 1.7e9},
                                       {id_of(3), "tcp://10.0.0.3:7000", 1.7e9 + 0.5}};
  write(dir, "seed-dht-peer-list", header_of(DhtPeerList{ep, table, 12}));
  write(dir, "seed-dht-check-reachable", header_of(DhtCheckReachable{ep}));
  write(dir, "seed-dht-reachability", header_of(DhtReachability{false, "no answer within 2000 ms"}));
  AvgBegin begin{Bytes(16, 0x77), {id_of(4), id_of(5), id_of(6)}, {ep, "", "tcp://10.0.0.6:7000"},
                 {AvgRole::kNode, AvgRole::kClient, AvgRole::kAux}, {600, 0, 400}, 1000, 256};
  write(dir, "seed-avg-join", header_of(AvgJoin{"run1_grad", Bytes(32, 0x33), ep, AvgRole::kNode, 1.25e8, 1.7e9 + 30, 1}));
  write(dir, "seed-avg-join-merge",
        header_of(AvgJoin{"run1_grad", Bytes(32, 0x33), ep, AvgRole::kNode, 1.25e8, 1.7e9 + 30, 2,
                          {{id_of(0x44), ep, AvgRole::kAux, 1e8}}}));
  write(dir, "seed-avg-begin", header_of(begin));
  write(dir, "seed-avg-join-refused",
        header_of(AvgJoinRefused{JoinRefusal::kNotALeader, "follows another leader", "tcp://10.0.0.9:7000/p/" + std::string(40, 'b')}));
  write(dir, "seed-avg-part", header_of(AvgPart{Bytes(16, 0x77), 3, 128, 1}, 1));
  write(dir, "seed-avg-part-delta", header_of(AvgPartDelta{3, 1, 3}, 1));
  write(dir, "seed-avg-state-request", header_of(AvgStateRequest{"run1", 7, 1 << 20, 1 << 20, 4, false, false}));
  write(dir, "seed-avg-state-describe", header_of(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, true, false}));
  write(dir, "seed-avg-state-done", header_of(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, false, true}));
  write(dir, "seed-avg-state-part", header_of(AvgStateReply{"run1", 7, Bytes(32, 0x5c), 3 << 20, 1 << 20, 1 << 20, 4, 2, false, {}, {}}, 1));
  write(dir, "seed-avg-state-description",
        header_of(AvgStateReply{"run1", 7, Bytes(32, 0x5c), 3871, 0, 0, 0, 1, true,
                                {{"embed.weight", {30, 128}}, {"ln.bias", {30}}, {"step", {}}, {"empty", {0, 4}}},
                                {{"lr", 0.00125}, {"optimizer", std::string("lamb")}, {"scheduler_step", 1000.0}}}));
  write(dir, "seed-rid-max", header_of(Ping{0}, 0, UINT64_MAX));
  write(dir, "seed-empty-map", Bytes{0x80});
  write(dir, "seed-nil", Bytes{0xc0});
  return 0;
}
