#include "dedloc/avg/bench/pipe_protocol.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace dedloc::avg::bench {

PipeWriter& PipeWriter::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  return raw(s.data(), s.size());
}

PipeWriter& PipeWriter::raw(const void* p, size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  data_.insert(data_.end(), b, b + n);
  return *this;
}

std::string PipeReader::str() {
  const size_t n = u32();
  if (!take(n)) return {};
  return std::string(reinterpret_cast<const char*>(data_.data() + at_ - n), n);
}

Bytes PipeReader::bytes(size_t n) {
  if (!take(n)) return Bytes(n, 0);
  return Bytes(data_.begin() + static_cast<std::ptrdiff_t>(at_ - n), data_.begin() + static_cast<std::ptrdiff_t>(at_));
}

bool PipeReader::take(size_t n) {
  if (!ok_ || data_.size() - at_ < n) return ok_ = false;
  at_ += n;
  return true;
}

namespace {

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

// Reads exactly out.size() bytes by `deadline` (errors as receive_pipe_message's).
Status read_exact(int fd, std::span<std::uint8_t> out, Deadline deadline, const std::function<bool()>& interrupted) {
  constexpr std::int64_t kAskInterruptedMs = 100;
  size_t done = 0;
  while (done < out.size()) {
    pollfd p{fd, POLLIN, 0};
    const std::int64_t wait_ms = std::clamp<std::int64_t>(to_ms(deadline.remaining()), 1, kAskInterruptedMs);
    const int rc = ::poll(&p, 1, static_cast<int>(wait_ms));
    if (interrupted && interrupted()) return error(Code::kCancelled, "interrupted");
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

}  // namespace

Status send_pipe_message(int fd, PipeMessage type, const PipeWriter& payload) {
  PipeWriter framed;
  framed.u8(static_cast<std::uint8_t>(type))
      .u32(static_cast<std::uint32_t>(payload.data().size()))
      .bytes(payload.data());
  return write_all(fd, framed.data());
}

Result<std::pair<PipeMessage, Bytes>> receive_pipe_message(int fd, Deadline deadline,
                                                           const std::function<bool()>& interrupted) {
  std::uint8_t head[5];
  DEDLOC_RETURN_IF_ERROR(read_exact(fd, head, deadline, interrupted));
  std::uint32_t length = 0;
  std::memcpy(&length, head + 1, 4);
  if (length > kMaxPipeMessageBytes) {
    return error(Code::kMalformed, "a pipe message of " + std::to_string(length) + " bytes");
  }
  Bytes payload(length);
  DEDLOC_RETURN_IF_ERROR(read_exact(fd, payload, deadline, interrupted));
  return std::make_pair(static_cast<PipeMessage>(head[0]), std::move(payload));
}

PipeWriter PeerHello::encode() const {
  PipeWriter w;
  w.str(endpoint).bytes(id.span());
  return w;
}

Result<PeerHello> PeerHello::decode(ByteSpan bytes) {
  PipeReader r(bytes);
  PeerHello hello;
  hello.endpoint = r.str();
  auto id = crypto::PeerId::from_bytes(r.bytes(crypto::PeerId::kSize));
  if (!r.ok() || !id) return error(Code::kMalformed, "a bad hello");
  hello.id = *id;
  return hello;
}

PipeWriter BenchGroup::encode() const {
  PipeWriter w;
  w.u32(static_cast<std::uint32_t>(members.size()));
  for (const Member& m : members) w.bytes(m.id.span()).str(m.endpoint).u64(m.count).f64(m.weight);
  w.u64(length).u64(part_elements);
  return w;
}

Result<BenchGroup> BenchGroup::decode(ByteSpan bytes) {
  PipeReader r(bytes);
  BenchGroup group;
  const size_t n = r.u32();
  bool ids_ok = true;
  for (size_t i = 0; i < n && r.good(); ++i) {
    Member m;
    auto id = crypto::PeerId::from_bytes(r.bytes(crypto::PeerId::kSize));
    ids_ok = ids_ok && id.has_value();
    m.id = id.value_or(crypto::PeerId());
    m.endpoint = r.str();
    m.count = r.u64();
    m.weight = r.f64();
    group.members.push_back(std::move(m));
  }
  group.length = r.u64();
  group.part_elements = r.u64();
  if (!r.ok() || !ids_ok) return error(Code::kMalformed, "the group message does not decode");
  return group;
}

PipeWriter PeerReport::encode() const {
  PipeWriter w;
  w.f64(seconds).f64(cpu_seconds).f64(max_abs_error).f64(scale).f64(bound).f64(averaged_fraction).u32(banned).u32(failed);
  w.u32(static_cast<std::uint32_t>(code)).str(message);
  return w;
}

Result<PeerReport> PeerReport::decode(ByteSpan bytes) {
  PipeReader r(bytes);
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

}  // namespace dedloc::avg::bench
