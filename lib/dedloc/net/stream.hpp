// Streaming a large byte range (a tensor, a model state) in parts, with flow control.
//
// The sender keeps at most `window` parts unacknowledged, so memory on both sides stays around
// window x part_bytes however large the stream is, and a slow receiver slows the sender instead of
// filling queues. Each part is a StreamPart request with one payload frame; the receiver answers each with
// a StreamAck after its sink consumed the bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"

namespace dedloc::net {

struct StreamOptions {
  size_t part_bytes = 1u << 20;                          // bytes per part (the last one may be shorter)
  size_t window = 8;                                     // parts in flight before waiting for an ack
  Duration part_timeout = std::chrono::seconds(30);      // one part's round trip
};

// Fills `out` with the stream's bytes starting at `offset`. Called on the sending thread, in order.
using StreamSource = std::function<void(std::uint64_t offset, std::span<std::uint8_t> out)>;

// Sends `total_bytes` from `source` to the StreamReceiver at `endpoint`, blocking until every part is
// acknowledged, a part fails (its status is returned), or `deadline` passes (kTimeout).
Status send_stream(Client& client, const std::string& endpoint, std::uint64_t stream_id, std::uint64_t total_bytes,
                   const StreamSource& source, const StreamOptions& options, Deadline deadline);

// Consumes one stream's parts on the receiving side. Parts arrive on the server's loop thread; a sink that
// is slow slows its sender (flow control), not other streams.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // The bytes at `offset`; an error status is sent back to the sender, which then stops.
  virtual Status consume(std::uint64_t offset, ByteSpan bytes) = 0;
  // Every byte arrived.
  virtual void complete() {}
};

class StreamReceiver {
 public:
  // Decides whether to accept a new stream (by id, size and sender) and makes its sink.
  using SinkFactory = std::function<Result<std::unique_ptr<StreamSink>>(
      std::uint64_t stream_id, std::uint64_t total_bytes, const crypto::PeerId& sender)>;

  // Registers the StreamPart handler on `server` (before server.start()). `max_streams` bounds how many
  // streams may be open at once. The receiver must outlive the server's loop: stop the server before
  // destroying it (declaring the receiver after the server does the opposite).
  // A stream that receives nothing for `idle_timeout` is dropped (its sender died), freeing its slot.
  StreamReceiver(Server& server, SinkFactory factory, size_t max_streams = 64,
                 Duration idle_timeout = std::chrono::seconds(60));

 private:
  struct Open {
    std::unique_ptr<StreamSink> sink;
    std::uint64_t total_bytes = 0;
    std::uint64_t received = 0;
    TimePoint last_part;
  };
  void drop_idle_streams(TimePoint now);
  void on_part(wire::StreamPart&& part, Incoming&& request, Replier replier);

  SinkFactory factory_;
  size_t max_streams_;
  Duration idle_timeout_;
  std::map<std::pair<crypto::PeerId, std::uint64_t>, Open> open_;  // touched only on the loop thread
};

}  // namespace dedloc::net
