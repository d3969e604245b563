#include <catch2/catch.hpp>

#include <future>
#include <random>

#include "dedloc/crypto/hash.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/stream.hpp"
#include "support/test_data.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;
using test::fill_pattern;

namespace {

// Writes parts into `out`; fulfils `completed` when every byte is in, which is also what makes the
// receiver's writes visible to the test thread.
struct CollectingSink : StreamSink {
  Bytes* out;
  std::promise<void>* completed;
  CollectingSink(Bytes* o, std::promise<void>* c) : out(o), completed(c) {}
  Status consume(std::uint64_t offset, ByteSpan bytes) override {
    if (offset + bytes.size() > out->size()) return error(Code::kMalformed, "past the end");
    std::copy(bytes.begin(), bytes.end(), out->begin() + static_cast<std::ptrdiff_t>(offset));
    return Status::ok();
  }
  void complete() override { completed->set_value(); }
};

}  // namespace

TEST_CASE("A stream arrives bit-exact in flow-controlled parts", "[net][stream]") {
  zmq::context_t context;
  Server server(context, {});
  Bytes received;
  std::promise<void> completed;
  StreamReceiver receiver(server, [&](std::uint64_t, std::uint64_t total, const crypto::PeerId&)
                                      -> Result<std::unique_ptr<StreamSink>> {
    received.assign(total, 0);
    return std::unique_ptr<StreamSink>(new CollectingSink(&received, &completed));
  });
  REQUIRE(server.start().is_ok());
  auto id = crypto::Identity::generate();
  Client client(context, {.self = id.peer_id()});
  const std::uint64_t total = (8u << 20) + 12345;  // not a multiple of the part size
  StreamOptions options{.part_bytes = 256 << 10, .window = 4};
  REQUIRE(send_stream(client, server.endpoint(), 1, total, fill_pattern, options, Deadline::after(60s)).is_ok());
  Bytes expected(total);
  fill_pattern(0, expected);
  REQUIRE(completed.get_future().wait_for(10s) == std::future_status::ready);
  server.stop();
  CHECK(received.size() == expected.size());
  CHECK(received == expected);
}

TEST_CASE("A sink's refusal stops the sender with the sink's reason", "[net][stream]") {
  zmq::context_t context;
  Server server(context, {});
  StreamReceiver receiver(server, [](std::uint64_t, std::uint64_t total, const crypto::PeerId&)
                                      -> Result<std::unique_ptr<StreamSink>> {
    if (total > (1u << 20)) return error(Code::kTooLarge, "this receiver takes at most 1 MiB");
    return error(Code::kInternal, "unreachable in this test");
  });
  REQUIRE(server.start().is_ok());
  Client client(context, {});
  Status st = send_stream(client, server.endpoint(), 1, 4u << 20, fill_pattern, {}, Deadline::after(10s));
  CHECK(st.code() == Code::kTooLarge);
  CHECK(st.message() == "remote peer: this receiver takes at most 1 MiB");
  server.stop();
}

TEST_CASE("A stream to a dead receiver fails within its deadline", "[net][stream]") {
  zmq::context_t context;
  std::string endpoint;
  {
    zmq::socket_t probe(context, zmq::socket_type::router);
    probe.set(zmq::sockopt::linger, 0);
    probe.bind("tcp://127.0.0.1:0");
    endpoint = probe.get(zmq::sockopt::last_endpoint);
  }
  Client client(context, {});
  auto start = std::chrono::steady_clock::now();
  Status st = send_stream(client, endpoint, 1, 64u << 20, fill_pattern, {.part_timeout = 300ms}, Deadline::after(10s));
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(st.code() == Code::kTimeout);
  // The first part's 300 ms deadline starts once it is produced; allow for producing the window of parts
  // (8 MiB here) on a loaded 2-core machine.
  CHECK(ms >= 300);
  CHECK(ms < 450);
}
