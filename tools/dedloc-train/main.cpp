// dedloc-train: a volunteer's peer in a collaborative training run (docs/architecture.md). Parses flags; the work is in
// training_session.cpp.
#include "training_session.hpp"

int main(int argc, char** argv) {
  using namespace dedloc;
  cli::CommonFlags common;
  train_tool::SessionOptions options;
  CLI::App app{"dedloc-train: train one model together with the other peers of a run. Each peer computes "
               "micro-batches, the swarm averages gradients when it has gathered the recipe's global batch, and "
               "every peer applies the same step: large-batch SGD over everyone's hardware.",
               "dedloc-train"};
  app.footer("SIGINT/SIGTERM: leave after the step this peer's group waits for, if its group for it formed "
             "(exit 130); a second signal leaves at once (docs/recipes.md).");
  // Its settings come from --recipe and flags: no --config or --print-config.
  cli::add_common_flags(app, common, cli::HonouredFlags::peer() | cli::HonouredFlags{.json = true});
  app.add_option("--recipe", options.recipe, "the run's recipe: recipes/NAME.yaml (docs/recipes.md)")->required();
  app.add_option("--initial-peers", options.initial_peers,
                 "DHT nodes to join through (tcp://HOST:PORT/k/KEY); none: this peer starts a new swarm");
  app.add_option("--run-id", options.run_id, "the run to join (default: the recipe's run_id)");
  app.add_flag("--client-mode", options.client_mode,
               "for peers others cannot dial (behind NAT): send gradients, reduce nothing, serve no state");
  app.add_option("--relay", options.relays,
                 "client mode: a relay to stay reachable through (tcp://HOST:PORT/k/RELAYKEY, the address "
                 "`dedloc-relay serve` printed); without it, the relays listed in the DHT");
  app.add_option("--device", options.device, "cpu or cuda (cuda:N)")->capture_default_str();
  app.add_option("--batch-size", options.micro_batch_size, "samples per micro-batch on this peer (default: the recipe's)");
  app.add_option("--max-time", options.max_time, "stop after this many seconds (0: until SIGINT)")->capture_default_str();
  app.add_option("--max-epochs", options.max_epochs, "stop at this global epoch (0: no limit)")->capture_default_str();
  app.add_option("--min-peers", options.min_peers, "start computing once this many peers (this one included) are in the run")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", options.checkpoint_dir,
                 "write checkpoint.safetensors and model.safetensors here (every training.checkpoint_every epochs "
                 "and at exit)");
  app.add_flag("--resume", options.resume, "start from checkpoint.safetensors in --checkpoint-dir");
  app.add_option("--listen", options.dht_listen, "this peer's DHT endpoint, TCP and UDP on its port (not in client mode)")->capture_default_str();
  app.add_option("--avg-listen", options.avg_listen, "the averaging and state server's endpoint")->capture_default_str();
  app.add_option("--announce-host", options.announce_host, "the host others should dial, when it differs from the bound one (with fixed ports in --listen and --avg-listen)");
  app.add_option("--bandwidth", options.bandwidth_mbit, "Mbit/s this peer can move each way (default: the recipe's)");
  app.add_option("--data-seed", options.data_seed, "this peer's data order, and the synthetic task's per-sample gradient (default: random)");
  app.add_option("--threads", options.threads,
                 "CPU threads for torch (0: torch's default; 1 for the synthetic task)")->capture_default_str();
  app.add_option("--compute-rate", options.compute_rate,
                 "synthetic task: the samples/s this peer emulates (default: the recipe's model.samples_per_second)");
  app.add_option("--samples-log", options.samples_log, "append, per step, the sample ids this peer contributed")->group("");
  app.add_flag("--params-hash", options.params_hash, "with --json: a hash and the norm of the parameters in each step and download line")
      ->group("");
  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  return train_tool::run_session(common, options);
}
