#include "dedloc/train/schedule.hpp"

#include <cmath>
#include <numbers>
#include <sstream>

namespace dedloc::train {

namespace {

bool decays(const std::string& kind) { return kind == "linear" || kind == "cosine"; }

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status bad(const std::string& key, const std::string& what) {
  return error(Code::kInvalidArgument, "schedule." + key + " " + what);
}

}  // namespace

void read_schedule_options(ConfigReader& section, ScheduleOptions& options) {
  section.read("kind", options.kind);
  section.read("lr", options.lr);
  section.read("warmup_epochs", options.warmup_epochs);
  bool known = options.kind == "constant" || decays(options.kind);
  // An unknown kind reads every key, so that check_schedule_options reports the kind, not a key.
  if (decays(options.kind) || !known) {
    section.read("total_epochs", options.total_epochs);
    section.read("final_lr", options.final_lr);
  }
}

Status check_schedule_options(const ScheduleOptions& options) {
  if (options.kind != "constant" && !decays(options.kind))
    return bad("kind", "must be constant, linear or cosine (got '" + options.kind + "')");
  if (!std::isfinite(options.lr) || options.lr <= 0)
    return bad("lr", "must be a number > 0 (got " + number(options.lr) + ")");
  if (!decays(options.kind)) return Status::ok();
  if (options.total_epochs <= options.warmup_epochs)
    return bad("total_epochs", "must be greater than warmup_epochs (" + std::to_string(options.warmup_epochs) +
                                   ") for a " + options.kind + " schedule (got " +
                                   std::to_string(options.total_epochs) + ")");
  if (!std::isfinite(options.final_lr) || options.final_lr < 0 || options.final_lr > options.lr)
    return bad("final_lr", "must be between 0 and lr (" + number(options.lr) + ") (got " +
                               number(options.final_lr) + ")");
  return Status::ok();
}

double learning_rate(const ScheduleOptions& options, std::uint64_t epoch) {
  const std::uint64_t warmup = options.warmup_epochs;
  if (epoch < warmup) return options.lr * static_cast<double>(epoch) / static_cast<double>(warmup);
  if (!decays(options.kind)) return options.lr;
  const std::uint64_t total = options.total_epochs;
  if (epoch >= total) return options.final_lr;
  // Integer differences first: exact for any epoch count, before the one rounding to double.
  const double span = static_cast<double>(total - warmup);
  const double range = options.lr - options.final_lr;
  if (options.kind == "linear") return options.final_lr + range * static_cast<double>(total - epoch) / span;
  const double progress = static_cast<double>(epoch - warmup) / span;  // in [0, 1)
  return options.final_lr + range * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace dedloc::train
