#include "dedloc/lab/scenario_runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "dedloc/core/codec_id.hpp"
#include "dedloc/lab/emulator.hpp"
#include "dedloc/lab/lab_processes.hpp"
#include "dedloc/lab/scenario_report.hpp"
#include "dedloc/plan/collaboration_plan.hpp"

namespace dedloc::lab {

namespace {

constexpr int kDhtPort = 31337, kRelayPort = 31338, kTrainDhtPort = 31400, kTrainAvgPort = 31401, kAuxPort = 31402;

// What the runner needs from the recipe: the run to join, and the planner's inputs. Read here, a few keys
// with yaml-cpp, rather than with train::Recipe, which lives in the torch libraries: dedloc-lab links no
// libtorch. Every trainer validates the whole recipe when it starts (a bad one shows in its stderr file).
struct RecipeFacts {
  std::string run_id;
  double parameters = 0;  // the synthetic task's model size (0: unknown)
  double batch = 0;
  std::string codec = "none";
  std::uint64_t group_size = 16;
  double matchmaking_time = 5;
  std::string shares = "planned";  // averaging.shares: aux peers lead groups too, and split them alike
  std::string mode = "synchronous";  // collaboration.mode
};

Result<RecipeFacts> read_recipe(const std::string& path) {
  try {
    const YAML::Node r = YAML::LoadFile(path);
    RecipeFacts f;
    f.run_id = r["run_id"].as<std::string>("");
    f.parameters = r["model"]["parameters"].as<double>(0);
    f.batch = r["training"]["target_batch_size"].as<double>(0);
    f.codec = r["averaging"]["codec"].as<std::string>("none");
    f.group_size = r["averaging"]["target_group_size"].as<std::uint64_t>(16);
    f.matchmaking_time = r["averaging"]["matchmaking_time"].as<double>(5);
    f.shares = r["averaging"]["shares"].as<std::string>("planned");
    if (const YAML::Node collaboration = r["collaboration"]) f.mode = collaboration["mode"].as<std::string>("synchronous");
    if (f.run_id.empty()) return error(Code::kInvalidArgument, path + ": the recipe has no run_id");
    return f;
  } catch (const YAML::Exception& e) {
    return error(Code::kInvalidArgument, path + ": " + e.what());
  }
}

// A link's rate as --bandwidth takes it (Mbit/s, not rounded: a 12.5 Mbit/s link said to be 12 would skew
// the leader's shares against it), at least 1 kbit/s.
std::string mbit(double bytes_per_second) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", std::max(0.001, bytes_per_second * 8 / 1e6));
  return text;
}

// A timed action of the run.
struct Action {
  Duration at{0};
  enum class Kind { kKill, kStart, kLinkDown, kLinkUp, kSetLink, kLeave } kind = Kind::kKill;
  std::string target;
  LinkSpec link;  // kSetLink
};

// The faults as a timeline, random failures drawn from the scenario's seed.
Result<std::vector<Action>> timeline(const Scenario& s, const std::vector<HostRecord>& hosts) {
  std::vector<Action> actions;
  std::mt19937_64 random(s.seed);
  // A group that joins later starts all its peers at once then.
  for (const PeerGroup& g : s.groups) {
    if (g.join_at <= Duration::zero()) continue;
    for (size_t i = 0; i < g.count; ++i) actions.push_back({g.join_at, Action::Kind::kStart, g.name + "-" + std::to_string(i)});
  }
  for (const Fault& f : s.faults) {
    switch (f.kind) {
      case Fault::Kind::kKill: actions.push_back({f.at, Action::Kind::kKill, f.target}); break;
      case Fault::Kind::kStart: actions.push_back({f.at, Action::Kind::kStart, f.target}); break;
      case Fault::Kind::kLinkDown:
        actions.push_back({f.at, Action::Kind::kLinkDown, f.target});
        actions.push_back({f.at + f.length, Action::Kind::kLinkUp, f.target});
        break;
      case Fault::Kind::kSetLink: {
        auto g = std::find_if(s.groups.begin(), s.groups.end(), [&](const PeerGroup& x) { return x.name == f.target; });
        if (g == s.groups.end()) {
          actions.push_back({f.at, Action::Kind::kSetLink, f.target, f.link});
        } else {
          for (size_t i = 0; i < g->count; ++i) {
            actions.push_back({f.at, Action::Kind::kSetLink, g->name + "-" + std::to_string(i), f.link});
          }
        }
        break;
      }
      case Fault::Kind::kRandomKills: {
        auto g = std::find_if(s.groups.begin(), s.groups.end(), [&](const PeerGroup& x) { return x.name == f.target; });
        if (g == s.groups.end()) return error(Code::kInvalidArgument, s.source + ": faults: no group '" + f.target + "'");
        std::exponential_distribution<double> life(1.0 / std::chrono::duration<double>(f.mean_time).count());
        for (size_t i = 0; i < g->count; ++i) {
          const std::string name = g->name + "-" + std::to_string(i);
          Duration t = std::max(f.at, g->join_at);  // a peer fails only once it has started
          while (true) {
            t += std::chrono::duration_cast<Duration>(std::chrono::duration<double>(life(random)));
            if (t >= s.duration) break;
            actions.push_back({t, Action::Kind::kKill, name});
            t += f.length;
            if (t >= s.duration) break;
            actions.push_back({t, Action::Kind::kStart, name});
          }
        }
        break;
      }
      case Fault::Kind::kAlternate: {
        auto g = std::find_if(s.groups.begin(), s.groups.end(), [&](const PeerGroup& x) { return x.name == f.target; });
        if (g == s.groups.end()) return error(Code::kInvalidArgument, s.source + ": faults: no group '" + f.target + "'");
        for (size_t i = 0; i < g->count; ++i) {
          for (const auto& [at, on] : alternation(f, i, s.duration)) {
            actions.push_back({at, on ? Action::Kind::kStart : Action::Kind::kLeave, g->name + "-" + std::to_string(i)});
          }
        }
        break;
      }
    }
  }
  for (const Action& a : actions) {
    if (std::none_of(hosts.begin(), hosts.end(), [&](const HostRecord& h) { return h.name == a.target; })) {
      return error(Code::kInvalidArgument, s.source + ": faults: no process '" + a.target + "'");
    }
  }
  std::stable_sort(actions.begin(), actions.end(), [](const Action& a, const Action& b) { return a.at < b.at; });
  return actions;
}

// The endpoint a ready line names first.
std::optional<std::string> first_endpoint(const std::string& ready_line) {
  const auto j = nlohmann::json::parse(ready_line, nullptr, false);
  if (!j.is_object() || !j.contains("endpoints") || !j["endpoints"].is_array() || j["endpoints"].empty()) return std::nullopt;
  return j["endpoints"][0].get<std::string>();
}

// The planner's prediction (docs/planner.md) for the scenario's peers: the trainers and aux peers (compute
// 0 for aux), with their links, part-time groups by the peers in on average (mean_peers_in); what
// `dedloc-plan` prints for the same peers file. Nullopt, with `note` saying why, when it cannot make one.
std::optional<plan::StepPrediction> predict(const Scenario& s, const RecipeFacts& recipe, std::string& note) {
  if (recipe.parameters <= 0 || recipe.batch <= 0) {
    note = "no prediction: the recipe states no model.parameters or training.target_batch_size";
    return std::nullopt;
  }
  auto codec = parse_codec(recipe.codec);
  if (!codec) {
    note = "no prediction: " + codec.status().message();
    return std::nullopt;
  }
  plan::Collaboration collaboration;
  collaboration.batch = recipe.batch;
  collaboration.params = recipe.parameters;
  collaboration.codec = *codec;
  for (const PeerGroup& g : s.groups) {
    const size_t in = mean_peers_in(s, g);
    if (in != g.count) {
      note = "the " + std::to_string(g.count) + " part-time peers of '" + g.name + "' counted as " + std::to_string(in) +
             ", the share of their cycle they are in";
    }
    for (size_t i = 0; i < in; ++i) {
      // An unlimited lab link is, for the planner, faster than anything that matters: 10 Gbit/s.
      collaboration.peers.push_back({g.name + "-" + std::to_string(i), g.role == PeerRole::kAux ? 0.0 : g.compute,
                                     g.link.download > 0 ? g.link.download : 1.25e9,
                                     g.link.upload > 0 ? g.link.upload : 1.25e9, g.role == PeerRole::kClient || g.nat});
    }
  }
  auto planned = plan::plan_collaboration(collaboration);
  if (!planned) {
    note = "no prediction: " + planned.status().message();
    return std::nullopt;
  }
  return planned->prediction;
}

// A field of /proc/<pid>/status in MiB: VmRSS (resident now) or VmHWM (the most it ever was).
double status_mib(pid_t pid, std::string_view field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 && line[field.size()] == ':') {
      return std::stod(line.substr(field.size() + 1)) / 1024;
    }
  }
  return 0;
}

double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
    if (i == 15) break;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

Result<nlohmann::json> run_scenario(const Scenario& s, const RunnerOptions& options,
                                    const std::function<bool()>& interrupted) {
  auto say = [&](const std::string& what) {
    if (options.progress) options.progress(what);
  };
  auto recipe = read_recipe(s.recipe);
  if (!recipe) return recipe.status();

  // Hosts: the DHT bootstrap node, the relays, then every peer.
  RunRecord run;
  run.scenario = &s;
  run.hosts.push_back({"dht-0", -1, 0, s.infrastructure_link});
  for (size_t r = 0; r < s.relays; ++r) run.hosts.push_back({"relay-" + std::to_string(r), -1, 0, s.infrastructure_link});
  for (size_t g = 0; g < s.groups.size(); ++g) {
    for (size_t i = 0; i < s.groups[g].count; ++i) {
      run.hosts.push_back({s.groups[g].name + "-" + std::to_string(i), static_cast<int>(g), 0, s.groups[g].link});
    }
  }
  auto actions = timeline(s, run.hosts);
  if (!actions) return actions.status();

  say("making " + std::to_string(run.hosts.size()) + " lab hosts");
  auto network = LabNetwork::create(run.hosts.size(), {.mtu = s.mtu, .congestion_control = s.congestion_control});
  if (!network) return network.status();
  std::vector<HostLink> links;
  std::vector<bool> nat;
  for (const HostRecord& h : run.hosts) {
    links.push_back(host_link(h.link));
    nat.push_back(h.group >= 0 && s.groups[static_cast<size_t>(h.group)].nat);
  }
  RunningEmulator running(**network, links, nat, s.seed);
  Emulator& emulator = running.emulator();

  LabProcesses processes(options.work_dir);
  const std::string& tools = options.tools_dir;
  auto address = [&](size_t h) { return (*network)->host(h).address; };
  auto endpoint = [&](size_t h, int port) { return "tcp://" + address(h) + ":" + std::to_string(port); };

  // The infrastructure first: the bootstrap's address is in everyone's command line.
  run.hosts[0].process = processes.add("dht-0", (*network)->host(0).netns,
                                       {tools + "/dedloc-dht/dedloc-dht", "--plaintext", "serve", "--listen", endpoint(0, kDhtPort)});
  DEDLOC_RETURN_IF_ERROR(processes.start(0));
  auto ready = processes.wait_for_line(0, "\"ready\"", std::chrono::seconds(30));
  const auto bootstrap = ready ? first_endpoint(*ready) : std::nullopt;
  if (!bootstrap) return error(Code::kUnavailable, "the DHT bootstrap node did not start (see " + options.work_dir + "/dht-0.err)");
  for (size_t h = 1; h <= s.relays; ++h) {
    run.hosts[h].process = processes.add(run.hosts[h].name, (*network)->host(h).netns,
                                         {tools + "/dedloc-relay/dedloc-relay", "--plaintext", "serve", "--listen",
                                          endpoint(h, kRelayPort), "--initial-peers", *bootstrap});
    DEDLOC_RETURN_IF_ERROR(processes.start(run.hosts[h].process));
    if (!processes.wait_for_line(run.hosts[h].process, "\"ready\"", std::chrono::seconds(30))) {
      return error(Code::kUnavailable, run.hosts[h].name + " did not start (see " + options.work_dir + "/" + run.hosts[h].name + ".err)");
    }
  }
  for (size_t h = 1 + s.relays; h < run.hosts.size(); ++h) {
    const PeerGroup& g = s.groups[static_cast<size_t>(run.hosts[h].group)];
    const bool client = g.role == PeerRole::kClient || g.nat;
    const std::string bandwidth = mbit(std::min(g.link.upload > 0 ? g.link.upload : 125e6, g.link.download > 0 ? g.link.download : 125e6));
    // Its key in a file, as a volunteer's machine keeps it: a peer restarted by a fault comes back as itself.
    const std::string identity = options.work_dir + "/" + run.hosts[h].name + ".key";
    std::vector<std::string> argv;
    if (g.role == PeerRole::kAux) {
      argv = {tools + "/dedloc-avg/dedloc-avg", "--plaintext", "--identity", identity, "aux", "--run", recipe->run_id, "--initial-peers", *bootstrap,
              "--bandwidth", bandwidth, "--target-group-size", std::to_string(recipe->group_size),
              "--matchmaking-time", std::to_string(recipe->matchmaking_time), "--shares", recipe->shares};
      if (client) argv.push_back("--client-mode");
      else argv.insert(argv.end(), {"--listen", endpoint(h, kAuxPort)});
    } else {
      argv = {tools + "/dedloc-train/dedloc-train", "--plaintext", "--json", "--identity", identity, "--recipe", s.recipe, "--initial-peers", *bootstrap,
              "--compute-rate", std::to_string(g.compute), "--data-seed", std::to_string(h), "--bandwidth", bandwidth,
              "--threads", "1", "--params-hash"};  // the report's one_model
      if (client) argv.push_back("--client-mode");
      else argv.insert(argv.end(), {"--listen", endpoint(h, kTrainDhtPort), "--avg-listen", endpoint(h, kTrainAvgPort)});
    }
    if (!options.peer_log_level.empty()) argv.insert(argv.begin() + 1, {"--log-level", options.peer_log_level});
    run.hosts[h].process = processes.add(run.hosts[h].name, (*network)->host(h).netns, argv);
  }
  if (const auto prediction = predict(s, *recipe, run.prediction_note)) {
    run.predicted_steps_per_second = prediction->steps_per_second;
    if (recipe->mode == "synchronous") run.predicted_synchronous_steps_per_second = prediction->synchronous_steps_per_second();
  }

  // Which lab host a name is.
  auto host_named = [&](const std::string& name) {
    return static_cast<size_t>(std::find_if(run.hosts.begin(), run.hosts.end(), [&](const HostRecord& h) { return h.name == name; }) -
                               run.hosts.begin());
  };
  run.start = SystemClock::instance().now();
  say("starting " + std::to_string(s.peer_count()) + " peers");
  for (size_t h = 1 + s.relays; h < run.hosts.size(); ++h) {
    if (s.groups[static_cast<size_t>(run.hosts[h].group)].join_at > Duration::zero()) continue;  // started on time below
    DEDLOC_RETURN_IF_ERROR(processes.start(run.hosts[h].process));
  }

  size_t next_action = 0;
  bool warmed = false;
  TimePoint next_report = run.start + std::chrono::seconds(30);
  // Each host's process and its CPU time when the measured window opened: a process that was restarted
  // in the window (another pid at the end) has no CPU share to report.
  std::vector<std::pair<pid_t, double>> cpu_at_warmup(run.hosts.size(), {-1, 0.0});
  while (true) {
    const TimePoint now = SystemClock::instance().now();
    if (interrupted && interrupted()) return error(Code::kCancelled, "interrupted");
    if (!warmed && now >= run.start + s.warmup) {
      warmed = true;
      run.warm = now;
      run.at_warmup = emulator.stats();
      for (size_t h = 0; h < run.hosts.size(); ++h) {
        if (const pid_t pid = processes.pid(run.hosts[h].process); pid > 0) cpu_at_warmup[h] = {pid, cpu_seconds(pid)};
      }
    }
    if (now >= run.start + s.duration) break;
    while (next_action < actions->size() && now >= run.start + (*actions)[next_action].at) {
      const Action& a = (*actions)[next_action++];
      const size_t h = host_named(a.target);
      switch (a.kind) {
        case Action::Kind::kKill: processes.kill(run.hosts[h].process); break;
        case Action::Kind::kLeave: processes.interrupt(run.hosts[h].process); break;
        case Action::Kind::kStart: (void)processes.start(run.hosts[h].process); break;
        case Action::Kind::kLinkDown: emulator.set_link_up(h, false); break;
        case Action::Kind::kLinkUp: emulator.set_link_up(h, true); break;
        case Action::Kind::kSetLink: emulator.set_link(h, host_link(a.link)); break;
      }
      say(std::string(a.kind == Action::Kind::kKill ? "SIGKILL " : a.kind == Action::Kind::kLeave ? "SIGINT " :
                      a.kind == Action::Kind::kStart ? "start " : a.kind == Action::Kind::kLinkDown ? "link down " :
                      a.kind == Action::Kind::kSetLink ? "new link " : "link up ") + a.target);
    }
    if (now >= next_report) {
      next_report += std::chrono::seconds(30);
      say(std::to_string(static_cast<int>(std::chrono::duration<double>(now - run.start).count())) + " s: " +
          std::to_string(processes.line_count()) + " output lines so far");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  run.end = SystemClock::instance().now();
  run.at_end = emulator.stats();
  for (size_t h = 0; h < run.hosts.size(); ++h) {
    const pid_t pid = processes.pid(run.hosts[h].process);
    if (pid <= 0) continue;
    run.hosts[h].rss_mib = status_mib(pid, "VmRSS");
    run.hosts[h].peak_rss_mib = status_mib(pid, "VmHWM");
    if (cpu_at_warmup[h].first == pid) run.hosts[h].cpu_seconds = cpu_seconds(pid) - cpu_at_warmup[h].second;
  }
  say("stopping");
  processes.stop_all(std::chrono::seconds(10));
  run.lines = processes.lines();
  for (size_t p = 0; p < processes.size(); ++p) run.starts.push_back(processes.starts(p));
  {
    std::ofstream out(options.work_dir + "/lines.jsonl");
    for (const OutputLine& line : run.lines) {
      out << std::chrono::duration<double>(line.at - run.start).count() << " " << processes.name(line.process) << " "
          << line.text << "\n";
    }
  }
  return build_report(run);
}

}  // namespace dedloc::lab
