// Members of an averaging group as separate processes, one SIGKILLed mid-round (what it must show):
// the survivors finish within their timeouts, and every part holds the weighted mean of exactly the
// contributions that were delivered.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLength = 4 * 60000;
constexpr size_t kPart = 5000;  // 12 parts per reducer range

// A port nobody listens on right now (the kernel's pick; closed again before the member binds it).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t size = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

float pattern(size_t k) { return static_cast<float>(static_cast<int>(k % 101) - 50) / 8.0f; }

struct Member {
  std::optional<test::ChildProcess> process;
  std::string out;
};

struct Outcome {
  nlohmann::json report;
  std::vector<float> vector;
};

// Starts the group (member `victim` dies after `die_after` part events) and collects the survivors.
// With `relay` (a relay's tcp://HOST:PORT/k/KEY), client members attach to it and are pinged through it.
// `wait_out_refusals`: the members' clients do not fail calls whose connection is refused (avg_member.cpp).
std::map<size_t, Outcome> run_group(const std::vector<std::string>& roles, size_t victim, size_t die_after,
                                    int sender_timeout_ms, int reducer_timeout_ms, int liveness_timeout_ms = 0,
                                    const std::string& relay = "", bool wait_out_refusals = false) {
  std::string ports, role_list;
  for (size_t i = 0; i < roles.size(); ++i) {
    ports += (i ? "," : "") + std::to_string(free_port());
    role_list += (i ? "," : "") + roles[i];
  }
  char dir_template[] = "/tmp/dedloc-avg-faults-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::vector<Member> members(roles.size());
  auto start = [&](size_t i) {
    members[i].out = dir + "/member" + std::to_string(i) + ".f32";
    std::vector<std::string> args{test::binary_path("tests/avg_member"), "--index", std::to_string(i), "--ports", ports,
                                  "--roles", role_list, "--length", std::to_string(kLength), "--part",
                                  std::to_string(kPart), "--sender-timeout-ms", std::to_string(sender_timeout_ms),
                                  "--reducer-timeout-ms", std::to_string(reducer_timeout_ms),
                                  "--liveness-timeout-ms", std::to_string(liveness_timeout_ms),
                                  "--out", members[i].out};
    if (i == victim) args.insert(args.end(), {"--die-after-parts", std::to_string(die_after)});
    if (!relay.empty()) args.insert(args.end(), {"--relay", relay});
    if (wait_out_refusals) args.push_back("--wait-out-refusals");
    members[i].process.emplace(test::ChildProcess::spawn(args));
    auto ready = members[i].process->read_line(30s);
    REQUIRE(ready.has_value());
    REQUIRE(nlohmann::json::parse(*ready)["ready"] == true);
  };
  // The victim starts last, once every other member serves the round: a part it sends is then held or
  // reduced, never refused as "not yet" and sent again (a resend would count as another part event).
  for (size_t i = 0; i < roles.size(); ++i) {
    if (i != victim) start(i);
  }
  start(victim);
  std::map<size_t, Outcome> survivors;
  for (size_t i = 0; i < roles.size(); ++i) {
    auto line = members[i].process->read_line(30s);
    auto code = members[i].process->wait(10s);
    if (i == victim) {
      CHECK_FALSE(line.has_value());
      CHECK(code == 128 + SIGKILL);
      continue;
    }
    INFO("member " << i);
    REQUIRE(line.has_value());
    REQUIRE(code == 0);
    Outcome outcome{nlohmann::json::parse(*line), {}};
    if (roles[i] != "aux") {
      std::ifstream file(members[i].out, std::ios::binary);
      outcome.vector.resize(kLength);
      file.read(reinterpret_cast<char*>(outcome.vector.data()), static_cast<std::streamsize>(kLength * sizeof(float)));
      REQUIRE(file.gcount() == static_cast<std::streamsize>(kLength * sizeof(float)));
    }
    survivors.emplace(i, std::move(outcome));
  }
  std::filesystem::remove_all(dir);
  return survivors;
}

// Which weighted mean of member i's x_i = (i+1)·g with weight i+1 a part holds: the factor c in c·g(k),
// when the whole part agrees on one (nullopt otherwise).
std::optional<double> factor_of(const std::vector<float>& v, size_t begin, size_t end) {
  std::optional<double> factor;
  for (size_t k = begin; k < end; ++k) {
    if (pattern(k) == 0) continue;
    double c = v[k] / pattern(k);
    if (!factor) factor = c;
    else if (std::abs(c - *factor) > 1e-5 * std::abs(*factor)) return std::nullopt;
  }
  return factor;
}

// c for the members in `set`: Σ(i+1)² / Σ(i+1).
double mean_factor(const std::vector<size_t>& set) {
  double num = 0, den = 0;
  for (size_t i : set) {
    num += static_cast<double>((i + 1) * (i + 1));
    den += static_cast<double>(i + 1);
  }
  return num / den;
}

}  // namespace

TEST_CASE("SIGKILL a sender mid-round: survivors finish within sender_timeout, parts average what arrived",
          "[proc][avg]") {
  // Members 0-2 send and reduce (a third of the vector, 16 parts, each); member 3 only sends (client mode)
  // and dies after its 8th part of 48.
  // reducer_timeout is well above sender_timeout: a live reducer that waits out the dead sender on a
  // loaded machine must not be mistaken for a dead one.
  auto survivors = run_group({"node", "node", "node", "client"}, 3, 8, 1000, 5000);
  REQUIRE(survivors.size() == 3);
  // Every survivor ends with the same vector: each part holds the one mean its reducer sent to all (up to
  // the rounding of applying a delta to one's own values).
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i << " against member 0");
    const auto& first = survivors.begin()->second.vector;
    size_t differing = 0;
    for (size_t k = 0; k < kLength; ++k) {
      differing += std::abs(outcome.vector[k] - first[k]) > 1e-5f * std::max(1.0f, std::abs(first[k]));
    }
    CHECK(differing == 0);
  }
  const double with = mean_factor({0, 1, 2, 3}), without = mean_factor({0, 1, 2});
  size_t parts_with = 0, parts_without = 0;
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i);
    CHECK(outcome.report["seconds"].get<double>() < 1.0 + 2.0);  // sender_timeout + margin
    CHECK(outcome.report["banned"] == nlohmann::json::array({3}));
    CHECK(outcome.report["averaged_fraction"] == 1.0);  // every reducer answered
    // Parts reduced before the ban hold the victim's weight (4), the rest do not: no one total for the
    // group, and the least of them is the three survivors' 1 + 2 + 3, which every part holds at least
    // (what a bucket's carrier brings across buckets: train/trainer.cpp).
    CHECK(outcome.report["weight"] == 0.0);
    CHECK(outcome.report["least_weight"] == 6.0);
    // Each part holds one of the two means.
    for (size_t begin = 0; begin < kLength; begin += kPart) {
      auto factor = factor_of(outcome.vector, begin, begin + kPart);
      REQUIRE(factor.has_value());
      bool is_with = std::abs(*factor - with) < 1e-5, is_without = std::abs(*factor - without) < 1e-5;
      CHECK((is_with || is_without));
      if (i == 0) (is_with ? parts_with : parts_without) += 1;
    }
  }
  // The victim handed 8 parts to its client before it died: at most those 8 can include it. And at least
  // 2 do: a sender has at most `window` (2) parts in flight to each of the 3 reducers, so its first 6
  // sends filled the windows and the 7th and 8th waited each for a reducer's reply, which a reducer sends
  // once the part is averaged, the victim's contribution included. A reducer that threw away what the
  // victim delivered, once it was banned, would leave no part with it.
  CHECK(parts_with <= 8);
  CHECK(parts_with >= 8 - 3 * 2);
  CHECK(parts_without == kLength / kPart - parts_with);
}

TEST_CASE("SIGKILL a reducer mid-round: senders finish within reducer_timeout with their own values there",
          "[proc][avg]") {
  // Member 3 only reduces (aux) its quarter, and dies after completing 4 of its 12 parts.
  auto survivors = run_group({"node", "node", "node", "aux"}, 3, 4, 1000, 2000);
  REQUIRE(survivors.size() == 3);
  const double all = mean_factor({0, 1, 2});
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i);
    CHECK(outcome.report["seconds"].get<double>() < 2.0 + 2.0);  // reducer_timeout + margin
    CHECK(outcome.report["failed"] == nlohmann::json::array({3}));
    size_t averaged_there = 0;
    for (size_t begin = 0; begin < kLength; begin += kPart) {
      auto factor = factor_of(outcome.vector, begin, begin + kPart);
      REQUIRE(factor.has_value());
      if (begin < 3 * 60000) {
        CHECK(std::abs(*factor - all) < 1e-5);  // the live reducers' ranges: the full mean
      } else if (std::abs(*factor - all) < 1e-5) {
        ++averaged_there;  // the dead reducer answered this part before it died
      } else {
        CHECK(std::abs(*factor - static_cast<double>(i + 1)) < 1e-6);  // our own values, untouched
      }
    }
    CHECK(averaged_there <= 4);
    CHECK(outcome.report["averaged_fraction"].get<double>() < 1.0);
    // Of the parts that came back, all hold the three senders' 1 + 2 + 3 (the reducer weighs nothing of its own).
    CHECK(outcome.report["least_weight"] == 6.0);
  }
}

TEST_CASE("SIGKILL a member mid-round: a ping it leaves unanswered ends both waits, long before the timeouts",
          "[proc][avg]") {
  // Every member sends and reduces; member 3 dies after its 8th part event. The timeouts are the recipe's
  // defaults (15 s, 30 s): without the liveness pings the survivors would wait 15 s for its parts and 30 s
  // for its answers. Pinged every 0.5 s, it is known gone within about a second. The members' clients
  // wait out refused connections here, as they would wait for a machine that went away: a ping's
  // timeout is the verdict (the next test has the refusal).
  auto survivors = run_group({"node", "node", "node", "node"}, 3, 8, 15000, 30000, 500, "", true);
  REQUIRE(survivors.size() == 3);
  const double without = mean_factor({0, 1, 2}), with = mean_factor({0, 1, 2, 3});
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i << ": " << outcome.report.dump());
    CHECK(outcome.report["seconds"].get<double>() < 3.0);  // 2 x liveness_timeout + a loaded machine's margin
    CHECK(outcome.report["gone"] == nlohmann::json::array({3}));
    CHECK(outcome.report["failed"] == nlohmann::json::array({3}));
    // Its reducer range: our own values where it did not answer before dying (a part it answered holds the
    // mean with it); everywhere else, the mean of those whose parts arrived.
    for (size_t begin = 0; begin < kLength; begin += kPart) {
      auto factor = factor_of(outcome.vector, begin, begin + kPart);
      REQUIRE(factor.has_value());
      const bool own = std::abs(*factor - static_cast<double>(i + 1)) < 1e-6;
      const bool mean = std::abs(*factor - without) < 1e-5 || std::abs(*factor - with) < 1e-5;
      CHECK((mean || (own && begin >= 3 * 60000)));
    }
    CHECK(outcome.report["averaged_fraction"].get<double>() < 1.0);
  }
}

TEST_CASE("SIGKILL a member mid-round: its port refuses the ping, and it is known gone at once, whatever "
          "liveness_timeout says", "[proc][avg]") {
  // As above, but a ping may take 10 s to come back: the dead member is still known gone within about the
  // ping interval (1 s), as its port refuses the connection (net::ClientOptions::fail_when_refused), not
  // 10 s later when a ping without an answer would have timed out.
  auto survivors = run_group({"node", "node", "node", "node"}, 3, 8, 15000, 30000, 10000);
  REQUIRE(survivors.size() == 3);
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i << ": " << outcome.report.dump());
    CHECK(outcome.report["seconds"].get<double>() < 4.0);  // a ping a second + a loaded machine's margin
    CHECK(outcome.report["gone"] == nlohmann::json::array({3}));
    CHECK(outcome.report["failed"] == nlohmann::json::array({3}));
  }
}

TEST_CASE("SIGKILL a client-mode member mid-round: pinged through its relay, it is known gone long before the "
          "sender timeout", "[proc][avg]") {
  // Nobody can dial a client (behind NAT); its relay answers for it. Member 3 only sends, through nothing
  // but the connections it opened itself, and dies after its 8th part. The sender timeout is the recipe's
  // default (15 s): without a ping through the relay the reducers would wait that long for its parts.
  auto [relay, ready] = test::start_ready({test::binary_path("tools/dedloc-relay/dedloc-relay"), "--log-level", "warning",
                                           "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string relay_endpoint = ready["endpoints"][0].get<std::string>();
  auto survivors = run_group({"node", "node", "node", "client"}, 3, 8, 15000, 30000, 500, relay_endpoint);
  REQUIRE(survivors.size() == 3);
  const double with = mean_factor({0, 1, 2, 3}), without = mean_factor({0, 1, 2});
  for (auto& [i, outcome] : survivors) {
    INFO("member " << i << ": " << outcome.report.dump());
    CHECK(outcome.report["seconds"].get<double>() < 3.0);  // 2 x liveness_timeout + a loaded machine's margin
    CHECK(outcome.report["gone"] == nlohmann::json::array({3}));
    CHECK(outcome.report["banned"] == nlohmann::json::array({3}));
    CHECK(outcome.report["averaged_fraction"] == 1.0);  // every reducer is alive and answered
    for (size_t begin = 0; begin < kLength; begin += kPart) {
      auto factor = factor_of(outcome.vector, begin, begin + kPart);
      REQUIRE(factor.has_value());
      CHECK((std::abs(*factor - with) < 1e-5 || std::abs(*factor - without) < 1e-5));
    }
  }
}
