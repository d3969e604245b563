// Test helper: one side of a large stream between two processes.
//   dedloc_test_stream_peer receive               prints a ready line, receives one stream, then prints
//                                                  {"bytes":N,"hash":"…","peak_rss_kib":K} and exits
//   dedloc_test_stream_peer send ENDPOINT BYTES   streams BYTES of a deterministic pattern, then prints
//                                                  the same JSON for what it sent
// Neither side ever holds the whole stream: the receiver hashes parts as they arrive, the sender generates
// them, so peak memory shows what the transport itself buffers.
#include <cstdio>
#include <future>
#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/cli/ready_line.hpp"
#include "dedloc/crypto/hash.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/stream.hpp"
#include "support/test_data.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::net;

namespace {

void print_result(std::uint64_t bytes, const std::string& hash) {
  nlohmann::json j{{"bytes", bytes}, {"hash", hash}, {"peak_rss_kib", test::peak_rss_kib()}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// Hashes parts in order; parts that arrive early wait in a small reorder buffer (bounded by the window).
class HashingSink : public StreamSink {
 public:
  HashingSink(std::promise<std::pair<std::uint64_t, std::string>>* done) : done_(done) {}
  Status consume(std::uint64_t offset, ByteSpan bytes) override {
    if (offset != next_) {
      if (early_.size() >= 64) return error(Code::kTooLarge, "too many parts out of order");
      early_.emplace(offset, Bytes(bytes.begin(), bytes.end()));
      return Status::ok();
    }
    hash(bytes);
    for (auto it = early_.find(next_); it != early_.end(); it = early_.find(next_)) {
      hash(it->second);
      early_.erase(it);
    }
    return Status::ok();
  }
  void complete() override { done_->set_value({next_, hasher_.finish_hex()}); }

 private:
  void hash(ByteSpan bytes) {
    hasher_.update(bytes);
    next_ += bytes.size();
  }
  std::promise<std::pair<std::uint64_t, std::string>>* done_;
  crypto::Hasher hasher_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, Bytes> early_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  std::string mode = argc > 1 ? argv[1] : "";
  zmq::context_t context;
  auto identity = crypto::Identity::generate();
  if (mode == "receive") {
    std::promise<std::pair<std::uint64_t, std::string>> done;
    Server server(context, {.self = identity.peer_id()});
    StreamReceiver receiver(server, [&](std::uint64_t, std::uint64_t, const crypto::PeerId&)
                                        -> Result<std::unique_ptr<StreamSink>> {
      return std::unique_ptr<StreamSink>(new HashingSink(&done));
    });
    if (auto st = server.start(); !st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    cli::ReadyLine{"test-stream-receiver", identity.peer_id(), {server.endpoint()}, {}}.print();
    auto result = done.get_future();
    if (result.wait_for(120s) != std::future_status::ready) return 5;
    auto [bytes, hash] = result.get();
    server.stop();  // the receiver's handler must not run while it is destroyed
    print_result(bytes, hash);
    return 0;
  }
  if (mode == "send" && argc == 4) {
    std::string endpoint = argv[2];
    std::uint64_t total = std::stoull(argv[3]);
    Client client(context, {.self = identity.peer_id()});
    crypto::Hasher hasher;
    auto source = [&](std::uint64_t offset, std::span<std::uint8_t> out) {
      test::fill_pattern(offset, out);
      hasher.update(out);
    };
    Status st = send_stream(client, endpoint, 1, total, source, {}, Deadline::after(120s));
    if (!st.is_ok()) {
      std::fprintf(stderr, "send failed: %s\n", st.to_string().c_str());
      return 1;
    }
    print_result(total, hasher.finish_hex());
    return 0;
  }
  std::fprintf(stderr, "usage: %s receive | send ENDPOINT BYTES\n", argv[0]);
  return 2;
}
