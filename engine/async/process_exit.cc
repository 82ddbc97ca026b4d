#include "engine/async/process_exit.hpp"

#include <cstdlib>
#include <map>
#include <mutex>

namespace ferry::detail {
namespace {

struct exit_registry {
  std::mutex mutex;
  std::map<int, std::function<void()>> stops;
  int next_ticket = 0;
};

// Leaked: it is used by the atexit handler, after static destructors may have run.
exit_registry& registry() {
  static exit_registry* const instance = new exit_registry();
  return *instance;
}

void stop_all() {
  std::map<int, std::function<void()>> stops;
  {
    std::lock_guard lock(registry().mutex);
    stops.swap(registry().stops);
  }
  for (auto& [ticket, stop] : stops) stop();
}

}  // namespace

int stop_at_exit(std::function<void()> stop) {
  static const bool registered = [] { return std::atexit(stop_all) == 0; }();
  (void)registered;
  std::lock_guard lock(registry().mutex);
  const int ticket = registry().next_ticket++;
  registry().stops.emplace(ticket, std::move(stop));
  return ticket;
}

void forget_at_exit(int ticket) {
  std::lock_guard lock(registry().mutex);
  registry().stops.erase(ticket);
}

}  // namespace ferry::detail
