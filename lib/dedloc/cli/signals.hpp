// SIGINT/SIGTERM handling for daemons: the first signal asks for a clean shutdown; the loop polls
// shutdown_requested() or sleeps in wait_for_shutdown() with a deadline.
#pragma once

#include "dedloc/core/clock.hpp"

namespace dedloc::cli {

void install_shutdown_handlers();
bool shutdown_requested();
// Sleeps until a shutdown signal or `timeout`; true when shutdown was requested.
bool wait_for_shutdown(Duration timeout);

}  // namespace dedloc::cli
