#include "dedloc/net/socket_options.hpp"

#include <algorithm>

namespace dedloc::net {

void resolve_process_defaults(SocketOptions& options) {
  if (!options.access) options.access = AccessControl::process_default();
  if (!options.transport) options.transport = TransportKeys::process_default();
}

void apply_socket_options(zmq::socket_t& socket, const SocketOptions& options) {
  socket.set(zmq::sockopt::linger, static_cast<int>(options.linger.count()));
  socket.set(zmq::sockopt::sndhwm, options.send_hwm);
  socket.set(zmq::sockopt::rcvhwm, options.receive_hwm);
  // libzmq drops the connection of a peer that sends a frame larger than this.
  auto max_frame = std::max(options.limits.max_header_bytes, options.limits.max_frame_bytes);
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_frame));
}

Result<std::string> open_router(zmq::context_t& context, zmq::socket_t& socket, const std::string& listen,
                                const SocketOptions& options) {
  try {
    socket = zmq::socket_t(context, zmq::socket_type::router);
    apply_socket_options(socket, options);
    // Tell a client whose request cannot be routed, instead of silently dropping (ROUTER default).
    socket.set(zmq::sockopt::router_mandatory, 1);
    if (options.transport) DEDLOC_RETURN_IF_ERROR(make_curve_server(socket, *options.transport));
    socket.bind(listen);
    return advertised_endpoint(last_endpoint(socket), options.transport.get());
  } catch (const zmq::error_t& e) {
    return error(Code::kUnavailable, "cannot listen on " + listen + ": " + e.what());
  }
}

std::string last_endpoint(zmq::socket_t& socket) { return socket.get(zmq::sockopt::last_endpoint); }

}  // namespace dedloc::net
