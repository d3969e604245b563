// `dedloc-avg bench`: times butterfly all-reduce rounds among N local peer processes, the way
// nccl-tests time an all-reduce, so that shell scripts can compare it with other implementations
// (bench/allreduce/run.sh runs it beside torch.distributed's gloo).
//
//   dedloc-avg bench --peers 4 --size 64MiB [--codec fp16] [--rounds 5] [--window 2] [--part-kib 512]
//                    [--bandwidths 1Gbit,100Mbit,100Mbit,100Mbit [--uniform] [--emulate-links]] [--json]
//
// Processes. The parent forks the N peers before anything creates a ZeroMQ context (forking after zmq
// started its threads is unsafe), and talks to each through two pipes. A peer builds its own context,
// net::Server (on 127.0.0.1, port 0), net::Client and avg::AllReduce, fills its vector, and reports its
// endpoint; the parent builds the group (shares, part grid) once and then starts every round on all peers
// at once with a fresh random 16-byte group id. Peers die with the parent (PR_SET_PDEATHSIG); a peer that
// dies, or does not answer within --timeout, fails the benchmark with a message naming it. Nothing waits
// without a deadline.
//
// What is timed: each peer times its AllReduce::run(); a round takes as long as its slowest peer. The
// first round (warm-up: connections, first touch of the buffers) is not counted. Vectors are allocated
// and touched once and reused: member i holds (i+1)·g(k) and weighs i+1, so every peer can check its
// result, c·g(k) with c = Σ(i+1)²/Σ(i+1), in one pass after the timed part, and restore its values for the
// next round in the same pass. g(k) folds the bits of k into [-1, 1).
//
// Figures (as nccl-tests define them for all-reduce): algorithm bandwidth = bytes / time, bus bandwidth =
// algbw · 2(n−1)/n, the bytes every link of an optimal all-reduce carries. GB are 10^9 bytes.
//
// Correctness: without compression the largest error relative to max|c·g| must stay within 1e-5 (f32
// rounding); with a codec, within 3 × the codec's documented bound (avg::error_bound of the values sent,
// once on the way in and once for the delta back) plus the same f32 slack.
//
// Uneven links (--emulate-links, root only): every peer gets its own network namespace, joined to the
// others by a veth pair on a bridge, and a token-bucket (tc tbf) limit of its --bandwidths rate on both
// directions. Without it, --bandwidths only changes the shares (plan::plan_group_shares).
//
// Exit codes: 0 ok; 1 wrong results, a peer failed or died; 2 usage; 5 a deadline passed; 130 interrupted.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/avg/float_ops.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/plan/group_shares.hpp"
#include "dedloc/plan/units.hpp"

extern char** environ;

namespace dedloc::avg_tool {
namespace {

using namespace dedloc::avg;

constexpr std::string_view kTool = "dedloc-avg bench";

struct BenchOptions {
  size_t peers = 4;
  std::string size = "64MiB";          // of the float32 vector
  std::string codec = "none";          // of the parts (avg::parse_codec)
  size_t rounds = 5;                   // timed rounds, after one warm-up round
  size_t window = avg::AllReduceOptions{}.window;  // parts in flight per reducer
  size_t max_in_flight = avg::AllReduceOptions{}.max_in_flight;  // parts in flight in all (0: no cap)
  size_t part_kib = 512;               // KiB per part on the wire, after compression
  std::vector<std::string> bandwidths; // per peer ("1Gbit", "100Mbit"): planner shares
  bool uniform = false;                // equal shares even when --bandwidths is given
  bool emulate_links = false;          // limit each peer's link to its --bandwidths rate (netns + tc)
  double timeout_seconds = 120;        // one round; also bounds start-up and shutdown
};


// "64MiB", "256MiB", "1GiB", "100MB", "4096B", "4096": a byte count.
Result<std::uint64_t> parse_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  static const std::pair<std::string_view, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  for (const auto& [name, scale] : kUnits) {
    if (used > 0 && unit == name && value > 0 && std::isfinite(value)) {
      return static_cast<std::uint64_t>(std::llround(value * scale));
    }
  }
  return error(Code::kInvalidArgument, "--size '" + text + "': expected a positive size such as 64MiB, 256MiB, 1GiB or 100MB");
}

// ---------------------------------------------------------------------------------------------------------
// The synthetic vectors.

// g(k) in [-1, 1): bits of k folded onto themselves, cheap enough to recompute on every check instead of
// keeping a reference copy, and written four at a time (float_ops' vectors: the build's -O2 vectorizes no
// loop with a remainder) so that checking 64 MiB takes milliseconds, not a second.
using float_ops::Float4;
using Int4 = std::int32_t __attribute__((vector_size(16)));

inline Float4 pattern4(std::uint64_t k) {
  const std::int32_t base = static_cast<std::int32_t>(k & 0x7fffffff);
  Int4 i = Int4{base, base + 1, base + 2, base + 3};
  Int4 h = (i ^ (i >> 7) ^ (i >> 17)) & 0xffff;
  return __builtin_convertvector(h, Float4) * 0x1p-15f - 1.0f;
}

inline float pattern(std::uint64_t k) {
  const std::int32_t i = static_cast<std::int32_t>(k & 0x7fffffff);
  return static_cast<float>((i ^ (i >> 7) ^ (i >> 17)) & 0xffff) * 0x1p-15f - 1.0f;
}

void fill(std::span<float> vector, float factor) {
  size_t k = 0;
  for (; k + 4 <= vector.size(); k += 4) float_ops::store4(&vector[k], factor * pattern4(k));
  for (; k < vector.size(); ++k) vector[k] = factor * pattern(k);
}

struct Check {
  double max_abs_error = 0;  // +inf when a value is NaN or inf
  double scale = 0;          // max |expected|
};

// Compares `vector` with mean·g(k) and refills it with own·g(k) for the next round, in one pass. The
// expected value is computed in f32 (adds at most 2^-24 relative, far inside every tolerance).
Check check_and_refill(std::span<float> vector, double mean, float own) {
  const float m = static_cast<float>(mean);
  Float4 worst4 = {0, 0, 0, 0}, scale4 = {0, 0, 0, 0};
  auto abs4 = [](Float4 x) { return x < 0 ? -x : x; };
  size_t k = 0;
  for (; k + 4 <= vector.size(); k += 4) {
    const Float4 g = pattern4(k);
    const Float4 expected = m * g;
    const Float4 error = abs4(float_ops::load4(&vector[k]) - expected);
    worst4 = error <= worst4 ? worst4 : error;  // NaN compares false: it is kept
    scale4 = abs4(expected) <= scale4 ? scale4 : abs4(expected);
    float_ops::store4(&vector[k], own * g);
  }
  double worst = 0, scale = 0;
  auto keep = [&](double error, double expected) {
    worst = error <= worst ? worst : error;
    scale = std::max(scale, expected);
  };
  for (int lane = 0; lane < 4; ++lane) keep(worst4[lane], scale4[lane]);
  for (; k < vector.size(); ++k) {
    const float g = pattern(k);
    keep(std::abs(vector[k] - m * g), std::abs(m * g));
    vector[k] = own * g;
  }
  Check check;
  check.max_abs_error = std::isfinite(worst) ? worst : std::numeric_limits<double>::infinity();
  check.scale = scale;
  return check;
}

// ---------------------------------------------------------------------------------------------------------
// Parent <-> peer messages over pipes: [u8 type][u32 length][payload], little-endian fields.

enum class Msg : std::uint8_t {
  kReady = 1,   // peer -> parent: forked (and in its namespace); waits for kListen
  kListen = 2,  // parent -> peer: the host to bind on
  kHello = 3,   // peer -> parent: endpoint, peer id
  kGroup = 4,   // parent -> peer: the members, their shares, the part size
  kRound = 5,   // parent -> peer: run one round with this group id
  kReport = 6,  // peer -> parent: one round's outcome
  kQuit = 7,    // parent -> peer: exit
};

class Writer {
 public:
  Writer& u8(std::uint8_t v) { return raw(&v, 1); }
  Writer& u32(std::uint32_t v) { return raw(&v, 4); }
  Writer& u64(std::uint64_t v) { return raw(&v, 8); }
  Writer& f64(double v) { return raw(&v, 8); }
  Writer& str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    return raw(s.data(), s.size());
  }
  Writer& bytes(ByteSpan b) { return raw(b.data(), b.size()); }
  const Bytes& data() const { return data_; }

 private:
  Writer& raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    data_.insert(data_.end(), b, b + n);
    return *this;
  }
  Bytes data_;
};

// Reads fields; any read past the end makes ok() false (and yields zeros), checked once at the end.
class Reader {
 public:
  explicit Reader(ByteSpan data) : data_(data) {}
  std::uint8_t u8() { return read<std::uint8_t>(); }
  std::uint32_t u32() { return read<std::uint32_t>(); }
  std::uint64_t u64() { return read<std::uint64_t>(); }
  double f64() { return read<double>(); }
  std::string str() {
    const size_t n = u32();
    if (!take(n)) return {};
    return std::string(reinterpret_cast<const char*>(data_.data() + at_ - n), n);
  }
  Bytes bytes(size_t n) {
    if (!take(n)) return Bytes(n, 0);
    return Bytes(data_.begin() + static_cast<std::ptrdiff_t>(at_ - n), data_.begin() + static_cast<std::ptrdiff_t>(at_));
  }
  bool good() const { return ok_; }                          // nothing read past the end so far
  bool ok() const { return ok_ && at_ == data_.size(); }    // ... and everything read

 private:
  template <class T>
  T read() {
    T v{};
    if (take(sizeof(T))) std::memcpy(&v, data_.data() + at_ - sizeof(T), sizeof(T));
    return v;
  }
  bool take(size_t n) {
    if (!ok_ || data_.size() - at_ < n) return ok_ = false;
    at_ += n;
    return true;
  }
  ByteSpan data_;
  size_t at_ = 0;
  bool ok_ = true;
};

Status write_all(int fd, ByteSpan data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return error(Code::kUnavailable, std::string("pipe write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return {};
}

Status send_msg(int fd, Msg type, const Writer& payload = Writer()) {
  Writer framed;
  framed.u8(static_cast<std::uint8_t>(type)).u32(static_cast<std::uint32_t>(payload.data().size())).bytes(payload.data());
  return write_all(fd, framed.data());
}

// Reads exactly out.size() bytes by `deadline`. kUnavailable at end of file (the other side exited),
// kTimeout at the deadline, kCancelled when SIGINT/SIGTERM arrived.
Status read_exact(int fd, std::span<std::uint8_t> out, Deadline deadline) {
  size_t done = 0;
  while (done < out.size()) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(1, to_ms(deadline.remaining()))));
    if (cli::shutdown_requested()) return error(Code::kCancelled, "interrupted");
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return error(Code::kIo, std::string("poll: ") + std::strerror(errno));
    if (rc == 0) {
      if (deadline.passed()) return error(Code::kTimeout, "no answer before the deadline");
      continue;
    }
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return error(Code::kIo, std::string("pipe read failed: ") + std::strerror(errno));
    if (n == 0) return error(Code::kUnavailable, "the pipe closed");
    done += static_cast<size_t>(n);
  }
  return {};
}

constexpr size_t kMaxMessageBytes = 16u << 20;

Result<std::pair<Msg, Bytes>> recv_msg(int fd, Deadline deadline) {
  std::uint8_t head[5];
  DEDLOC_RETURN_IF_ERROR(read_exact(fd, head, deadline));
  std::uint32_t length = 0;
  std::memcpy(&length, head + 1, 4);
  if (length > kMaxMessageBytes) return error(Code::kMalformed, "a pipe message of " + std::to_string(length) + " bytes");
  Bytes payload(length);
  DEDLOC_RETURN_IF_ERROR(read_exact(fd, payload, deadline));
  return std::make_pair(static_cast<Msg>(head[0]), std::move(payload));
}

// ---------------------------------------------------------------------------------------------------------
// One peer process.

struct PeerReport {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the whole peer process (all threads) during the round
  double max_abs_error = 0;
  double scale = 0;
  double bound = 0;  // the codec's error_bound over the parts of our own vector (0 without a codec)
  double averaged_fraction = 0;
  std::uint32_t banned = 0, failed = 0;
  Code code = Code::kOk;
  std::string message;

  Writer encode() const {
    Writer w;
    w.f64(seconds).f64(cpu_seconds).f64(max_abs_error).f64(scale).f64(bound).f64(averaged_fraction).u32(banned).u32(failed);
    w.u32(static_cast<std::uint32_t>(code)).str(message);
    return w;
  }
  static Result<PeerReport> decode(ByteSpan bytes) {
    Reader r(bytes);
    PeerReport p;
    p.seconds = r.f64();
    p.cpu_seconds = r.f64();
    p.max_abs_error = r.f64();
    p.scale = r.f64();
    p.bound = r.f64();
    p.averaged_fraction = r.f64();
    p.banned = r.u32();
    p.failed = r.u32();
    p.code = static_cast<Code>(r.u32());
    p.message = r.str();
    if (!r.ok()) return error(Code::kMalformed, "a peer's report does not decode");
    return p;
  }
};

// User + system CPU time of this process, all threads.
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return sec(usage.ru_utime) + sec(usage.ru_stime);
}

struct PeerSetup {
  size_t index = 0;
  size_t peers = 0;
  std::uint64_t elements = 0;
  Codec codec = Codec::kNone;
  AllReduceOptions all_reduce;
  Duration round_timeout{};
  Duration idle_timeout{};  // waiting for the parent's next command
  bool own_netns = false;
  bool encrypted = true;  // CURVE, as the tools run by default; --plaintext to measure without
};

// The whole life of peer `setup.index`; returns its exit status. Errors go to the parent as reports or
// to stderr; the parent's own messages name the peer.
int peer_main(const PeerSetup& setup, int from_parent, int to_parent) {
  auto fail = [&](const Status& status) {
    std::cerr << kTool << ": peer " << setup.index << ": " << status.to_string() << "\n";
    return 1;
  };
  if (setup.own_netns && ::unshare(CLONE_NEWNET) != 0) {
    return fail(error(Code::kUnavailable, std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno) +
                                              " (--emulate-links needs root)"));
  }
  if (auto s = send_msg(to_parent, Msg::kReady); !s.is_ok()) return fail(s);
  auto listen = recv_msg(from_parent, Deadline::after(setup.idle_timeout));
  if (!listen || listen->first != Msg::kListen) return fail(listen ? error(Code::kMalformed, "expected kListen") : listen.status());
  const std::string host(listen->second.begin(), listen->second.end());

  // The vector is allocated and touched before any round (first touch costs more than the network here).
  std::vector<float> vector(static_cast<size_t>(setup.elements));
  const float own = static_cast<float>(setup.index + 1);
  fill(vector, own);

  Logger& log = Logger::global();
  zmq::context_t context;
  crypto::Identity identity = crypto::Identity::generate();
  net::SocketOptions socket;
  if (setup.encrypted) socket.transport = net::TransportKeys::of(identity);
  net::Server server(context, net::ServerOptions{"tcp://" + host + ":0", identity.peer_id(), socket, &log});
  net::Client client(context, net::ClientOptions{identity.peer_id(), socket, std::chrono::seconds(600), &log});
  AllReduce all_reduce(server, client, identity.peer_id(), &log);
  if (auto s = server.start(); !s.is_ok()) return fail(s);
  Writer hello;
  hello.str(server.endpoint()).bytes(identity.peer_id().span());
  if (auto s = send_msg(to_parent, Msg::kHello, hello); !s.is_ok()) return fail(s);

  wire::AvgBegin begin;
  std::vector<double> weights;
  double bound = 0;
  double mean = 0;
  while (true) {
    auto command = recv_msg(from_parent, Deadline::after(setup.idle_timeout));
    if (!command) return fail(command.status().with_context("waiting for the parent"));
    auto& [type, payload] = *command;
    if (type == Msg::kQuit) return 0;
    if (type == Msg::kGroup) {
      Reader r(payload);
      begin = {};
      weights.clear();
      const size_t n = r.u32();
      for (size_t i = 0; i < n && r.good(); ++i) {
        auto id = crypto::PeerId::from_bytes(r.bytes(crypto::PeerId::kSize));
        begin.ids.push_back(id.value_or(crypto::PeerId()));
        begin.endpoints.push_back(r.str());
        begin.counts.push_back(r.u64());
        begin.roles.push_back(AvgRole::kNode);
        weights.push_back(r.f64());
      }
      begin.length = r.u64();
      begin.part_elements = r.u64();
      if (!r.ok()) return fail(error(Code::kMalformed, "the group message does not decode"));
      double numerator = 0, denominator = 0;
      for (size_t i = 0; i < n; ++i) {
        numerator += weights[i] * static_cast<double>(i + 1);
        denominator += weights[i];
      }
      mean = numerator / denominator;
      // The codec's bound over the parts of our vector as it is sent (before any round changes it).
      bound = 0;
      if (setup.codec != Codec::kNone) {
        for (std::uint64_t at = 0, m = 0; m < n; at += begin.counts[m], ++m) {
          for (std::uint64_t p = 0; p < begin.counts[m]; p += begin.part_elements) {
            const size_t size = static_cast<size_t>(std::min(begin.part_elements, begin.counts[m] - p));
            bound = std::max(bound, error_bound(setup.codec, std::span<const float>(vector).subspan(static_cast<size_t>(at + p), size)));
          }
        }
      }
      continue;
    }
    if (type != Msg::kRound || payload.size() != wire::kGroupIdBytes || weights.size() != setup.peers) {
      return fail(error(Code::kMalformed, "unexpected command from the parent"));
    }
    begin.group_id = payload;
    PeerReport report;
    report.bound = bound;
    auto group = Group::from_begin(begin);
    if (!group) {
      report.code = group.status().code();
      report.message = group.status().to_string();
    } else {
      const double cpu_start = process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      auto result = all_reduce.run(*group, vector, weights[setup.index], setup.all_reduce,
                                   Deadline::after(setup.round_timeout));
      report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      report.cpu_seconds = process_cpu_seconds() - cpu_start;
      if (!result) {
        report.code = result.status().code();
        report.message = result.status().to_string();
        fill(vector, own);
      } else {
        report.averaged_fraction = result->averaged_fraction;
        report.banned = static_cast<std::uint32_t>(result->banned_senders.size());
        report.failed = static_cast<std::uint32_t>(result->failed_reducers.size());
        Check check = check_and_refill(vector, mean, own);
        report.max_abs_error = check.max_abs_error;
        report.scale = check.scale;
      }
    }
    if (auto s = send_msg(to_parent, Msg::kReport, report.encode()); !s.is_ok()) return fail(s);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The parent's view of its peers.

struct Child {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  std::string endpoint;
  crypto::PeerId id;
  bool reaped = false;
};

// Runs a command (argv[0] looked up in PATH) and waits for it, at most `timeout`.
Status run_command(const std::vector<std::string>& args, Duration timeout = std::chrono::seconds(20)) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
  pid_t pid = -1;
  if (int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0) {
    return error(Code::kUnavailable, "cannot run '" + line + "': " + std::strerror(rc));
  }
  const Deadline deadline = Deadline::after(timeout);
  int status = 0;
  while (true) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) return error(Code::kInternal, "waitpid: " + std::string(std::strerror(errno)));
    if (deadline.passed()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return error(Code::kTimeout, "'" + line + "' did not finish in time");
    }
    ::usleep(2000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return error(Code::kUnavailable, "'" + line + "' failed");
  return {};
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

// The N peer processes. Kills and reaps whatever is left when destroyed.
class Peers {
 public:
  ~Peers() { stop(std::chrono::seconds(0)); }

  // Forks the peers. Call before anything creates a ZeroMQ context or a thread.
  Status fork_all(PeerSetup setup) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    const pid_t parent = ::getpid();
    for (size_t i = 0; i < setup.peers; ++i) {
      int down[2], up[2];
      if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0) {
        return error(Code::kIo, std::string("pipe: ") + std::strerror(errno));
      }
      const pid_t pid = ::fork();
      if (pid < 0) return error(Code::kIo, std::string("fork: ") + std::strerror(errno));
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
        ::signal(SIGINT, SIG_DFL);
        ::signal(SIGTERM, SIG_DFL);
        for (const Child& other : children_) {
          ::close(other.to_child);
          ::close(other.from_child);
        }
        ::close(down[1]);
        ::close(up[0]);
        setup.index = i;
        const int code = peer_main(setup, down[0], up[1]);
        std::cerr.flush();
        ::_exit(code);
      }
      ::close(down[0]);
      ::close(up[1]);
      Child child;
      child.pid = pid;
      child.to_child = down[1];
      child.from_child = up[0];
      children_.push_back(child);
    }
    return {};
  }

  size_t size() const { return children_.size(); }
  Child& operator[](size_t i) { return children_[i]; }

  Status send(size_t i, Msg type, const Writer& payload = Writer()) {
    Status s = send_msg(children_[i].to_child, type, payload);
    return s.is_ok() ? s : explain(i, s);
  }

  // The next message from peer i, which must be `expected`.
  Result<Bytes> receive(size_t i, Msg expected, Deadline deadline) {
    auto got = recv_msg(children_[i].from_child, deadline);
    if (!got) return explain(i, got.status());
    if (got->first != expected) return error(Code::kMalformed, "peer " + std::to_string(i) + " sent an unexpected message");
    return std::move(got->second);
  }

  // Asks every peer to quit, waits for them until `grace` has passed, then kills the rest.
  void stop(Duration grace) {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (!children_[i].reaped && grace > Duration::zero()) (void)send_msg(children_[i].to_child, Msg::kQuit);
    }
    const Deadline deadline = Deadline::after(grace);
    for (Child& child : children_) {
      if (child.reaped) continue;
      int status = 0;
      while (::waitpid(child.pid, &status, WNOHANG) == 0) {
        if (deadline.passed()) {
          ::kill(child.pid, SIGKILL);
          ::waitpid(child.pid, &status, 0);
          break;
        }
        ::usleep(5000);
      }
      child.reaped = true;
      ::close(child.to_child);
      ::close(child.from_child);
    }
  }

 private:
  // A failed pipe operation: say which peer, and how it ended if it did.
  Status explain(size_t i, const Status& status) {
    Child& child = children_[i];
    std::string what = "peer " + std::to_string(i) + " (pid " + std::to_string(child.pid) + ")";
    if (status.code() == Code::kTimeout) return error(Code::kTimeout, what + " did not answer before the deadline");
    if (status.code() == Code::kCancelled) return status;
    // Its pipe closed: it is exiting. Give it a moment to finish, so that we can say how it ended.
    int exit_status = 0;
    const Deadline deadline = Deadline::after(std::chrono::seconds(2));
    while (!deadline.passed()) {
      if (::waitpid(child.pid, &exit_status, WNOHANG) == child.pid) {
        child.reaped = true;
        ::close(child.to_child);
        ::close(child.from_child);
        return error(Code::kUnavailable, what + " died: it " + describe_exit(exit_status));
      }
      ::usleep(5000);
    }
    return status.with_context(what);
  }

  std::vector<Child> children_;
};

// --emulate-links: a bridge, one veth pair per peer (its end in the peer's namespace), tbf both ways.
class EmulatedLinks {
 public:
  EmulatedLinks() : tag_(std::to_string(::getpid())) {}
  ~EmulatedLinks() {
    if (bridge_up_) (void)run_command({"ip", "link", "del", bridge()});
  }

  static std::string host_of(size_t i) { return "10.213." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 2); }

  Status setup(Peers& peers, const std::vector<double>& rates) {
    DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "add", bridge(), "type", "bridge"}));
    bridge_up_ = true;
    DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", bridge(), "up"}));
    for (size_t i = 0; i < peers.size(); ++i) {
      const std::string host_side = "dlv" + tag_ + "x" + std::to_string(i);
      const std::string pid = std::to_string(peers[i].pid);
      DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", pid}));
      DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", host_side, "master", bridge()}));
      DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", host_side, "up"}));
      DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up"}));
      DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "addr", "add", host_of(i) + "/16", "dev", "eth0"}));
      DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "link", "set", "eth0", "up"}));
      // Token bucket: the rate, a burst of 5 ms of it (at least 64 KiB, so TSO segments pass), and up to
      // 100 ms of queue before drops, like a router's buffer.
      const double bytes_per_second = rates[i];
      const std::string rate = std::to_string(static_cast<std::uint64_t>(bytes_per_second * 8)) + "bit";
      const std::string burst = std::to_string(std::max<std::uint64_t>(65536, static_cast<std::uint64_t>(bytes_per_second * 0.005)));
      const std::vector<std::string> tbf = {"root", "tbf", "rate", rate, "burst", burst, "latency", "100ms"};
      std::vector<std::string> download = {"tc", "qdisc", "add", "dev", host_side};
      download.insert(download.end(), tbf.begin(), tbf.end());
      DEDLOC_RETURN_IF_ERROR(run_command(download));
      std::vector<std::string> upload = {"nsenter", "-t", pid, "-n", "tc", "qdisc", "add", "dev", "eth0"};
      upload.insert(upload.end(), tbf.begin(), tbf.end());
      DEDLOC_RETURN_IF_ERROR(run_command(upload));
    }
    return {};
  }

 private:
  std::string bridge() const { return "dlbr" + tag_; }
  std::string tag_;
  bool bridge_up_ = false;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string format_bytes(std::uint64_t bytes) {
  std::ostringstream out;
  if (bytes % (1u << 30) == 0) out << bytes / (1u << 30) << " GiB";
  else if (bytes % (1u << 20) == 0) out << bytes / (1u << 20) << " MiB";
  else if (bytes % 1024 == 0) out << bytes / 1024 << " KiB";
  else out << bytes << " B";
  return out.str();
}

// Validated settings and the group's shares, computed before any process starts.
struct Plan {
  std::uint64_t bytes = 0;
  std::uint64_t elements = 0;
  std::uint64_t part_elements = 0;
  Codec codec = Codec::kNone;
  std::vector<double> rates;           // bytes/s per peer, when --bandwidths was given
  std::vector<std::uint64_t> counts;   // elements each peer reduces
  bool planned = false;                // counts from plan_group_shares
};

Result<Plan> make_plan(const BenchOptions& o) {
  auto usage = [](const std::string& why) { return error(Code::kInvalidArgument, why); };
  Plan plan;
  if (o.peers < 2 || o.peers > 64) return usage("--peers must be between 2 and 64");
  if (o.rounds < 1) return usage("--rounds must be at least 1");
  if (o.window < 1) return usage("--window must be at least 1");
  if (o.part_kib < 1 || o.part_kib > 16384) return usage("--part-kib must be between 1 and 16384");
  if (!(o.timeout_seconds > 0)) return usage("--timeout must be positive");
  auto bytes = parse_size(o.size);
  if (!bytes) return bytes.status();
  if (*bytes % sizeof(float) != 0 || *bytes / sizeof(float) < o.peers) {
    return usage("--size must be a multiple of 4 bytes (float32), at least one value per peer");
  }
  plan.bytes = *bytes;
  plan.elements = *bytes / sizeof(float);
  auto codec = avg::parse_codec(o.codec);
  if (!codec) return codec.status().with_context("--codec");
  plan.codec = *codec;
  // As many values as fit in --part-kib once encoded (headers included): 128 Ki floats uncompressed,
  // 256 Ki in fp16, about 512 Ki in 8 bits.
  const std::uint64_t part_bytes = std::uint64_t{o.part_kib} * 1024;
  plan.part_elements = part_bytes / sizeof(float);
  while (encoded_bytes(plan.codec, static_cast<size_t>(plan.part_elements) * 2) <= part_bytes) plan.part_elements *= 2;
  if (encoded_bytes(plan.codec, static_cast<size_t>(plan.part_elements) + 1) <= part_bytes) {
    // The largest count that fits, between this one and twice it.
    std::uint64_t low = plan.part_elements + 1, high = 2 * plan.part_elements;
    while (low < high) {
      const std::uint64_t mid = (low + high + 1) / 2;
      if (encoded_bytes(plan.codec, static_cast<size_t>(mid)) <= part_bytes) low = mid; else high = mid - 1;
    }
    plan.part_elements = low;
  }
  if (!o.bandwidths.empty()) {
    if (o.bandwidths.size() != o.peers) {
      return usage("--bandwidths needs one rate per peer (" + std::to_string(o.peers) + "), got " +
                   std::to_string(o.bandwidths.size()));
    }
    for (const auto& text : o.bandwidths) {
      auto rate = plan::parse_rate(text, "--bandwidths");
      if (!rate) return rate.status();
      if (!(*rate > 0)) return usage("--bandwidths: every rate must be positive");
      plan.rates.push_back(*rate);
    }
  }
  if (o.uniform && plan.rates.empty()) return usage("--uniform only makes sense with --bandwidths");
  if (o.emulate_links && plan.rates.empty()) return usage("--emulate-links needs --bandwidths (the rate of each peer's link)");
  if (!plan.rates.empty() && !o.uniform) {
    std::vector<plan::GroupMember> members;
    for (size_t i = 0; i < o.peers; ++i) members.push_back({"peer-" + std::to_string(i), plan.rates[i], plan::MemberRole::kNode});
    auto counts = plan::plan_group_shares(members, plan.elements);
    if (!counts) return counts.status().with_context("planning the shares");
    plan.counts = *counts;
    plan.planned = true;
  } else {
    for (size_t i = 0; i < o.peers; ++i) plan.counts.push_back(plan.elements / o.peers + (i < plan.elements % o.peers ? 1 : 0));
  }
  return plan;
}

struct RoundOutcome {
  std::vector<double> peer_seconds;
  double seconds = 0;      // the slowest peer
  double cpu_seconds = 0;  // all peers' processes together
  double max_rel_error = 0;
  double tolerance_rel = 0;
};

class BenchCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("bench", "time butterfly all-reduce rounds among N local peer processes");
    sub->add_option("--peers", o_.peers, "peer processes (2-64)")->capture_default_str();
    sub->add_option("--size", o_.size, "vector size in bytes of float32: 64MiB, 256MiB, 1GiB, 100MB")->capture_default_str();
    sub->add_option("--codec", o_.codec, "part compression: none, fp16, scaled-fp16, uint8, blockwise8")->capture_default_str();
    sub->add_option("--rounds", o_.rounds, "timed rounds (after one warm-up round)")->capture_default_str();
    sub->add_option("--window", o_.window, "parts in flight to each reducer")->capture_default_str();
    sub->add_option("--max-in-flight", o_.max_in_flight, "parts in flight to all reducers together (0: no cap)")
        ->capture_default_str();
    sub->add_option("--part-kib", o_.part_kib, "KiB per part on the wire, after compression")->capture_default_str();
    sub->add_option("--bandwidths", o_.bandwidths, "each peer's bandwidth (1Gbit,100Mbit,...): shares from the planner")
        ->delimiter(',');
    sub->add_flag("--uniform", o_.uniform, "equal shares even with --bandwidths (to compare with the planner's)");
    sub->add_flag("--emulate-links", o_.emulate_links,
                  "limit each peer's link to its --bandwidths rate, both ways (network namespaces + tc tbf; root)");
    sub->add_option("--timeout", o_.timeout_seconds, "seconds one round (and start-up) may take")->capture_default_str();
    return sub;
  }

  int run(const cli::CommonFlags& common) override {
    auto plan = make_plan(o_);
    if (!plan) return cli::report_failure(kTool, plan.status());
    if (o_.emulate_links && ::geteuid() != 0) {
      return cli::report_failure(kTool, error(Code::kInvalidArgument, "--emulate-links needs root (network namespaces, tc)"));
    }
    cli::install_shutdown_handlers();  // also ignores SIGPIPE: a dead peer's pipe is an error, not a signal

    PeerSetup setup;
    setup.peers = o_.peers;
    setup.elements = plan->elements;
    setup.codec = plan->codec;
    setup.round_timeout = from_seconds(o_.timeout_seconds);
    setup.idle_timeout = from_seconds(2 * o_.timeout_seconds + 60);
    setup.own_netns = o_.emulate_links;
    setup.encrypted = !common.plaintext;
    if (auto curve = setup.encrypted ? net::require_curve() : Status::ok(); !curve.is_ok()) {
      return cli::report_failure(kTool, curve);
    }
    // No faults are expected here: the sender and reducer timeouts only keep a stuck round from hanging.
    setup.all_reduce.codec = plan->codec;
    setup.all_reduce.window = o_.window;
    setup.all_reduce.max_in_flight = o_.max_in_flight;
    setup.all_reduce.sender_timeout = from_seconds(o_.timeout_seconds / 2);
    setup.all_reduce.reducer_timeout = from_seconds(o_.timeout_seconds * 3 / 4);

    Peers peers;
    EmulatedLinks links;
    if (auto s = peers.fork_all(setup); !s.is_ok()) return cli::report_failure(kTool, s);
    const Deadline startup = Deadline::after(from_seconds(o_.timeout_seconds));
    auto fail = [&](const Status& status) {
      peers.stop(std::chrono::seconds(0));
      std::cerr << kTool << ": error: " << status.to_string() << "\n";
      if (status.code() == Code::kTimeout) return cli::kExitTimeout;
      return status.code() == Code::kCancelled ? cli::kExitInterrupted : cli::kExitFailure;
    };
    for (size_t i = 0; i < peers.size(); ++i) {
      if (auto ready = peers.receive(i, Msg::kReady, startup); !ready) return fail(ready.status());
    }
    if (o_.emulate_links) {
      if (auto s = links.setup(peers, plan->rates); !s.is_ok()) return fail(s.with_context("--emulate-links"));
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      const std::string host = o_.emulate_links ? EmulatedLinks::host_of(i) : "127.0.0.1";
      Writer w;
      w.bytes(as_bytes(host));
      if (auto s = peers.send(i, Msg::kListen, w); !s.is_ok()) return fail(s);
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      auto hello = peers.receive(i, Msg::kHello, startup);
      if (!hello) return fail(hello.status());
      Reader r(*hello);
      peers[i].endpoint = r.str();
      auto id = crypto::PeerId::from_bytes(r.bytes(crypto::PeerId::kSize));
      if (!r.ok() || !id) return fail(error(Code::kMalformed, "peer " + std::to_string(i) + " sent a bad hello"));
      peers[i].id = *id;
    }
    Writer group;
    group.u32(static_cast<std::uint32_t>(peers.size()));
    for (size_t i = 0; i < peers.size(); ++i) {
      group.bytes(peers[i].id.span()).str(peers[i].endpoint).u64(plan->counts[i]).f64(static_cast<double>(i + 1));
    }
    group.u64(plan->elements).u64(plan->part_elements);
    for (size_t i = 0; i < peers.size(); ++i) {
      if (auto s = peers.send(i, Msg::kGroup, group); !s.is_ok()) return fail(s);
    }

    std::random_device entropy;
    std::mt19937_64 rng((static_cast<std::uint64_t>(entropy()) << 32) ^ entropy());
    std::vector<RoundOutcome> rounds;
    bool wrong = false;
    std::string wrong_why;
    for (size_t round = 0; round < o_.rounds + 1; ++round) {
      Bytes group_id(wire::kGroupIdBytes);
      for (auto& b : group_id) b = static_cast<std::uint8_t>(rng());
      Writer w;
      w.bytes(group_id);
      for (size_t i = 0; i < peers.size(); ++i) {
        if (auto s = peers.send(i, Msg::kRound, w); !s.is_ok()) return fail(s);
      }
      const Deadline deadline = Deadline::after(from_seconds(o_.timeout_seconds + 10));
      RoundOutcome outcome;
      double worst_abs = 0, scale = 0, bound = 0;
      for (size_t i = 0; i < peers.size(); ++i) {
        auto bytes = peers.receive(i, Msg::kReport, deadline);
        if (!bytes) return fail(bytes.status());
        auto report = PeerReport::decode(*bytes);
        if (!report) return fail(report.status());
        if (report->code != Code::kOk) {
          return fail(error(report->code, "peer " + std::to_string(i) + ": the all-reduce failed: " + report->message));
        }
        if (report->averaged_fraction != 1.0 || report->banned || report->failed) {
          wrong = true;
          wrong_why = "peer " + std::to_string(i) + " averaged only " + std::to_string(report->averaged_fraction) +
                      " of its vector (banned " + std::to_string(report->banned) + " senders, gave up on " +
                      std::to_string(report->failed) + " reducers)";
        }
        outcome.peer_seconds.push_back(report->seconds);
        outcome.cpu_seconds += report->cpu_seconds;
        worst_abs = std::max(worst_abs, report->max_abs_error);
        scale = std::max(scale, report->scale);
        bound = std::max(bound, report->bound);
      }
      outcome.seconds = *std::max_element(outcome.peer_seconds.begin(), outcome.peer_seconds.end());
      scale = std::max(scale, 1e-30);
      outcome.max_rel_error = worst_abs / scale;
      outcome.tolerance_rel = (3 * bound) / scale + 1e-5;
      if (!(outcome.max_rel_error <= outcome.tolerance_rel)) {
        wrong = true;
        wrong_why = "round " + std::to_string(round) + ": relative error " + std::to_string(outcome.max_rel_error) +
                    " exceeds the tolerance " + std::to_string(outcome.tolerance_rel);
      }
      if (round > 0) rounds.push_back(outcome);  // round 0 warms up
    }
    peers.stop(std::chrono::seconds(10));

    report(common, *plan, rounds, wrong);
    if (wrong) {
      std::cerr << kTool << ": wrong results: " << wrong_why << "\n";
      return cli::kExitFailure;
    }
    return cli::kExitOk;
  }

 private:
  void report(const cli::CommonFlags& common, const Plan& plan, const std::vector<RoundOutcome>& rounds, bool wrong) const {
    const double n = static_cast<double>(o_.peers);
    std::vector<double> times, cpu;
    double max_rel = 0, tolerance = 0;
    for (const auto& r : rounds) {
      times.push_back(r.seconds);
      cpu.push_back(r.cpu_seconds);
      max_rel = std::max(max_rel, r.max_rel_error);
      tolerance = std::max(tolerance, r.tolerance_rel);
    }
    const double med = median(times);
    const double algbw = med > 0 ? static_cast<double>(plan.bytes) / med / 1e9 : 0;
    const double busbw = algbw * 2 * (n - 1) / n;
    if (common.json) {
      nlohmann::json j;
      j["impl"] = "dedloc";
      j["peers"] = o_.peers;
      j["bytes"] = plan.bytes;
      j["codec"] = codec_name(plan.codec);
      j["rounds"] = o_.rounds;
      j["window"] = o_.window;
      j["max_in_flight"] = o_.max_in_flight;
      j["part_kib"] = o_.part_kib;
      j["part_elements"] = plan.part_elements;
      j["shares"] = plan.planned ? "planner" : "uniform";
      j["counts"] = plan.counts;
      j["emulated_links"] = o_.emulate_links;
      j["encrypted"] = !common.plaintext;
      j["times_s"] = times;
      std::vector<std::vector<double>> per_peer;
      for (const auto& r : rounds) per_peer.push_back(r.peer_seconds);
      j["peer_times_s"] = per_peer;
      j["median_s"] = med;
      j["cpu_s"] = cpu;
      j["median_cpu_s"] = median(cpu);
      j["algbw_gbps"] = algbw;
      j["busbw_gbps"] = busbw;
      j["max_rel_error"] = max_rel;
      j["tolerance_rel"] = tolerance;
      j["ok"] = !wrong;
      std::cout << j.dump() << std::endl;
      return;
    }
    std::printf("dedloc all-reduce: %zu peers, %s float32, codec %s, parts of %zu KiB, window %zu, %s shares, %s%s\n",
                o_.peers, format_bytes(plan.bytes).c_str(), std::string(codec_name(plan.codec)).c_str(), o_.part_kib,
                o_.window, plan.planned ? "planner" : "uniform", common.plaintext ? "plaintext" : "CURVE",
                o_.emulate_links ? ", emulated links" : "");
    std::printf("%6s %10s %12s %12s %8s\n", "round", "time_s", "algbw_GB/s", "busbw_GB/s", "cpu_s");
    for (size_t r = 0; r < rounds.size(); ++r) {
      const double a = static_cast<double>(plan.bytes) / rounds[r].seconds / 1e9;
      std::printf("%6zu %10.4f %12.3f %12.3f %8.3f\n", r + 1, rounds[r].seconds, a, a * 2 * (n - 1) / n, rounds[r].cpu_seconds);
    }
    std::printf("median %.4f s, algbw %.3f GB/s, busbw %.3f GB/s, cpu %.3f s; max relative error %.3g (tolerance %.3g)\n",
                med, algbw, busbw, median(cpu), max_rel, tolerance);
    std::fflush(stdout);
  }

  BenchOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace dedloc::avg_tool
