// Files written so that a crash never leaves a partial file under the final name.
#pragma once

#include <string>
#include <string_view>
#include <sys/types.h>

#include "dedloc/core/status.hpp"

namespace dedloc {

// Writes `contents` to `path` atomically: a temporary file in the same directory, fsync, rename, fsync of
// the directory. `mode` applies from creation (0600 for secrets: never briefly world-readable).
Status write_file_atomically(const std::string& path, std::string_view contents, mode_t mode = 0644);

// Puts the folder `staged` at `dir` in one step: renamed there when `dir` does not exist, otherwise
// exchanged with the folder there (renameat2 RENAME_EXCHANGE) and the old one removed, so a reader of `dir`
// sees the old folder or the new one, never a mix. Where the filesystem cannot exchange, the old folder is
// renamed aside first (for a moment there is no `dir`, never a half-written one). Both must be on one
// filesystem (siblings are). The caller decides whether what is at `dir` may be replaced.
Status replace_directory(const std::string& staged, const std::string& dir);

// A path as a configuration file names it: a relative one is relative to the folder of `config_file`, so that
// a recipe or a scenario and the files beside it can be copied elsewhere together. Absolute and empty paths
// are returned as they are.
std::string path_beside(const std::string& config_file, const std::string& path);

// Reads a whole file, refusing files larger than `max_bytes`.
Result<std::string> read_file(const std::string& path, size_t max_bytes = 64u << 20);

}  // namespace dedloc
