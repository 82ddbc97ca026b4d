// ferry::sim::current_usage: a snapshot of everything the simulated driver holds.
#include "sim/contexts.hpp"
#include "sim/control.hpp"
#include "sim/events.hpp"
#include "sim/memory_registry.hpp"
#include "sim/modules.hpp"
#include "sim/streams.hpp"

namespace ferry::sim {

usage current_usage() {
  usage totals;
  detail::add_memory_usage(totals);
  totals.streams = detail::user_stream_count();
  totals.events = detail::event_count();
  totals.contexts = detail::held_context_count();
  totals.modules = detail::module_count();
  return totals;
}

}  // namespace ferry::sim
