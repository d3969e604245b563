// `dedloc-avg aux`: a CPU-only auxiliary peer (collab::AuxPeer). It has no model and no gradients; it joins
// the run's averaging rounds with the aux role, reducing a share of every group's vector with its bandwidth,
// so that GPU peers on thin links spend less time averaging. It runs round after round until SIGINT/SIGTERM.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/relay/relay_keeper.hpp"
#include "dedloc/collab/aux_peer.hpp"
#include "run_dht.hpp"

namespace dedloc::avg_tool {

namespace {

constexpr std::string_view kTool = "dedloc-avg";


class AuxCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* cmd = app.add_subcommand("aux", "lend this machine's bandwidth to a run's averaging (reduces, sends nothing); "
                                          "runs until SIGINT/SIGTERM");
    cmd->add_option("--run", run_id_, "the run to help (its trainers' --run-id)")->required();
    cmd->add_option("--initial-peers", initial_peers_, "DHT nodes to join through: tcp://HOST:PORT/k/KEY")->required();
    cmd->add_option("--bandwidth", bandwidth_mbit_, "Mbit/s this machine can move each way (sizes its share)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->add_option("--shares", shares_,
                    "how groups this peer leads split the vector: planned (the planner's shares over the members' "
                    "bandwidths) or equal (the naive split; the trainers' averaging.shares)")
        ->capture_default_str()
        ->check(CLI::IsMember({"planned", "equal"}));
    cmd->add_option("--listen", listen_, "averaging endpoint to bind (port 0: any free port)")->capture_default_str();
    cmd->add_option("--announce", announce_, "address trainers should dial, when it differs from the bound one");
    cmd->add_option("--target-group-size", target_group_size_, "largest group to form")->capture_default_str();
    cmd->add_option("--matchmaking-time", matchmaking_seconds_, "seconds to look for a group each round")
        ->capture_default_str();
    cmd->add_option("--rounds", rounds_, "stop after this many averaged rounds (0: run until stopped)")
        ->capture_default_str();
    cmd->add_flag("--client-mode", client_mode_,
                  "behind NAT: bind no public port and take part through a relay (--relay, or those in the DHT)");
    cmd->add_option("--relay", relays_, "with --client-mode: a relay to attach to (tcp://HOST:PORT/k/RELAYKEY)");
    cmd->add_option("--centered-clip-tau", clip_tau_,
                    "robust aggregation: average the parts this peer reduces with CenteredClip of this radius "
                    "(an L2 length per part; 0: the plain weighted mean)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--centered-clip-iterations", clip_iterations_, "CenteredClip's fixed number of iterations")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    return cmd;
  }

  int run(const cli::CommonFlags& common) override {
    auto identity = cli::load_identity(common);
    if (!identity) return cli::report_failure(kTool, identity.status());
    cli::install_shutdown_handlers();

    zmq::context_t context;
    auto joined = join_run_dht(context, *identity, common, initial_peers_, std::chrono::seconds(10));
    if (!joined) return cli::report_failure(kTool, joined.status());
    dht::Node& dht = **joined;

    // Behind NAT: the averager announces its relay address; when the keeper moves us, it is rebuilt.
    std::unique_ptr<relay::RelayKeeper> keeper;
    if (client_mode_) {
      auto attached = reach_through_relay(context, *identity, dht, common);
      if (!attached) return cli::report_failure(kTool, attached.status());
      keeper = std::move(*attached);
    } else if (!relays_.empty()) {
      return cli::report_failure(kTool, error(Code::kInvalidArgument, "--relay is for --client-mode"));
    }

    collab::AuxPeerOptions options;
    options.averager.run_id = run_id_;
    options.averager.listen = client_mode_ ? "tcp://127.0.0.1:0" : listen_;
    options.averager.announce = announce_;
    options.averager.bandwidth = bandwidth_mbit_ * 1e6 / 8;
    options.averager.equal_shares = shares_ == "equal";
    options.averager.target_group_size = target_group_size_;
    options.averager.matchmaking_time = from_seconds(matchmaking_seconds_);
    options.averager.averaging_timeout = std::chrono::seconds(30);
    if (clip_tau_ > 0) options.averager.all_reduce.centered_clip = avg::CenteredClipOptions{clip_tau_, clip_iterations_};
    options.rounds = rounds_;
    if (keeper) options.relay_address = [&keeper] { return keeper->address(); };
    collab::AuxPeer aux(context, dht, *identity, std::move(options));
    if (auto started = aux.start(); !started.is_ok()) return cli::report_failure(kTool, started);
    cli::ReadyLine{"aux", identity->peer_id(), {aux.endpoint()}, {{"run_id", run_id_}}}.print();
    auto report = aux.run([] { return cli::shutdown_requested(); });
    if (!report) return cli::report_failure(kTool, report.status());
    return cli::kExitOk;
  }

 private:
  // Attached to a relay (--relay, else the DHT's), which hands the requests addressed to us to the averager
  // in this process (its in-process endpoint). An aux peer nobody can reach helps nobody: an error if none.
  Result<std::unique_ptr<relay::RelayKeeper>> reach_through_relay(zmq::context_t& context,
                                                                   const crypto::Identity& identity, dht::Node& dht,
                                                                   const cli::CommonFlags& common) {
    relay::RelayKeeperOptions keeping;
    auto relays = cli::peer_addresses(common, relays_, "--relay");
    if (!relays) return relays.status();
    keeping.relays = std::move(*relays);
    keeping.local_endpoint = avg::averager_in_process_endpoint(identity.peer_id());
    auto keeper = std::make_unique<relay::RelayKeeper>(context, identity, &dht, keeping);
    DEDLOC_RETURN_IF_ERROR(keeper->start(Deadline::after(std::chrono::seconds(15)))
                               .with_context("--client-mode: an aux peer must be reachable"));
    return keeper;
  }

  bool client_mode_ = false;
  std::vector<std::string> relays_;
  std::string run_id_;
  std::vector<std::string> initial_peers_;
  double bandwidth_mbit_ = 1000;
  std::string shares_ = "planned";
  std::string listen_ = "tcp://0.0.0.0:0";
  std::string announce_;
  size_t target_group_size_ = 16;
  double matchmaking_seconds_ = 5;
  size_t rounds_ = 0;
  double clip_tau_ = 0;  // --centered-clip-tau: 0 is the plain weighted mean
  size_t clip_iterations_ = 10;
};

}  // namespace

std::unique_ptr<Command> make_aux_command() { return std::make_unique<AuxCommand>(); }

}  // namespace dedloc::avg_tool
