// An advisory lock on a file (flock), for tools that must not run twice over the same files (a cron job
// that overlaps the previous one: dedloc-avg export).
#pragma once

#include <string>

#include "dedloc/core/status.hpp"

namespace dedloc {

class FileLock {
 public:
  // Takes an exclusive lock on `path` (created if missing) without waiting. kRefused naming the path when
  // another process holds it; kIo when the file cannot be opened. The kernel releases the lock when the
  // process dies, SIGKILL included: a killed run never leaves a stale lock behind.
  static Result<FileLock> try_acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace dedloc
