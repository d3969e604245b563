// The byte protocol between the all-reduce benchmark's parent process and its forked peers (see
// all_reduce_bench.hpp): one message is [u8 type][u32 payload length][payload], fields in the host's byte
// order (parent and peers are one binary on one host: nothing here crosses a network).
//
// Payloads are written with PipeWriter and read with PipeReader, which never reads past the end: a short
// or overlong payload makes ok() false, and every decoder below turns that into kMalformed.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::avg::bench {

// The numbers are the protocol: never reuse one.
enum class PipeMessage : std::uint8_t {
  kReady = 1,   // peer -> parent: forked (and in its namespace); waits for kListen
  kListen = 2,  // parent -> peer: the host to bind on (its bytes, unframed)
  kHello = 3,   // peer -> parent: endpoint, peer id (PeerHello)
  kGroup = 4,   // parent -> peer: the members, their shares, the part size (BenchGroup)
  kRound = 5,   // parent -> peer: run one round with this group id (its bytes)
  kReport = 6,  // peer -> parent: one round's outcome (PeerReport)
  kQuit = 7,    // parent -> peer: exit
};

// The largest payload a reader accepts: a length above it is a corrupt stream, not a message.
inline constexpr size_t kMaxPipeMessageBytes = 16u << 20;

class PipeWriter {
 public:
  PipeWriter& u8(std::uint8_t v) { return raw(&v, 1); }
  PipeWriter& u32(std::uint32_t v) { return raw(&v, 4); }
  PipeWriter& u64(std::uint64_t v) { return raw(&v, 8); }
  PipeWriter& f64(double v) { return raw(&v, 8); }
  // A u32 length, then the bytes.
  PipeWriter& str(std::string_view s);
  // The bytes alone (the reader must know how many).
  PipeWriter& bytes(ByteSpan b) { return raw(b.data(), b.size()); }
  const Bytes& data() const { return data_; }

 private:
  PipeWriter& raw(const void* p, size_t n);
  Bytes data_;
};

// Reads fields; any read past the end makes good() false and yields zeros (or empty strings), so a decoder
// reads everything and checks ok() once at the end.
class PipeReader {
 public:
  explicit PipeReader(ByteSpan data) : data_(data) {}
  std::uint32_t u32() { return read<std::uint32_t>(); }
  std::uint64_t u64() { return read<std::uint64_t>(); }
  double f64() { return read<double>(); }
  std::string str();
  Bytes bytes(size_t n);
  bool good() const { return ok_; }                        // nothing read past the end so far
  bool ok() const { return ok_ && at_ == data_.size(); }  // ... and everything read

 private:
  template <class T>
  T read() {
    T v{};
    if (take(sizeof(T))) std::memcpy(&v, data_.data() + at_ - sizeof(T), sizeof(T));
    return v;
  }
  bool take(size_t n);
  ByteSpan data_;
  size_t at_ = 0;
  bool ok_ = true;
};

// One framed message on `fd` (a blocking pipe). kUnavailable when the other side has gone.
Status send_pipe_message(int fd, PipeMessage type, const PipeWriter& payload = PipeWriter());

// The next framed message from `fd` by `deadline`. kUnavailable at end of file (the other side exited),
// kTimeout at the deadline, kCancelled once `interrupted` says so (asked at least every 100 ms and whenever a
// signal wakes the wait), kMalformed for a length above kMaxPipeMessageBytes.
Result<std::pair<PipeMessage, Bytes>> receive_pipe_message(int fd, Deadline deadline,
                                                           const std::function<bool()>& interrupted = {});

// peer -> parent, after binding: where to reach it.
struct PeerHello {
  std::string endpoint;
  crypto::PeerId id;

  PipeWriter encode() const;
  static Result<PeerHello> decode(ByteSpan bytes);
};

// parent -> peers: the group every round uses (only the group id changes from round to round).
struct BenchGroup {
  struct Member {
    crypto::PeerId id;
    std::string endpoint;
    std::uint64_t count = 0;  // elements this member reduces
    double weight = 0;        // its weight in the mean
  };
  std::vector<Member> members;
  std::uint64_t length = 0;         // elements in the vector
  std::uint64_t part_elements = 0;  // elements per part

  PipeWriter encode() const;
  static Result<BenchGroup> decode(ByteSpan bytes);
};

// peer -> parent: one round's outcome, as the peer measured and checked it.
struct PeerReport {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the whole peer process (all threads) during the round
  double max_abs_error = 0;
  double scale = 0;
  double bound = 0;  // the codec's error_bound over the parts of the peer's own vector (0 without a codec)
  double averaged_fraction = 0;
  std::uint32_t banned = 0, failed = 0;
  Code code = Code::kOk;
  std::string message;

  PipeWriter encode() const;
  static Result<PeerReport> decode(ByteSpan bytes);
};

}  // namespace dedloc::avg::bench
