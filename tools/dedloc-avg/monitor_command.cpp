// `dedloc-avg monitor`: follows a run from its DHT records and shows it: a live dashboard, /metrics for
// Prometheus, /api/state, and a history in CSV/JSONL (lib/dedloc/monitor/). Runs until SIGINT/SIGTERM.
#include <iostream>

#include "commands.hpp"
#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/monitor/monitor.hpp"
#include "run_dht.hpp"

namespace dedloc::avg_tool {

namespace {

constexpr std::string_view kTool = "dedloc-avg";

class MonitorCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* cmd = app.add_subcommand(
        "monitor", "follow a run: dashboard, Prometheus /metrics, /api/state and a CSV/JSONL history, from the "
                   "peers' DHT records; runs until SIGINT/SIGTERM");
    cmd->add_option("--run", run_id_, "the run to follow (its trainers' --run-id)")->required();
    cmd->add_option("--initial-peers", initial_peers_, "DHT nodes to join through: tcp://HOST:PORT/k/KEY")->required();
    cmd->add_option("--http", http_, "HOST:PORT to serve the dashboard on (port 0: any free port; 'off': none)")
        ->capture_default_str();
    cmd->add_option("--history", history_dir_,
                    "folder for history.csv and history.jsonl, one row per global step or change of peers "
                    "(kept across restarts)");
    cmd->add_option("--interval", interval_seconds_, "seconds between reads of the run's records")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    return cmd;
  }

  int run(const cli::CommonFlags& common) override {
    auto identity = cli::load_identity(common);
    if (!identity) return cli::report_failure(kTool, identity.status());
    auto history = history_dir_.empty() ? Result<monitor::History>(monitor::History{})
                                        : monitor::History::open(history_dir_);
    if (!history) return cli::report_failure(kTool, history.status().with_context("--history"));
    cli::install_shutdown_handlers();

    zmq::context_t context;
    auto joined = join_run_dht(context, *identity, common, initial_peers_, std::chrono::seconds(10));
    if (!joined) return cli::report_failure(kTool, joined.status());

    monitor::DashboardServer dashboard;
    const bool serving = http_ != "off";
    std::map<std::string, std::string> extra{{"run_id", run_id_}};
    if (serving) {
      if (auto started = dashboard.start(http_); !started.is_ok()) return cli::report_failure(kTool, started);
      auto host = monitor::parse_http_address(http_)->first;
      if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
      extra["http"] = "http://" + host + ":" + std::to_string(dashboard.port()) + "/";
    }
    monitor::Monitor monitor(**joined, run_id_, std::move(*history), serving ? &dashboard : nullptr);
    cli::ReadyLine{"monitor", identity->peer_id(), {}, extra}.print();
    auto& log = Logger::global();
    if (serving) log.info("monitor") << "dashboard at " << extra["http"] << " (also /metrics, /api/state)";

    monitor.run([] { return cli::shutdown_requested(); }, from_seconds(interval_seconds_), [&] {
      if (common.json) std::cout << monitor::state_json(run_id_, monitor.view(), monitor.counters()) << std::endl;
    });
    dashboard.stop();
    log.info("monitor") << "stopped";
    return cli::kExitOk;
  }

 private:
  std::string run_id_;
  std::vector<std::string> initial_peers_;
  std::string http_ = "127.0.0.1:8008";
  std::string history_dir_;
  double interval_seconds_ = 2;
};

}  // namespace

std::unique_ptr<Command> make_monitor_command() { return std::make_unique<MonitorCommand>(); }

}  // namespace dedloc::avg_tool
