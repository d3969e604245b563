// The programs a lab scenario runs, each inside its lab host: started with `ip netns exec`, their stdout
// read line by line and timestamped on arrival (the report's clock), their stderr kept in a file, killed
// with SIGKILL when a fault says so, and all stopped (SIGINT, then SIGKILL after a grace) at the end.
#pragma once

#include <sys/types.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::lab {

struct OutputLine {
  TimePoint at;
  size_t process = 0;  // index into LabProcesses
  std::string text;
};

class LabProcesses {
 public:
  // `log_dir`: where each process's stderr goes (NAME.err, appended across restarts).
  explicit LabProcesses(std::string log_dir);
  // Stops everything still running (SIGKILL) and the reader.
  ~LabProcesses();
  LabProcesses(const LabProcesses&) = delete;
  LabProcesses& operator=(const LabProcesses&) = delete;

  // Declares a process (not started): its name, its host's namespace, and its command line.
  size_t add(std::string name, std::string netns, std::vector<std::string> argv);
  std::optional<size_t> find(const std::string& name) const;
  const std::string& name(size_t i) const { return procs_[i].name; }
  size_t size() const { return procs_.size(); }

  // Starts (or restarts) process i. kUnavailable if it cannot be spawned.
  Status start(size_t i);
  // SIGKILL, at once; the process is reaped by the reader. No-op when not running.
  void kill(size_t i);
  // SIGINT: asks process i to leave as its user would stop it (it exits the way its own shutdown handling
  // decides; the reader reaps it). No-op when not running.
  void interrupt(size_t i);
  bool running(size_t i) const;
  pid_t pid(size_t i) const;  // -1 when not running
  // Every time process i was started, in order.
  std::vector<TimePoint> starts(size_t i) const;

  // Every line so far, in order of arrival (a copy), and how many there are.
  std::vector<OutputLine> lines() const;
  size_t line_count() const;
  // Waits (up to `timeout`) for a line from process i that contains `needle`; returns it.
  std::optional<std::string> wait_for_line(size_t i, const std::string& needle, Duration timeout) const;

  // SIGINT to all, SIGKILL to those still running after `grace`.
  void stop_all(Duration grace);

 private:
  struct Proc {
    std::string name, netns;
    std::vector<std::string> argv;
    pid_t pid = -1;
    int out_fd = -1;
    std::string partial;
    std::vector<TimePoint> starts;
  };
  void read_loop();
  void reap_locked();

  std::string log_dir_;
  mutable std::mutex mutex_;
  std::vector<Proc> procs_;
  std::vector<OutputLine> lines_;
  bool stopping_ = false;
  std::thread reader_;
};

}  // namespace dedloc::lab
