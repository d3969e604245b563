// The monitor's history of a run: one row per change the dashboard charts (a new global step, or peers
// joining or leaving), appended to history.csv (for gnuplot and spreadsheets: `make -f Makefile.recipes plot`)
// and history.jsonl (for programs) in the history folder, and kept in memory for the dashboard.
//
// Columns (both files, in this order): time (unix seconds), epoch, peers, trainers, clients, aux,
// samples_per_second, loss (empty / null before any trainer reported one), eta_seconds (likewise).
//
// Appends only: a monitor killed mid-line leaves at most one torn last line, which the next one skips when
// it reloads history.jsonl (and starts on a fresh line). A restarted monitor goes on from the rows it finds.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "dedloc/core/status.hpp"
#include "dedloc/monitor/swarm_view.hpp"

namespace dedloc::monitor {

struct HistoryRow {
  double time = 0;
  std::uint64_t epoch = 0;
  size_t peers = 0, trainers = 0, clients = 0, aux = 0;
  double samples_per_second = 0;
  std::optional<double> loss;
  std::optional<double> eta_seconds;

  static HistoryRow of(const SwarmView& view);
  bool operator==(const HistoryRow&) const = default;
};

class History {
 public:
  // Rows live in memory only (no folder), up to `keep` of them.
  explicit History(size_t keep = 10000) : keep_(keep) {}
  // Creates `dir` if needed and reloads the rows history.jsonl already holds. kIo naming the path when the
  // folder or files cannot be made.
  static Result<History> open(const std::string& dir, size_t keep = 10000);

  // Appends a row for `view` when its epoch or peer count differs from the last row's; returns whether it
  // did. kIo naming the file when writing fails (the row is still kept in memory).
  Result<bool> record(const SwarmView& view);

  const std::deque<HistoryRow>& rows() const { return rows_; }
  // The rows as a JSON array of objects (the dashboard's /api/history).
  std::string to_json() const;

 private:
  Status append_to_files(const HistoryRow& row);

  size_t keep_;
  std::string dir_;
  std::deque<HistoryRow> rows_;
};

}  // namespace dedloc::monitor
