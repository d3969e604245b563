#include "dedloc/net/stream.hpp"

#include <algorithm>
#include <condition_variable>

#include "dedloc/wire/messages.hpp"

namespace dedloc::net {

Status send_stream(Client& client, const std::string& endpoint, std::uint64_t stream_id, std::uint64_t total_bytes,
                   const StreamSource& source, const StreamOptions& options, Deadline deadline) {
  if (options.part_bytes == 0 || options.window == 0) {
    return error(Code::kInvalidArgument, "stream part_bytes and window must be positive");
  }
  // Shared with the completion callbacks, which run on the client's loop thread and may outlive this call
  // when it returns early with an error.
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    size_t in_flight = 0;
    Status failure;
  };
  auto state = std::make_shared<State>();

  std::uint64_t offset = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      bool woke = state->changed.wait_until(lock, deadline.at, [&] {
        return !state->failure.is_ok() || state->in_flight < options.window;
      });
      if (!state->failure.is_ok()) return state->failure;
      if (!woke) return error(Code::kTimeout, "stream to " + endpoint + " did not finish before its deadline");
      if (offset >= total_bytes) {
        if (state->in_flight == 0) return Status::ok();
        // Everything is sent: wait for the last acks.
        bool done = state->changed.wait_until(lock, deadline.at, [&] {
          return !state->failure.is_ok() || state->in_flight == 0;
        });
        if (!state->failure.is_ok()) return state->failure;
        if (!done) return error(Code::kTimeout, "stream to " + endpoint + " did not finish before its deadline");
        return Status::ok();
      }
      state->in_flight++;
    }
    size_t n = static_cast<size_t>(std::min<std::uint64_t>(options.part_bytes, total_bytes - offset));
    zmq::message_t frame(n);
    source(offset, {frame.data<std::uint8_t>(), n});
    std::vector<zmq::message_t> frames;
    frames.push_back(std::move(frame));
    wire::StreamPart part{stream_id, offset, total_bytes};
    Deadline part_deadline{std::min(deadline.at, SystemClock::instance().now() + options.part_timeout)};
    client.call(endpoint, Outgoing::of(part, std::move(frames)), part_deadline, [state](Result<Incoming>&& reply) {
      Status outcome = reply.status();
      if (outcome.is_ok()) outcome = reply->decode<wire::StreamAck>().status();
      std::lock_guard<std::mutex> lock(state->mutex);
      state->in_flight--;
      if (!outcome.is_ok() && state->failure.is_ok()) state->failure = outcome;
      state->changed.notify_all();
    });
    offset += n;
  }
}

StreamReceiver::StreamReceiver(Server& server, SinkFactory factory, size_t max_streams, Duration idle_timeout)
    : factory_(std::move(factory)), max_streams_(max_streams), idle_timeout_(idle_timeout) {
  server.handle<wire::StreamPart>([this](wire::StreamPart&& part, Incoming&& request, Replier replier) {
    on_part(std::move(part), std::move(request), std::move(replier));
  });
}

void StreamReceiver::on_part(wire::StreamPart&& part, Incoming&& request, Replier replier) {
  if (request.frames.size() != 1) {
    return replier.fail(error(Code::kMalformed, "a StreamPart carries exactly one payload frame"));
  }
  const auto& frame = request.frames.front();
  if (part.offset + frame.size() > part.total_bytes) {
    return replier.fail(error(Code::kMalformed, "StreamPart runs past the stream's end"));
  }
  auto now = SystemClock::instance().now();
  drop_idle_streams(now);
  auto key = std::make_pair(request.envelope().sender, part.stream_id);
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (open_.size() >= max_streams_) {
      return replier.fail(error(Code::kRefused, "too many open streams (" + std::to_string(max_streams_) + ")"));
    }
    auto sink = factory_(part.stream_id, part.total_bytes, request.envelope().sender);
    if (!sink) return replier.fail(sink.status());
    it = open_.emplace(key, Open{std::move(*sink), part.total_bytes, 0, now}).first;
  } else if (it->second.total_bytes != part.total_bytes) {
    return replier.fail(error(Code::kMalformed, "StreamPart total_bytes changed mid-stream"));
  }
  Open& open = it->second;
  open.last_part = now;
  Status consumed = open.sink->consume(part.offset, {frame.data<std::uint8_t>(), frame.size()});
  if (!consumed.is_ok()) {
    open_.erase(it);
    return replier.fail(consumed);
  }
  open.received += frame.size();
  replier.reply(wire::StreamAck{part.stream_id, part.offset, open.received});
  if (open.received >= open.total_bytes) {
    // Forget the stream before telling its sink: complete() may wake a thread that tears everything down.
    std::unique_ptr<StreamSink> sink = std::move(open.sink);
    open_.erase(it);
    sink->complete();
  }
}

}  // namespace dedloc::net

namespace dedloc::net {

void StreamReceiver::drop_idle_streams(TimePoint now) {
  for (auto it = open_.begin(); it != open_.end();) {
    it = now - it->second.last_part > idle_timeout_ ? open_.erase(it) : std::next(it);
  }
}

}  // namespace dedloc::net
