#include "dedloc/monitor/dashboard_server.hpp"

#include <mutex>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>

#include "dedloc/core/clock.hpp"
#include "dedloc/monitor/dashboard_assets.hpp"

namespace dedloc::monitor {

struct DashboardServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mutex;
  DashboardDocuments documents;

  DashboardDocuments latest() {
    std::lock_guard lock(mutex);
    return documents;
  }
};

Result<std::pair<std::string, int>> parse_http_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return error(Code::kInvalidArgument, "expected HOST:PORT, got '" + address + "'");
  std::string host = address.substr(0, colon);
  std::string port_text = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return error(Code::kInvalidArgument, "expected a port 0-65535 in '" + address + "'");
  }
  return std::pair{host, port};
}

DashboardServer::DashboardServer() : impl_(std::make_unique<Impl>()) {
  auto& s = impl_->server;
  auto* impl = impl_.get();
  // Pages are read-only views of public records; they still get the usual defensive headers.
  s.set_default_headers({{"X-Content-Type-Options", "nosniff"}, {"Cache-Control", "no-store"}});
  s.set_payload_max_length(1 << 16);  // we take no uploads
  // cpp-httplib sets SO_REUSEPORT by default, which lets a second monitor bind the same port and silently
  // take half the requests; SO_REUSEADDR alone still allows a quick restart.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // A silent or trickling client holds a worker at most this long, and stop() waits for workers: these
  // bound both.
  s.set_read_timeout(3, 0);
  s.set_write_timeout(3, 0);
  s.set_keep_alive_timeout(2);
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(dedloc_asset_dashboard_html), "text/html; charset=utf-8");
  });
  s.Get("/chart.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(dedloc_asset_chart_js), "application/javascript");
  });
  s.Get("/api/state", [impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->latest().state_json, "application/json");
  });
  s.Get("/api/history", [impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->latest().history_json, "application/json");
  });
  s.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->latest().metrics_text, "text/plain; version=0.0.4; charset=utf-8");
  });
}

DashboardServer::~DashboardServer() { stop(); }

Status DashboardServer::start(const std::string& address) {
  auto parsed = parse_http_address(address);
  if (!parsed) return parsed.status().with_context("--http");
  auto [host, port] = *parsed;
  auto& s = impl_->server;
  if (port == 0) {
    impl_->port = s.bind_to_any_port(host.c_str());
  } else {
    impl_->port = s.bind_to_port(host.c_str(), port) ? port : -1;
  }
  if (impl_->port <= 0) return error(Code::kUnavailable, "cannot listen on http://" + address + " (in use, or not ours)");
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // stop() only stops a server that is already running: wait for that, or it could miss it and hang.
  auto deadline = Deadline::after(std::chrono::seconds(5));
  while (!impl_->server.is_running() && !deadline.passed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::ok();
}

int DashboardServer::port() const { return impl_->port; }

void DashboardServer::publish(DashboardDocuments documents) {
  std::lock_guard lock(impl_->mutex);
  impl_->documents = std::move(documents);
}

void DashboardServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace dedloc::monitor
