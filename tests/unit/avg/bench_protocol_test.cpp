// The all-reduce benchmark's parent <-> peer byte protocol (lib/dedloc/avg/bench/pipe_protocol.hpp): its
// payloads round-trip, and short, long or corrupt input is refused as a Status, never read past its end.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "dedloc/avg/bench/pipe_protocol.hpp"

using namespace dedloc;
using namespace dedloc::avg::bench;
using namespace std::chrono_literals;

namespace {

crypto::PeerId some_id(std::uint8_t fill) { return *crypto::PeerId::from_bytes(Bytes(crypto::PeerId::kSize, fill)); }

BenchGroup three_members() {
  BenchGroup group;
  for (std::uint8_t i = 0; i < 3; ++i) {
    group.members.push_back({some_id(static_cast<std::uint8_t>(0x10 + i)), "tcp://127.0.0.1:" + std::to_string(4000 + i),
                             1000u + i, static_cast<double>(i + 1)});
  }
  group.length = 3003;
  group.part_elements = 512;
  return group;
}

// A pipe whose ends close with the test.
struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    close_write();
    if (read_end >= 0) ::close(read_end);
  }
  void close_write() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
  void write_raw(const Bytes& bytes) const { REQUIRE(::write(write_end, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }
};

}  // namespace

TEST_CASE("Bench pipe protocol: hello, group and report round-trip", "[unit][avg][bench]") {
  const PeerHello hello{"tcp://10.213.0.2:41234", some_id(0xab)};
  auto hello_back = PeerHello::decode(hello.encode().data());
  REQUIRE(hello_back.is_ok());
  CHECK(hello_back->endpoint == hello.endpoint);
  CHECK(hello_back->id == hello.id);

  const BenchGroup group = three_members();
  auto group_back = BenchGroup::decode(group.encode().data());
  REQUIRE(group_back.is_ok());
  REQUIRE(group_back->members.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(group_back->members[i].id == group.members[i].id);
    CHECK(group_back->members[i].endpoint == group.members[i].endpoint);
    CHECK(group_back->members[i].count == group.members[i].count);
    CHECK(group_back->members[i].weight == group.members[i].weight);
  }
  CHECK(group_back->length == 3003);
  CHECK(group_back->part_elements == 512);

  PeerReport report;
  report.seconds = 0.25;
  report.cpu_seconds = 0.5;
  report.max_abs_error = 1e-7;
  report.scale = 3;
  report.bound = 0.01;
  report.averaged_fraction = 0.75;
  report.banned = 1;
  report.failed = 2;
  report.code = Code::kTimeout;
  report.message = "a reducer was silent";
  auto report_back = PeerReport::decode(report.encode().data());
  REQUIRE(report_back.is_ok());
  CHECK(report_back->seconds == 0.25);
  CHECK(report_back->cpu_seconds == 0.5);
  CHECK(report_back->max_abs_error == 1e-7);
  CHECK(report_back->scale == 3);
  CHECK(report_back->bound == 0.01);
  CHECK(report_back->averaged_fraction == 0.75);
  CHECK(report_back->banned == 1);
  CHECK(report_back->failed == 2);
  CHECK(report_back->code == Code::kTimeout);
  CHECK(report_back->message == "a reducer was silent");
}

TEST_CASE("Bench pipe protocol: every truncation and any trailing byte is malformed", "[unit][avg][bench]") {
  const std::vector<Bytes> payloads = {PeerHello{"tcp://127.0.0.1:1", some_id(1)}.encode().data(),
                                       three_members().encode().data(), PeerReport{}.encode().data()};
  auto decodes = [](size_t which, ByteSpan bytes) {
    if (which == 0) return PeerHello::decode(bytes).status();
    if (which == 1) return BenchGroup::decode(bytes).status();
    return PeerReport::decode(bytes).status();
  };
  for (size_t which = 0; which < payloads.size(); ++which) {
    const Bytes& full = payloads[which];
    INFO("payload " << which);
    CHECK(decodes(which, full).is_ok());
    for (size_t cut = 0; cut < full.size(); ++cut) {
      INFO("cut at " << cut);
      CHECK(decodes(which, ByteSpan(full).first(cut)).code() == Code::kMalformed);
    }
    Bytes longer = full;
    longer.push_back(0);
    CHECK(decodes(which, longer).code() == Code::kMalformed);
  }
  // A string length far past the end, and a member count far past the end.
  PipeWriter lying;
  lying.u32(0xffffffffu);
  CHECK(PeerHello::decode(lying.data()).status().code() == Code::kMalformed);
  CHECK(BenchGroup::decode(lying.data()).status().code() == Code::kMalformed);
}

TEST_CASE("Bench pipe protocol: framed messages over a pipe, and what a reader refuses", "[unit][avg][bench]") {
  SECTION("a message and an empty one arrive whole, in order") {
    Pipe pipe;
    REQUIRE(send_pipe_message(pipe.write_end, PipeMessage::kReport, PeerReport{}.encode()).is_ok());
    REQUIRE(send_pipe_message(pipe.write_end, PipeMessage::kQuit).is_ok());
    auto first = receive_pipe_message(pipe.read_end, Deadline::after(5s));
    REQUIRE(first.is_ok());
    CHECK(first->first == PipeMessage::kReport);
    CHECK(PeerReport::decode(first->second).is_ok());
    auto second = receive_pipe_message(pipe.read_end, Deadline::after(5s));
    REQUIRE(second.is_ok());
    CHECK(second->first == PipeMessage::kQuit);
    CHECK(second->second.empty());
  }
  SECTION("a length above the limit is malformed, before anything that large is allocated") {
    Pipe pipe;
    PipeWriter head;
    head.u8(static_cast<std::uint8_t>(PipeMessage::kGroup)).u32(static_cast<std::uint32_t>(kMaxPipeMessageBytes + 1));
    pipe.write_raw(head.data());
    CHECK(receive_pipe_message(pipe.read_end, Deadline::after(5s)).status().code() == Code::kMalformed);
  }
  SECTION("the writer gone mid-message: unavailable") {
    Pipe pipe;
    PipeWriter head;
    head.u8(static_cast<std::uint8_t>(PipeMessage::kHello)).u32(100).u32(7);
    pipe.write_raw(head.data());
    pipe.close_write();
    CHECK(receive_pipe_message(pipe.read_end, Deadline::after(5s)).status().code() == Code::kUnavailable);
  }
  SECTION("nothing before the deadline: timeout") {
    Pipe pipe;
    const auto start = std::chrono::steady_clock::now();
    CHECK(receive_pipe_message(pipe.read_end, Deadline::after(150ms)).status().code() == Code::kTimeout);
    CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  }
  SECTION("interrupted while waiting: cancelled, long before the deadline") {
    Pipe pipe;
    const auto start = std::chrono::steady_clock::now();
    int asked = 0;
    auto got = receive_pipe_message(pipe.read_end, Deadline::after(30s), [&] { return ++asked >= 3; });
    CHECK(got.status().code() == Code::kCancelled);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("a closed pipe: sending is unavailable, not SIGPIPE") {
    Pipe pipe;
    ::close(pipe.read_end);
    pipe.read_end = -1;
    auto previous = ::signal(SIGPIPE, SIG_IGN);
    CHECK(send_pipe_message(pipe.write_end, PipeMessage::kQuit).code() == Code::kUnavailable);
    ::signal(SIGPIPE, previous);
  }
}
