// SIGINT/SIGTERM handling for daemons: the first signal asks for a clean shutdown; the loop polls
// shutdown_requested() or sleeps in wait_for_shutdown() with a deadline. A tool whose clean shutdown
// takes a while (a trainer finishing the round its group waits for) ends it early on a second signal:
// shutdown_urgent().
#pragma once

#include "dedloc/core/clock.hpp"

namespace dedloc::cli {

void install_shutdown_handlers();
bool shutdown_requested();
// A second signal came: leave now, even work that others wait for.
bool shutdown_urgent();
// Sleeps until a shutdown signal or `timeout`; true when shutdown was requested.
bool wait_for_shutdown(Duration timeout);

}  // namespace dedloc::cli
