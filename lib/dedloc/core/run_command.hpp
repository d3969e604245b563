// Running a short external command (ip, tc, nsenter) and waiting for it, with a deadline.
#pragma once

#include <string>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc {

// Runs a command (argv[0] looked up in PATH) and waits for it, at most `timeout`: kUnavailable when it
// cannot start or fails, kTimeout (and killed) when it takes too long. Its output goes where ours goes.
Status run_command(const std::vector<std::string>& args, Duration timeout = std::chrono::seconds(20));

}  // namespace dedloc
