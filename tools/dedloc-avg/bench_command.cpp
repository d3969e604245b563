// `dedloc-avg bench`: times butterfly all-reduce rounds among N local peer processes
// (lib/dedloc/avg/bench/all_reduce_bench.hpp says how, and what the figures mean).
//
//   dedloc-avg bench --peers 4 --size 64MiB [--codec fp16] [--rounds 5] [--window 2] [--part-kib 512]
//                    [--bandwidths 1Gbit,100Mbit,100Mbit,100Mbit [--uniform] [--emulate-links]] [--json]
//
// Without --emulate-links (root only: lab hosts behind the lab's link emulator, docs/lab.md), --bandwidths
// only changes the shares (plan::plan_group_shares). --lab-hosts runs the peers in a lab made by
// `dedloc-lab up` instead (bench/lab/run.sh, which runs gloo in the same hosts).
//
// Exit codes: 0 ok; 1 wrong results, a peer failed or died; 2 usage; 5 a deadline passed; 130 interrupted.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dedloc/avg/bench/all_reduce_bench.hpp"
#include "dedloc/cli/signals.hpp"

namespace dedloc::avg_tool {
namespace {

constexpr std::string_view kTool = "dedloc-avg bench";

std::string format_bytes(std::uint64_t bytes) {
  std::ostringstream out;
  if (bytes % (1u << 30) == 0) out << bytes / (1u << 30) << " GiB";
  else if (bytes % (1u << 20) == 0) out << bytes / (1u << 20) << " MiB";
  else if (bytes % 1024 == 0) out << bytes / 1024 << " KiB";
  else out << bytes << " B";
  return out.str();
}

class BenchCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("bench", "time butterfly all-reduce rounds among N local peer processes");
    sub->add_option("--peers", o_.peers, "peer processes (2-64)")->capture_default_str();
    sub->add_option("--size", o_.size, "vector size in bytes of float32: 64MiB, 256MiB, 1GiB, 100MB")->capture_default_str();
    sub->add_option("--codec", o_.codec, "part compression: none, fp16, scaled-fp16, uint8, blockwise8")->capture_default_str();
    sub->add_option("--rounds", o_.rounds, "timed rounds (after one warm-up round)")->capture_default_str();
    sub->add_option("--window", o_.window, "parts in flight to each reducer, at least")->capture_default_str();
    sub->add_option("--max-window", o_.max_window,
                    "parts in flight to each reducer, at most (the window grows with the measured bandwidth-delay "
                    "product); = --window fixes it")
        ->capture_default_str();
    sub->add_option("--max-in-flight", o_.max_in_flight, "parts in flight to all reducers together (0: no cap)")
        ->capture_default_str();
    sub->add_option("--part-kib", o_.part_kib,
                    "KiB of float32 per part, the part grid training uses for that size (a codec sends less; cut finer "
                    "where the shares are small, as a group's leader cuts it)")
        ->capture_default_str();
    sub->add_option("--bandwidths", o_.bandwidths, "each peer's bandwidth (1Gbit,100Mbit,...): shares from the planner")
        ->delimiter(',');
    sub->add_flag("--uniform", o_.uniform, "equal shares even with --bandwidths (to compare with the planner's)");
    sub->add_flag("--emulate-links", o_.emulate_links,
                  "each peer behind an emulated link of its --bandwidths rate both ways (the lab's emulator, "
                  "docs/lab.md; root)");
    sub->add_option("--rtt", o_.rtt, "with --emulate-links: round trip between two peers, e.g. 100ms")
        ->capture_default_str();
    sub->add_option("--loss", o_.loss, "with --emulate-links: loss of each packet a peer sends, e.g. 0.5%")
        ->capture_default_str();
    sub->add_option("--mtu", o_.mtu,
                    "with --emulate-links: the lab hosts' MTU in bytes; 1500 is the internet's, the default keeps "
                    "the emulator's CPU low but makes each packet long on a slow link (docs/lab.md)")
        ->capture_default_str();
    sub->add_option("--congestion-control", o_.congestion_control,
                    "with --emulate-links: the lab hosts' TCP congestion control (cubic, the internet's usual one, "
                    "whatever this machine's; reno, bbr: docs/lab.md)")
        ->capture_default_str();
    sub->add_option("--lab-hosts", o_.lab_hosts,
                    "run peer i in the i-th lab host of a running `dedloc-lab up`, given as NETNS@ADDRESS,... (root)")
        ->delimiter(',');
    sub->add_option("--timeout", o_.timeout_seconds, "seconds one round (and start-up) may take")->capture_default_str();
    return sub;
  }

  int run(const cli::CommonFlags& common) override {
    o_.encrypted = !common.plaintext;
    o_.name = std::string(kTool);
    auto plan = avg::bench::plan_all_reduce_bench(o_);
    if (!plan) return cli::report_failure(kTool, plan.status());
    cli::install_shutdown_handlers();  // also ignores SIGPIPE: a dead peer's pipe is an error, not a signal
    auto report = avg::bench::run_all_reduce_bench(o_, *plan, [] { return cli::shutdown_requested(); });
    if (!report) {
      std::cerr << kTool << ": error: " << report.status().to_string() << "\n";
      if (report.status().code() == Code::kTimeout) return cli::kExitTimeout;
      return report.status().code() == Code::kCancelled ? cli::kExitInterrupted : cli::kExitFailure;
    }
    print(common, *plan, *report);
    if (report->wrong) {
      std::cerr << kTool << ": wrong results: " << report->wrong_why << "\n";
      return cli::kExitFailure;
    }
    return cli::kExitOk;
  }

 private:
  void print(const cli::CommonFlags& common, const avg::bench::BenchPlan& plan,
             const avg::bench::BenchReport& report) const {
    std::vector<double> times, cpu;
    std::vector<std::vector<double>> per_peer;
    for (const auto& r : report.rounds) {
      times.push_back(r.seconds);
      cpu.push_back(r.cpu_seconds);
      per_peer.push_back(r.peer_seconds);
    }
    if (common.json) {
      nlohmann::json j;
      j["impl"] = "dedloc";
      j["peers"] = o_.peers;
      j["bytes"] = plan.bytes;
      j["codec"] = avg::codec_name(plan.codec);
      j["rounds"] = o_.rounds;
      j["window"] = o_.window;
      j["max_window"] = o_.max_window;
      j["max_in_flight"] = o_.max_in_flight;
      j["part_kib"] = o_.part_kib;
      j["part_elements"] = plan.part_elements;
      j["shares"] = plan.planned ? "planner" : "uniform";
      j["counts"] = plan.counts;
      j["emulated_links"] = o_.emulate_links;
      j["rtt_s"] = std::chrono::duration<double>(plan.rtt).count();
      j["loss"] = plan.loss;
      if (o_.emulate_links) j["mtu"] = plan.mtu;
      if (o_.emulate_links) j["congestion_control"] = plan.congestion_control;
      j["encrypted"] = !common.plaintext;
      j["times_s"] = times;
      j["peer_times_s"] = per_peer;
      j["median_s"] = report.median_seconds;
      j["cpu_s"] = cpu;
      j["median_cpu_s"] = report.median_cpu_seconds;
      j["algbw_gbps"] = report.algbw_gbps;
      j["busbw_gbps"] = report.busbw_gbps;
      j["max_rel_error"] = report.max_rel_error;
      j["tolerance_rel"] = report.tolerance_rel;
      j["ok"] = !report.wrong;
      std::cout << j.dump() << std::endl;
      return;
    }
    const double n = static_cast<double>(o_.peers);
    std::printf("dedloc all-reduce: %zu peers, %s float32, codec %s, parts of %zu KiB, window %zu, %s shares, %s%s\n",
                o_.peers, format_bytes(plan.bytes).c_str(), std::string(avg::codec_name(plan.codec)).c_str(), o_.part_kib,
                o_.window, plan.planned ? "planner" : "uniform", common.plaintext ? "plaintext" : "CURVE",
                o_.emulate_links ? ", emulated links" : "");
    std::printf("%6s %10s %12s %12s %8s\n", "round", "time_s", "algbw_GB/s", "busbw_GB/s", "cpu_s");
    for (size_t r = 0; r < report.rounds.size(); ++r) {
      const double a = static_cast<double>(plan.bytes) / report.rounds[r].seconds / 1e9;
      std::printf("%6zu %10.4f %12.3f %12.3f %8.3f\n", r + 1, report.rounds[r].seconds, a, a * 2 * (n - 1) / n,
                  report.rounds[r].cpu_seconds);
    }
    std::printf("median %.4f s, algbw %.3f GB/s, busbw %.3f GB/s, cpu %.3f s; max relative error %.3g (tolerance %.3g)\n",
                report.median_seconds, report.algbw_gbps, report.busbw_gbps, report.median_cpu_seconds,
                report.max_rel_error, report.tolerance_rel);
    std::fflush(stdout);
  }

  avg::bench::BenchOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace dedloc::avg_tool
