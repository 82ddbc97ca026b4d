#include "engine/async/process_exit.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
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

std::atomic<bool> exiting{false};

// Destroyed when the main thread's thread-locals are, which exit() does first.
struct main_thread_sentinel {
  ~main_thread_sentinel() { exiting.store(true, std::memory_order_release); }
};

void stop_all() {
  exiting.store(true, std::memory_order_release);
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

bool process_exiting() noexcept { return exiting.load(std::memory_order_acquire); }

void watch_main_thread_exit() {
  if (::syscall(SYS_gettid) != ::getpid()) return;
  thread_local main_thread_sentinel sentinel;
  (void)sentinel;
}

void forget_at_exit(int ticket) {
  std::lock_guard lock(registry().mutex);
  registry().stops.erase(ticket);
}

}  // namespace ferry::detail
