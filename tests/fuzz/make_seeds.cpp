// Writes the seed corpus of every fuzz target: valid inputs (each decoder's happy path, so the fuzzer starts
// deep) plus a few edge cases, into CORPUS_ROOT/<target>/ (seed-* files; existing files are kept).
// Usage: fuzz_make_seeds tests/fuzz/corpus   (built with -DDEDLOC_FUZZ=ON)
// The config target also gets the repository's own YAML (configs/dht.yaml, configs/peers/*.yaml, recipes/).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/training_state.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/crypto/access_token.hpp"
#include "dedloc/dht/revocations.hpp"
#include "dedloc/wire/auth_frame.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/dht_messages.hpp"
#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"
#include "dedloc/wire/datagram.hpp"
#include "dedloc/wire/relay_frames.hpp"
#include "fuzz/fixtures.hpp"

using namespace dedloc;
using namespace dedloc::wire;
namespace fs = std::filesystem;

namespace {

template <class Message>
Bytes body_of(const Message& m) {
  MapWriter body;
  m.encode(body);
  return body.to_bytes();
}

template <class Message>
Bytes header_of(const Message& m, std::uint32_t frames = 0, std::uint64_t rid = 1) {
  crypto::PeerId from(std::array<std::uint8_t, 20>{1, 2, 3});
  return encode_header({Message::kType, rid, from, frames}, body_of(m));
}

crypto::PeerId id_of(std::uint8_t byte) { return fuzz::fixed_peer_id(byte); }

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes u16le(size_t n) { return Bytes{static_cast<std::uint8_t>(n & 0xff), static_cast<std::uint8_t>((n >> 8) & 0xff)}; }

// A length byte and the bytes (fuzz::Input::prefixed).
Bytes prefixed(const Bytes& b) {
  Bytes out{static_cast<std::uint8_t>(std::min<size_t>(b.size(), 255))};
  out.insert(out.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(b.size(), 255)));
  return out;
}

void write(const fs::path& dir, const std::string& name, const Bytes& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_text(const fs::path& dir, const std::string& name, const std::string& text) { write(dir, name, bytes_of(text)); }

// ---- envelope: one valid header per message type (DHT ones included) plus a few edge cases ----
void envelope_seeds(const fs::path& dir) {
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
  DhtFindValue since{id_of(0xbb), ""};
  since.since_instance = 99;
  since.since_seq = 7;
  write(dir, "seed-dht-find-value-since", header_of(since));
  DhtValue changes{{dict_b}, contacts};
  changes.instance = 99;
  changes.seq = 8;
  changes.held = 2;
  write(dir, "seed-dht-value-changes", header_of(changes));
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
  write(dir, "seed-avg-part-average", header_of(AvgPart{Bytes(16, 0x77), 3, 128, 1, PartAnswer::kAverage}, 1));
  write(dir, "seed-avg-part-delta-average", header_of(AvgPartDelta{3, 1, 3, PartAnswer::kAverage}, 1));
  write(dir, "seed-avg-part-ordered", header_of(AvgPart{Bytes(16, 0x77), 3, 128, 1, PartAnswer::kAverage, 5}, 1));
  write(dir, "seed-avg-part-delta-weight", header_of(AvgPartDelta{3, 1, 3, PartAnswer::kAverage, 96.0}, 1));
  write(dir, "seed-avg-state-request", header_of(AvgStateRequest{"run1", 7, 1 << 20, 1 << 20, 4, false, false}));
  write(dir, "seed-avg-state-describe", header_of(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, true, false}));
  write(dir, "seed-avg-state-done", header_of(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, false, true}));
  write(dir, "seed-avg-state-part", header_of(AvgStateReply{"run1", 7, Bytes(32, 0x5c), 3 << 20, 1 << 20, 1 << 20, 4, 2, false, {}, {}}, 1));
  write(dir, "seed-avg-state-description",
        header_of(AvgStateReply{"run1", 7, Bytes(32, 0x5c), 3871, 0, 0, 0, 1, true,
                                {{"embed.weight", {30, 128}}, {"ln.bias", {30}}, {"step", {}}, {"empty", {0, 4}}},
                                {{"lr", 0.00125}, {"optimizer", std::string("lamb")}, {"scheduler_step", 1000.0}}}));
  write(dir, "seed-avg-result-request", header_of(AvgResultRequest{"run1_grad.5.x", 0, 1 << 20}));
  write(dir, "seed-avg-result-part",
        header_of(AvgResultReply{"run1_grad.5.x", Bytes(32, 0x5c), 3 << 20, 3, 1 << 20, 1 << 20}, 1));
  write(dir, "seed-rid-max", header_of(Ping{0}, 0, UINT64_MAX));
  write(dir, "seed-empty-map", Bytes{0x80});
  write(dir, "seed-nil", Bytes{0xc0});
}

// ---- relay_frames: selector 0 frames, 1 attach proofs, 2 attach answers ----
void relay_frames_seeds(const fs::path& dir) {
  const auto peer = id_of(0x21);
  const Bytes token{9, 8, 7, 6, 5, 4, 3, 2};
  auto frame = [](const Bytes& f) { return cat({Bytes{0}, f}); };
  write(dir, "seed-forward", frame(encode_relay_frame(RelayTag::kForward, peer.span())));
  write(dir, "seed-request", frame(encode_relay_frame(RelayTag::kRequest, token)));
  write(dir, "seed-reply", frame(encode_relay_frame(RelayTag::kReply, token)));
  write(dir, "seed-attach", frame(encode_relay_frame(RelayTag::kAttach)));
  write(dir, "seed-attach-answer", frame(encode_relay_frame(RelayTag::kAttachAnswer)));
  write(dir, "seed-heartbeat", frame(encode_relay_frame(RelayTag::kHeartbeat)));
  write(dir, "seed-long-id", frame(encode_relay_frame(RelayTag::kRequest, Bytes(255, 0x61))));
  write(dir, "seed-not-relay", frame(header_of(Ping{1.7e9})));
  write(dir, "seed-magic-only", frame(bytes_of("DLR1")));

  const auto& identity = fuzz::identity();
  auto proof = [](const Bytes& p) { return cat({Bytes{1}, p}); };
  write(dir, "seed-proof", proof(encode_attach_proof(identity, fuzz::relay_id(), fuzz::kRelayClockMs)));
  write(dir, "seed-proof-edge", proof(encode_attach_proof(identity, fuzz::relay_id(), fuzz::kRelayClockMs + fuzz::kRelayWindowMs)));
  write(dir, "seed-proof-stale", proof(encode_attach_proof(identity, fuzz::relay_id(), fuzz::kRelayClockMs - 2 * fuzz::kRelayWindowMs)));
  write(dir, "seed-proof-other-relay", proof(encode_attach_proof(identity, id_of(0x11), fuzz::kRelayClockMs)));
  write(dir, "seed-proof-empty-map", proof(Bytes{0x80}));

  auto answer = [](const Bytes& a) { return cat({Bytes{2}, a}); };
  write(dir, "seed-answer-ok", answer(encode_attach_answer(Status::ok())));
  write(dir, "seed-answer-refused", answer(encode_attach_answer(error(Code::kRefused, "relay full (64 peers)"))));
  write(dir, "seed-answer-unauthorized", answer(encode_attach_answer(error(Code::kUnauthorized, "bad signature"))));
  MapWriter unknown;
  unknown.put("code", std::uint64_t{99}).put("why", std::string_view("?"));
  write(dir, "seed-answer-unknown-code", answer(unknown.to_bytes()));
}

// ---- codec: every codec on a few shapes of data, sized to fit (0x80) or with an explicit count ----
void codec_seeds(const fs::path& dir) {
  const avg::Codec codecs[] = {avg::Codec::kNone, avg::Codec::kFloat16, avg::Codec::kScaledFloat16,
                               avg::Codec::kUniform8Bit, avg::Codec::kBlockwise8Bit};
  for (avg::Codec codec : codecs) {
    const std::string name(avg::codec_name(codec));
    const auto number = static_cast<std::uint8_t>(codec);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{256}, size_t{300}}) {
      std::vector<float> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = std::sin(static_cast<float>(i) * 0.37f) * (1.0f + static_cast<float>(i % 5));
      Bytes encoded(avg::encoded_bytes(codec, n));
      avg::encode(codec, values, encoded);
      write(dir, "seed-" + name + "-" + std::to_string(n), cat({Bytes{static_cast<std::uint8_t>(number | 0x80)}, encoded}));
      if (n == 7) {
        write(dir, "seed-" + name + "-count", cat({Bytes{number}, u16le(n), encoded}));
        write(dir, "seed-" + name + "-count-wrong", cat({Bytes{number}, u16le(n + 1), encoded}));
      }
    }
    // Extremes: huge, tiny, mixed signs.
    std::vector<float> extreme{3e38f, -3e38f, 1e-40f, 0.0f, -0.0f, 65504.0f, 70000.0f, -1.0f};
    Bytes encoded(avg::encoded_bytes(codec, extreme.size()));
    avg::encode(codec, extreme, encoded);
    write(dir, "seed-" + name + "-extreme", cat({Bytes{static_cast<std::uint8_t>(number | 0x80)}, encoded}));
  }
  // Bad headers: scaled-fp16 scale 0 / NaN mean, uint8 min > max, blockwise8 negative absmax and code -128.
  auto f32 = [](float v) {
    Bytes b(4);
    std::memcpy(b.data(), &v, 4);
    return b;
  };
  write(dir, "seed-scaled-fp16-scale-0", cat({Bytes{0x82}, f32(1), f32(0), Bytes(8, 0x3c)}));
  write(dir, "seed-scaled-fp16-mean-nan", cat({Bytes{0x82}, f32(std::numeric_limits<float>::quiet_NaN()), f32(1), Bytes(8, 0x3c)}));
  write(dir, "seed-uint8-min-over-max", cat({Bytes{0x83}, f32(2), f32(1), Bytes(8, 0x80)}));
  write(dir, "seed-blockwise8-negative", cat({Bytes{0x84}, f32(-1), Bytes(8, 0x10)}));
  write(dir, "seed-blockwise8-code-128", cat({Bytes{0x84}, f32(1), Bytes{0x80, 1, 2, 3}}));
  write(dir, "seed-unknown-codec", cat({Bytes{0x85}, Bytes(16, 0)}));
}

// ---- avg_state: selector, u16 body length, body, frame ----
Bytes avg_state_input(std::uint8_t selector, const Bytes& body, const Bytes& frame = {}) {
  return cat({Bytes{selector}, u16le(body.size()), body, frame});
}

void avg_state_seeds(const fs::path& dir) {
  const std::string ep = "tcp://10.0.0.1:7000";
  write(dir, "seed-begin-three",
        avg_state_input(0, body_of(AvgBegin{Bytes(16, 0x77), {id_of(4), id_of(5), id_of(6)},
                                            {ep, "", "tcp://10.0.0.6:7000"},
                                            {AvgRole::kNode, AvgRole::kClient, AvgRole::kAux}, {600, 0, 400}, 1000, 256})));
  write(dir, "seed-begin-one-part",
        avg_state_input(0, body_of(AvgBegin{Bytes(16, 0x01), {id_of(4), id_of(5)}, {ep, "tcp://10.0.0.5:7000"},
                                            {AvgRole::kNode, AvgRole::kNode}, {3, 4}, 7, 1})));
  write(dir, "seed-begin-aux-only",
        avg_state_input(0, body_of(AvgBegin{Bytes(16, 0x02), {id_of(7)}, {ep}, {AvgRole::kAux}, {10}, 10, 4})));
  write(dir, "seed-begin-big-parts",
        avg_state_input(0, body_of(AvgBegin{Bytes(16, 0x03), {id_of(8), id_of(9)}, {ep, ep},
                                            {AvgRole::kNode, AvgRole::kNode}, {1ull << 40, 1ull << 40}, 1ull << 41,
                                            ~std::uint64_t{0}})));

  const std::vector<StateTensor> tensors{{"embed.weight", {3, 4}}, {"ln.bias", {4}}, {"step", {}}, {"empty", {0, 4}}};
  const Bytes hash = avg::schema_hash(tensors);
  const StateEntries meta{{"lr", 0.00125}, {"optimizer", std::string("lamb")}, {"scheduler_step", 1000.0}};
  write(dir, "seed-description",
        avg_state_input(1, body_of(AvgStateReply{"run1", 7, hash, 17, 0, 0, 0, 1, true, tensors, meta})));
  // A description with a stripe in each codec.
  for (std::uint64_t codec = 0; codec < 5; ++codec) {
    std::vector<float> values{0.5f, -1.25f, 3.0f, 0.0f, 2.5f, -0.75f, 1.0f, 4.0f};
    Bytes frame(avg::encoded_bytes(static_cast<avg::Codec>(codec), values.size()));
    avg::encode(static_cast<avg::Codec>(codec), values, frame);
    write(dir, "seed-description-stripe-" + std::to_string(codec),
          avg_state_input(1, body_of(AvgStateReply{"run1", 7, hash, 17, 4, 8, codec, 1, true, tensors, meta}), frame));
  }
  write(dir, "seed-part", avg_state_input(1, body_of(AvgStateReply{"run1", 7, hash, 17, 0, 8, 0, 2, false, {}, {}}),
                                          Bytes(32, 0x3f)));
  write(dir, "seed-description-huge",
        avg_state_input(1, body_of(AvgStateReply{"run1", 7, hash, 1ull << 40, 0, 0, 0, 1, true,
                                                 {{"w", {1ull << 20, 1ull << 20}}}, {}})));
}

// ---- config: YAML texts ----
void config_seeds(const fs::path& dir, const fs::path& source) {
  write_text(dir, "seed-peers",
             "batch: 4096\nparams: 18M\ncodec: fp16\npeers:\n  - name: gpu\n    count: 3\n    compute: 120\n"
             "    bandwidth: 100Mbit\n  - name: cpu\n    download: 1Gbit\n    upload: 100Mbit\n    client_mode: true\n"
             "limits:\n  - {from: gpu-1, to: cpu, rate: 10Mbit}\n");
  write_text(dir, "seed-recipe",
             "run_id: demo\nseed: 1\ntraining: {target_batch_size: 1024, micro_batch_size: 32, max_grad_norm: 1.0}\n"
             "schedule: {kind: linear, lr: 0.00176, warmup_epochs: 50, total_epochs: 1000, final_lr: 0.0001}\n"
             "averaging: {target_group_size: 16, matchmaking_time: 5, averaging_timeout: 60, codec: adaptive}\n");
  write_text(dir, "seed-cosine", "schedule:\n  kind: cosine\n  lr: 0.3\n  warmup_epochs: 0\n  total_epochs: 10\n  final_lr: 0.1\n");
  write_text(dir, "seed-types",
             "s: text\nb: true\ni: -3\nu: 18446744073709551615\nd: 1.5e300\nt: 0.25\nl: [a, b, 3]\nn: ~\n"
             "nested: {a: {b: {c: [1, {d: 2}]}}}\n");
  write_text(dir, "seed-anchors", "base: &b {lr: 0.1, kind: constant}\nschedule: *b\nother: *b\n");
  write_text(dir, "seed-empty", "");
  write_text(dir, "seed-not-a-map", "- 1\n- 2\n");
  write_text(dir, "seed-bad-yaml", "a: [1, 2\n");
  // The repository's own configuration files.
  for (const char* sub : {"configs", "configs/peers", "recipes"}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(source / sub, ec)) {
      if (entry.path().extension() != ".yaml") continue;
      auto text = read_file(entry.path().string());
      if (text) write_text(dir, "seed-" + std::string(sub == std::string("configs/peers") ? "peers-" : "") +
                                    entry.path().stem().string(), *text);
    }
  }
}

// ---- checkpoint: mode 0 whole files, mode 1 header + data with the checksum filled in by the target ----
void checkpoint_seeds(const fs::path& dir) {
  const fs::path tmp = fs::temp_directory_path() / "dedloc-fuzz-seed.safetensors";
  auto file_of = [&](const avg::TrainingState& state, const std::map<std::string, std::string>& extra) {
    Status saved = collab::save_checkpoint(tmp.string(), state, extra);
    if (!saved.is_ok()) {
      std::fprintf(stderr, "%s\n", saved.to_string().c_str());
      std::exit(1);
    }
    auto text = read_file(tmp.string());
    fs::remove(tmp);
    return cat({Bytes{0}, bytes_of(*text)});
  };
  avg::StateMetadata meta{42, {{"lr", 0.00125}, {"optimizer", std::string("lamb")}}};
  auto state = avg::TrainingState::with_tensors({{"w", {2, 3}}, {"b", {3}}, {"step", {}}}, meta).value();
  for (size_t i = 0; i < state.flat().size(); ++i) state.flat()[i] = static_cast<float>(i) * 0.5f - 1.0f;
  write(dir, "seed-small", file_of(state, {{"run_id", "demo"}, {"recipe", "recipes/mlp.yaml"}}));
  write(dir, "seed-empty-state", file_of(avg::TrainingState::with_tensors({}).value(), {}));
  auto zero = avg::TrainingState::with_tensors({{"empty", {0, 4}}, {"one", {1}}}).value();
  write(dir, "seed-zero-sized", file_of(zero, {}));

  // Mode 1: the header's checksum and schema hash are the target's to fill in.
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("__metadata__":{"format":"dedloc-checkpoint-v1","epoch":"7","entries":"{\"lr\":0.1}","run_id":"x"}})";
  Bytes data(16);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 17);
  write(dir, "seed-assembled", cat({Bytes{1}, bytes_of(header), Bytes{0}, data}));
  write(dir, "seed-assembled-no-tensors",
        cat({Bytes{1}, bytes_of(R"({"__metadata__":{"format":"dedloc-checkpoint-v1","epoch":"0","entries":"{}"}})"), Bytes{0}}));
  write(dir, "seed-short", Bytes{0, 1, 2, 3});
  write(dir, "seed-huge-length", cat({Bytes{0}, Bytes{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, bytes_of("{}")}));
}

// ---- records ----
Bytes signed_entry_input(std::uint8_t family, const std::string& key, const Bytes& value) {
  // flags: 1 subkey, 2 owner marker of the fixed identity, 4 expiration now + u16, 0x80 sign; family << 3.
  const auto flags = static_cast<std::uint8_t>(1 | 2 | 4 | 0x80 | (family << 3));
  return cat({Bytes{5, flags}, prefixed(bytes_of(key)), prefixed({}), u16le(600), prefixed({}), value});
}

void records_seeds(const fs::path& dir) {
  collab::PeerProgress progress{.epoch = 12, .samples_accumulated = 640, .samples_per_second = 123.5,
                                .time = fuzz::kRecordsNow - 3, .bandwidth = 1.25e7, .compute = 300,
                                .params_hash = 0x0123456789abcdefull, .round_seconds = 2.5, .round_mad_seconds = 0.25,
                                .micro_batch = 16};
  collab::PeerProgress client{.epoch = 12, .samples_accumulated = 64, .samples_per_second = 10,
                              .time = fuzz::kRecordsNow - 1, .client_mode = true, .bandwidth = 1e6};
  collab::PeerMetrics metrics{12, 2.5, 123.5, 20, "trainer", 4096, 7, fuzz::kRecordsNow - 2, ""};
  collab::PeerMetrics aux{12, std::nullopt, 0, 0, "aux", 0, 30, fuzz::kRecordsNow - 2, ""};
  const Bytes progress_value = collab::encode_progress(progress);
  const Bytes metrics_value = collab::encode_metrics(metrics);
  write(dir, "seed-progress", cat({Bytes{0}, progress_value}));
  write(dir, "seed-progress-client", cat({Bytes{0}, collab::encode_progress(client)}));
  write(dir, "seed-metrics", cat({Bytes{1}, metrics_value}));
  write(dir, "seed-metrics-aux", cat({Bytes{1}, collab::encode_metrics(aux)}));
  collab::PeerMetrics diloco = metrics;  // with the mode fields
  diloco.mode = "diloco";
  diloco.inner_steps = 8;
  diloco.bytes_sent = 123456789;
  diloco.samples_computed = 65536;
  write(dir, "seed-metrics-diloco", cat({Bytes{1}, collab::encode_metrics(diloco)}));

  const auto me = crypto::PeerId::from_public_key(fuzz::identity().public_key());
  MapWriter listing;
  listing.put("addr", "tcp://10.0.0.1:7100/p/" + me.to_string()).put("peers", std::uint64_t{3}).put("max", std::uint64_t{64});
  write(dir, "seed-relay-listing", cat({Bytes{2, 1}, prefixed({}), listing.to_bytes()}));
  MapWriter stranger;
  stranger.put("addr", "tcp://10.0.0.1:7100/p/" + id_of(0x33).to_string());
  write(dir, "seed-relay-listing-not-owner", cat({Bytes{2, 1}, prefixed({}), stranger.to_bytes()}));

  MapWriter donor;
  donor.put("ep", std::string_view("tcp://10.0.0.2:7000")).put("epoch", std::uint64_t{12}).put("load", std::uint64_t{1})
      .put("max", std::uint64_t{4}).put("prio", 1.0);
  write(dir, "seed-donor", cat({Bytes{3}, prefixed(bytes_of("tcp://10.0.0.2:7000/p/" + id_of(0x44).to_string())), donor.to_bytes()}));
  write(dir, "seed-donor-relayed",
        cat({Bytes{3}, prefixed(bytes_of("relay://10.0.0.1:7100/p/" + id_of(0x45).to_string())), donor.to_bytes()}));
  MapWriter refreshed_donor;
  refreshed_donor.put("ep", std::string_view("tcp://10.0.0.3:7000")).put("epoch", std::uint64_t{13}).put("t", 1.7e9);
  write(dir, "seed-donor-refreshed",
        cat({Bytes{3}, prefixed(bytes_of("tcp://10.0.0.3:7000/p/" + id_of(0x46).to_string())), refreshed_donor.to_bytes()}));

  MapWriter schema;
  schema.put_binary("hash", Bytes(32, 0x5c)).put("len", std::uint64_t{1} << 20);
  write(dir, "seed-vector-schema", cat({Bytes{4}, schema.to_bytes()}));
  const Bytes held = wire::encode_round_result({Bytes(32, 0x5c), std::uint64_t{1} << 20, 3});
  write(dir, "seed-round-result", cat({Bytes{4}, held}));

  // Whole entries, signed by the fixed identity, in each family.
  write(dir, "seed-entry-progress", signed_entry_input(1, "run", progress_value));
  write(dir, "seed-entry-metrics", signed_entry_input(2, "run", metrics_value));
  write(dir, "seed-entry-donors", signed_entry_input(3, "run", donor.to_bytes()));
  write(dir, "seed-entry-relays", signed_entry_input(4, "dedloc", listing.to_bytes()));
  write(dir, "seed-entry-schema", signed_entry_input(5, "run", schema.to_bytes()));
  write(dir, "seed-entry-held", signed_entry_input(6, "run_grad.5.x", held));
  write(dir, "seed-entry-withdrawn", signed_entry_input(1, "run", {}));
  // Unowned and unsigned, expiration as a raw double.
  double expiration = fuzz::kRecordsNow + 30;
  Bytes exp(8);
  std::memcpy(exp.data(), &expiration, 8);
  write(dir, "seed-entry-unowned",
        cat({Bytes{5, static_cast<std::uint8_t>(1 | (1 << 3))}, prefixed(bytes_of("run")), prefixed(bytes_of("peer-a")), exp,
             prefixed({}), progress_value}));
  write(dir, "seed-entry-forged",
        cat({Bytes{5, static_cast<std::uint8_t>(1 | 2 | 4 | (2 << 3))}, prefixed(bytes_of("run")), prefixed({}), u16le(60),
             prefixed(Bytes(64, 0x5a)), metrics_value}));

  // A swarm: two trainers (one in DiLoCo mode), a client, an aux peer.
  Bytes swarm{6, 7};
  auto add = [&](std::uint8_t kind, const std::string& subkey, const Bytes& value) {
    swarm = cat({swarm, Bytes{kind}, prefixed(bytes_of(subkey)), prefixed(value)});
  };
  add(2, "", progress_value);
  add(3, "", metrics_value);
  add(0, "[owner:" + std::string(64, 'b') + "]", collab::encode_progress(client));
  add(0, "peer-c", progress_value);
  add(1, "peer-c", collab::encode_metrics(metrics));
  add(1, "aux-1", collab::encode_metrics(aux));
  add(3, "-d", collab::encode_metrics(diloco));
  write(dir, "seed-swarm", swarm);
}

// ---- access: selector 0 token, 1 token text, 2 auth frame, 3 attach proof with a token, 4 revocations ----
void access_seeds(const fs::path& dir) {
  const auto& authority = fuzz::identity();
  auto input = [](std::uint8_t selector, const Bytes& payload) { return cat({Bytes{selector}, payload}); };
  const auto valid_until = static_cast<std::uint64_t>(fuzz::kRecordsNow + 3600);
  auto token = crypto::AccessToken::issue(authority, authority.public_key(), "fuzz", valid_until).value();
  auto expired = crypto::AccessToken::issue(authority, authority.public_key(), "late", 1).value();
  auto long_name =
      crypto::AccessToken::issue(authority, authority.public_key(), std::string(crypto::kMaxTokenName, 'n'), valid_until)
          .value();
  write(dir, "seed-token", input(0, token.encode()));
  write(dir, "seed-token-expired", input(0, expired.encode()));
  write(dir, "seed-token-long-name", input(0, long_name.encode()));
  write(dir, "seed-token-text", input(1, bytes_of(token.to_text())));
  write(dir, "seed-token-text-garbage", input(1, bytes_of("dedloc-token-v1:zz")));
  // A frame the fixed run accepts: the authority's own token, signed over an empty header at the fixed time.
  wire::AuthFrame frame;
  frame.token = token.encode();
  frame.time_ms = static_cast<std::uint64_t>(fuzz::kRecordsNow * 1000);
  frame.nonce.fill(0x5a);
  frame.signature = authority.sign(wire::auth_signed_bytes({}, frame.time_ms, frame.nonce));
  write(dir, "seed-auth-frame", input(2, wire::encode_auth_frame(frame)));
  frame.token = expired.encode();
  write(dir, "seed-auth-frame-expired", input(2, wire::encode_auth_frame(frame)));
  write(dir, "seed-auth-frame-short", input(2, bytes_of("DLA1")));
  write(dir, "seed-attach-token", input(3, encode_attach_proof(authority, fuzz::relay_id(), fuzz::kRelayClockMs,
                                                               token.encode())));
  write(dir, "seed-attach-no-token", input(3, encode_attach_proof(authority, fuzz::relay_id(), fuzz::kRelayClockMs)));
  write(dir, "seed-revocations", input(4, dht::encode_revocations({authority.public_key(), crypto::Identity::from_seed(Bytes(32, 1)).value().public_key()})));
  write(dir, "seed-revocations-empty", input(4, {}));
  write(dir, "seed-revocations-partial", input(4, Bytes(33, 7)));
}

// ---- address: the text of a peer address, as DHT contacts and records carry it ----
void address_seeds(const fs::path& dir) {
  const std::string key = to_hex(fuzz::identity().public_key());
  const std::string id = fuzz::identity().peer_id().to_string();
  const std::string other = crypto::Identity::from_seed(Bytes(32, 1)).value().peer_id().to_string();
  const std::vector<std::pair<std::string, std::string>> seeds{
      {"keyed", "tcp://127.0.0.1:31337/k/" + key},
      {"keyed-with-id", "tcp://127.0.0.1:31337/k/" + key + "/p/" + id},
      {"keyed-wrong-id", "tcp://127.0.0.1:31337/k/" + key + "/p/" + other},
      {"keyed-short", "tcp://127.0.0.1:31337/k/" + key.substr(0, 40)},
      {"keyed-not-a-point", "tcp://127.0.0.1:31337/k/" + std::string(64, 'f')},
      {"plaintext", "tcp://203.0.113.7:31337/p/" + id},
      {"bare", "tcp://203.0.113.7:31337"},
      {"host-port", "198.51.100.2:4000"},
      {"ipv6", "tcp://[2001:db8::1]:31337/k/" + key},
      {"wildcard", "tcp://0.0.0.0:31337/k/" + key},
      {"port-0", "tcp://127.0.0.1:0/p/" + id},
      {"port-big", "tcp://127.0.0.1:70000"},
      {"name", "tcp://relay.example.org:31338/k/" + key},
      {"relay", "relay://203.0.113.9:31338/k/" + key + "/p/" + other},
      {"relay-plaintext", "relay://203.0.113.9:31338/p/" + other},
      {"relay-no-peer", "relay://203.0.113.9:31338/k/" + key},
      {"relay-bad-key", "relay://203.0.113.9:31338/k/zz/p/" + other},
      {"two-keys", "tcp://127.0.0.1:1/k/" + key + "/k/" + key},
      {"empty", ""},
      {"scheme-only", "tcp://"},
      {"inproc", "inproc://dedloc-avg-" + id},
  };
  for (const auto& [name, text] : seeds) write_text(dir, "seed-" + name, text);
}

// ---- datagram: plain and sealed (for the fixture identity, from another fixed one) datagrams ----
void datagram_seeds(const fs::path& dir) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(0x24);
  const auto sender = crypto::Identity::from_seed(seed).value();
  const auto shared = datagram_shared_key(fuzz::identity().public_key(), sender.curve_keys().secret_key).value();
  Envelope envelope;
  envelope.type = Ping::kType;
  envelope.request_id = 7;
  const Bytes header = encode_header(envelope, body_of(Ping{1.7e9}));
  Cookie cookie{};
  cookie.fill(0x33);
  const std::vector<std::pair<std::string, DatagramBody>> bodies = {
      {"request", {DatagramKind::kRequest, 7, std::nullopt, {header}}},
      {"request-cookie", {DatagramKind::kRequest, 7, cookie, {header, Bytes{1, 2, 3}}}},
      {"reply", {DatagramKind::kReply, 7, std::nullopt, {header}}},
      {"retry", {DatagramKind::kRetry, 7, cookie, {}}},
      {"use-stream", {DatagramKind::kUseStream, 7, std::nullopt, {}}},
  };
  for (const auto& [name, body] : bodies) {
    const Bytes encoded = encode_datagram_body(body);
    write(dir, "seed-plain-" + name, encode_datagram(encoded, nullptr, nullptr));
    write(dir, "seed-sealed-" + name, encode_datagram(encoded, &sender.public_key(), &shared));
  }
  write(dir, "seed-prefix-only", Bytes{'D', 'G', 1, 0});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  envelope_seeds(root / "envelope");
  relay_frames_seeds(root / "relay_frames");
  codec_seeds(root / "codec");
  avg_state_seeds(root / "avg_state");
  config_seeds(root / "config", DEDLOC_SOURCE_DIR);
  checkpoint_seeds(root / "checkpoint");
  records_seeds(root / "records");
  access_seeds(root / "access");
  address_seeds(root / "address");
  datagram_seeds(root / "datagram");
  return 0;
}
