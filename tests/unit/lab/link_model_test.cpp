// The lab's link model, packet parsing, NAT filter and link descriptions, on made-up times.
#include <catch2/catch.hpp>

#include <cmath>

#include "dedloc/lab/link_model.hpp"
#include "dedloc/lab/link_spec.hpp"
#include "dedloc/lab/nat_filter.hpp"
#include "dedloc/lab/packet.hpp"

using namespace dedloc;
using namespace dedloc::lab;
using std::chrono::milliseconds;

namespace {

const TimePoint kStart = TimePoint{} + std::chrono::hours(1);

// Everything due up to `until`, in order.
std::vector<std::pair<LinkModel::Due, TimePoint>> drain(LinkModel& model, TimePoint until) {
  std::vector<std::pair<LinkModel::Due, TimePoint>> out;
  while (auto next = model.next_due()) {
    if (*next > until) break;
    std::vector<LinkModel::Due> due;
    model.take_due(*next, due);
    for (const auto& d : due) out.emplace_back(d, *next);
  }
  return out;
}

double ms_between(TimePoint a, TimePoint b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

TEST_CASE("Lab links: a path's delay is the sum of its two ends'", "[lab]") {
  LinkModel model({host_link({.rtt = milliseconds(20)}), host_link({.rtt = milliseconds(100)})}, 1);
  REQUIRE(model.send(kStart, 0, 1, 100, 7) == Drop::kNone);
  auto out = drain(model, kStart + std::chrono::seconds(1));
  REQUIRE(out.size() == 1);
  CHECK(out[0].first.token == 7);
  CHECK(out[0].first.to == 1);
  CHECK(out[0].first.drop == Drop::kNone);
  CHECK(ms_between(kStart, out[0].second) == Approx(30));  // 20/4 + 100/4
  CHECK(model.counters(0).packets_sent == 1);
  CHECK(model.counters(1).bytes_received == 100);
}

TEST_CASE("Lab links: the slower of upload and download sets the pace", "[lab]") {
  // 125 kB/s up from host 0, 62.5 kB/s down to host 1: ten 1250-byte packets take 20 ms each to arrive.
  LinkModel model({host_link({.upload = 125e3, .download = 125e3}), host_link({.upload = 125e3, .download = 62.5e3})}, 1);
  for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(model.send(kStart, 0, 1, 1250, i) == Drop::kNone);
  auto out = drain(model, kStart + std::chrono::seconds(5));
  REQUIRE(out.size() == 10);
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i].first.token == i);
    // Leaves the upload at 10(i+1) ms; the download, busy 20 ms per packet, hands it over at 10 + 20(i+1).
    CHECK(ms_between(kStart, out[i].second) == Approx(10 + 20.0 * static_cast<double>(i + 1)).margin(0.01));
  }
}

TEST_CASE("Lab links: a full queue drops the tail", "[lab]") {
  // 10 kB/s with a 5000-byte queue: the backlog counts the packet on the wire too, so five fit.
  LinkModel model({host_link({.upload = 10e3, .queue_bytes = 5000}), host_link({})}, 1);
  int accepted = 0, dropped = 0;
  for (std::uint64_t i = 0; i < 10; ++i) (model.send(kStart, 0, 1, 1000, i) == Drop::kNone ? accepted : dropped)++;
  CHECK(accepted == 5);
  CHECK(dropped == 5);
  CHECK(model.counters(0).dropped_queue == 5);
  // Half a second later the queue has drained: packets are accepted again.
  CHECK(model.send(kStart + milliseconds(600), 0, 1, 1000, 99) == Drop::kNone);
}

TEST_CASE("Lab links: loss within its binomial margin", "[lab]") {
  LinkModel model({host_link({.loss = 0.05}), host_link({})}, 42);
  const int n = 20000;
  int lost = 0;
  for (int i = 0; i < n; ++i) lost += model.send(kStart, 0, 1, 100, static_cast<std::uint64_t>(i)) == Drop::kLoss;
  const double expected = 0.05 * n, sigma = std::sqrt(n * 0.05 * 0.95);
  CHECK(std::abs(lost - expected) < 4 * sigma);
  CHECK(model.counters(0).dropped_loss == static_cast<std::uint64_t>(lost));
}

TEST_CASE("Lab links: jitter never reorders a path", "[lab]") {
  LinkModel model({host_link({.rtt = milliseconds(40), .jitter = milliseconds(40)}), host_link({.rtt = milliseconds(40)})}, 3);
  std::vector<double> delays;
  for (std::uint64_t i = 0; i < 500; ++i) REQUIRE(model.send(kStart + milliseconds(i), 0, 1, 100, i) == Drop::kNone);
  auto out = drain(model, kStart + std::chrono::seconds(10));
  REQUIRE(out.size() == 500);
  double smallest = 1e9, largest = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i].first.token == i);
    const double delay = ms_between(kStart + milliseconds(i), out[i].second);
    smallest = std::min(smallest, delay);
    largest = std::max(largest, delay);
  }
  // Base one-way delay 10 + 10 ms; host 0's upload adds up to a quarter of its 40 ms jitter. Keeping the
  // order only ever delays a packet to an earlier one's arrival, which is within the same bounds.
  CHECK(smallest >= 20);
  CHECK(largest > 25);
  CHECK(largest <= 30.001);
}

TEST_CASE("Lab links: a link that goes down drops what is in flight to it", "[lab]") {
  LinkModel model({host_link({.rtt = milliseconds(100)}), host_link({.rtt = milliseconds(100)})}, 1);
  REQUIRE(model.send(kStart, 0, 1, 100, 1) == Drop::kNone);
  model.set_up(1, false);
  CHECK(model.send(kStart, 0, 1, 100, 2) == Drop::kLinkDown);
  auto out = drain(model, kStart + std::chrono::seconds(1));
  REQUIRE(out.size() == 1);
  CHECK(out[0].first.drop == Drop::kLinkDown);
  model.set_up(1, true);
  CHECK(model.send(kStart + std::chrono::seconds(2), 0, 1, 100, 3) == Drop::kNone);
}

namespace {

// A minimal IPv4 header (20 bytes) and the first four bytes of its payload.
std::vector<std::uint8_t> ipv4(std::uint8_t protocol, std::uint32_t from, std::uint32_t to, std::uint16_t sport,
                               std::uint16_t dport) {
  std::vector<std::uint8_t> p(24, 0);
  p[0] = 0x45;
  p[9] = protocol;
  for (int i = 0; i < 4; ++i) {
    p[12 + i] = static_cast<std::uint8_t>(from >> (24 - 8 * i));
    p[16 + i] = static_cast<std::uint8_t>(to >> (24 - 8 * i));
  }
  p[20] = static_cast<std::uint8_t>(sport >> 8);
  p[21] = static_cast<std::uint8_t>(sport);
  p[22] = static_cast<std::uint8_t>(dport >> 8);
  p[23] = static_cast<std::uint8_t>(dport);
  return p;
}

}  // namespace

TEST_CASE("Lab packets: addresses and ports, and what is not IPv4", "[lab]") {
  auto info = parse_ipv4(ipv4(kTcp, 0x0afa0001, 0x0afa0002, 40000, 5555));
  REQUIRE(info);
  CHECK(info->source == 0x0afa0001);
  CHECK(info->destination == 0x0afa0002);
  CHECK(info->source_port == 40000);
  CHECK(info->destination_port == 5555);
  auto bytes = ipv4(kTcp, 1, 2, 3, 4);
  bytes[0] = 0x60;  // IPv6
  CHECK_FALSE(parse_ipv4(bytes));
  bytes[0] = 0x4f;  // header longer than the packet
  CHECK_FALSE(parse_ipv4(bytes));
  CHECK_FALSE(parse_ipv4(std::vector<std::uint8_t>(19, 0x45)));
}

TEST_CASE("Lab NAT: answers come in, nothing else does", "[lab]") {
  NatFilter nat;
  const std::uint32_t home = 0x0afa0002, server = 0x0afa0001;
  auto in = parse_ipv4(ipv4(kTcp, server, home, 5555, 40000));
  CHECK_FALSE(nat.admits_inbound(*in, kStart));  // nobody asked
  nat.note_outbound(*parse_ipv4(ipv4(kTcp, home, server, 40000, 5555)), kStart);
  CHECK(nat.admits_inbound(*in, kStart + std::chrono::seconds(1)));
  CHECK_FALSE(nat.admits_inbound(*parse_ipv4(ipv4(kTcp, server, home, 5555, 40001)), kStart));  // another port
  CHECK_FALSE(nat.admits_inbound(*parse_ipv4(ipv4(kUdp, server, home, 5555, 40000)), kStart));  // another protocol
  CHECK_FALSE(nat.admits_inbound(*in, kStart + NatFilter::kIdleTimeout + std::chrono::seconds(2)));  // forgotten
  auto ping = ipv4(kIcmp, server, home, 0, 0);
  ping[20] = 8;  // echo request
  CHECK_FALSE(nat.admits_inbound(*parse_ipv4(ping), kStart));
  ping[20] = 0;  // echo reply
  CHECK(nat.admits_inbound(*parse_ipv4(ping), kStart));
}

TEST_CASE("Lab link descriptions: durations, probabilities and their errors", "[lab]") {
  CHECK(*parse_duration("25ms", "--rtt") == milliseconds(25));
  CHECK(*parse_duration("1.5s", "--rtt") == milliseconds(1500));
  CHECK(*parse_duration("0", "--rtt") == Duration::zero());
  auto bad = parse_duration("25", "--rtt");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.status().message(), Catch::Contains("--rtt") && Catch::Contains("'25'"));
  CHECK_FALSE(parse_duration("-1s", "--rtt"));
  CHECK(*parse_probability("0.5%", "--loss") == Approx(0.005));
  CHECK(*parse_probability("0.01", "--loss") == Approx(0.01));
  CHECK_FALSE(parse_probability("1", "--loss"));
  CHECK_FALSE(parse_probability("5x", "--loss"));
  const HostLink link = host_link({.rtt = milliseconds(100), .upload = 1e6, .download = 2e6, .loss = 0.01});
  CHECK(link.up.delay == milliseconds(25));
  CHECK(link.down.delay == milliseconds(25));
  CHECK(link.up.rate == 1e6);
  CHECK(link.down.rate == 2e6);
  CHECK(link.up.loss == 0.01);
  CHECK(link.down.loss == 0);
}
