// The dashboard's HTTP server on a real loopback socket: every route, and a prompt stop with a silent
// client connected.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <httplib.h>

#include "dedloc/monitor/dashboard_server.hpp"

using namespace dedloc;
using namespace dedloc::monitor;

namespace {

// A TCP connection to 127.0.0.1:port that sends `bytes` and then nothing.
int connect_silently(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  if (!bytes.empty()) REQUIRE(::send(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  return fd;
}

}  // namespace

TEST_CASE("The dashboard serves the page, Chart.js, state, history and metrics", "[net][monitor]") {
  DashboardServer server;
  REQUIRE(server.start("127.0.0.1:0").is_ok());
  REQUIRE(server.port() > 0);
  server.publish({.state_json = R"({"epoch":3})", .history_json = R"([{"epoch":3}])",
                  .metrics_text = "# TYPE dedloc_epoch gauge\ndedloc_epoch 3\n"});
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);

  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Type").rfind("text/html", 0) == 0);
  CHECK(page->body.find("<script src=\"/chart.js\"></script>") != std::string::npos);
  CHECK(page->body.find("id=\"peer-rows\"") != std::string::npos);
  auto chart = client.Get("/chart.js");
  REQUIRE(chart);
  CHECK(chart->body.find("Chart.js v") != std::string::npos);
  CHECK(chart->body.size() > 100000);  // the whole library, not a stub
  auto state = client.Get("/api/state");
  REQUIRE(state);
  CHECK(state->body == R"({"epoch":3})");
  CHECK(state->get_header_value("Content-Type") == "application/json");
  auto history = client.Get("/api/history");
  REQUIRE(history);
  CHECK(history->body == R"([{"epoch":3}])");
  auto metrics = client.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body == "# TYPE dedloc_epoch gauge\ndedloc_epoch 3\n");
  CHECK(metrics->get_header_value("Content-Type").find("version=0.0.4") != std::string::npos);
  auto missing = client.Get("/etc/passwd");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  auto upload = client.Post("/api/state", std::string(1 << 20, 'x'), "text/plain");
  CHECK((!upload || upload->status >= 400));  // nothing takes uploads
}

TEST_CASE("Stopping the dashboard does not wait on silent clients beyond its read timeout", "[net][monitor]") {
  DashboardServer server;
  REQUIRE(server.start("127.0.0.1:0").is_ok());
  int silent = connect_silently(server.port(), "");
  int trickle = connect_silently(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n");  // never finishes its header
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = std::chrono::steady_clock::now();
  server.stop();
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < std::chrono::seconds(6));
  ::close(silent);
  ::close(trickle);
}

TEST_CASE("A port in use is refused with the address named", "[net][monitor]") {
  DashboardServer first;
  REQUIRE(first.start("127.0.0.1:0").is_ok());
  DashboardServer second;
  auto status = second.start("127.0.0.1:" + std::to_string(first.port()));
  CHECK(status.code() == Code::kUnavailable);
  CHECK(status.message().find(std::to_string(first.port())) != std::string::npos);
  CHECK(second.start("nonsense").code() == Code::kInvalidArgument);
}
