// What dies with a context, as on the driver: its queued work (run, or discarded when the context is
// poisoned), its streams and their workers, events, modules, and all memory allocated or registered in it.
#include "sim/contexts.hpp"
#include "sim/events.hpp"
#include "sim/memory_registry.hpp"
#include "sim/modules.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {

void tear_down(context& ctx, std::vector<std::shared_ptr<stream>> streams) {
  for (const std::shared_ptr<stream>& s : streams) s->close();
  forget_user_streams_of(&ctx);
  for (const std::shared_ptr<stream>& s : streams) s->join();
  forget_events_of(&ctx);
  forget_modules_of(&ctx);
  release_memory_of(&ctx);
  for (context* other : live_contexts()) other->forget_peer(&ctx);
  ctx.clear_sticky();
}

}  // namespace ferry::sim::detail
