// Engines that are still alive when the process exits (leaked, or owned by something that outlives
// main) must not call the driver once the driver tears itself down at exit. The first engine registers
// an atexit handler after the driver's cuInit (so, at exit, it runs before the driver's own teardown);
// the handler stops every live engine's threads, and an engine stopped this way later releases nothing
// through the driver.
#pragma once

#include <functional>

namespace ferry::detail {

// Registers `stop` to be run at process exit, before the driver's teardown. Returns a ticket for
// forget_at_exit. Call after the driver is initialised.
int stop_at_exit(std::function<void()> stop);
// An engine that ends normally takes its stop back.
void forget_at_exit(int ticket);

}  // namespace ferry::detail
