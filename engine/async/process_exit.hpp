// Engines that are still alive when the process exits (leaked, or owned by something that outlives
// main) must not call the driver once the driver tears itself down at exit. The first engine registers
// an atexit handler after the driver's cuInit (so, at exit, it runs before the driver's own teardown);
// the handler stops every live engine's threads, and an engine stopped this way later releases nothing
// through the driver.
#pragma once

#include <functional>
#include <utility>

namespace ferry::detail {

// Registers `stop` to be run at process exit, before the driver's teardown. Returns a ticket for
// forget_at_exit. Call after the driver is initialised.
int stop_at_exit(std::function<void()> stop);
// An engine that ends normally takes its stop back.
void forget_at_exit(int ticket);

// A stop registered with stop_at_exit, taken back when its owner goes: an engine that ends normally, or
// one whose constructor throws after registering (whose stop would otherwise name an engine that is gone).
class exit_registration {
 public:
  exit_registration() = default;
  explicit exit_registration(std::function<void()> stop) : ticket_(stop_at_exit(std::move(stop))) {}
  exit_registration(exit_registration&& other) noexcept : ticket_(std::exchange(other.ticket_, -1)) {}
  exit_registration& operator=(exit_registration&& other) noexcept {
    if (this != &other) {
      reset();
      ticket_ = std::exchange(other.ticket_, -1);
    }
    return *this;
  }
  exit_registration(const exit_registration&) = delete;
  exit_registration& operator=(const exit_registration&) = delete;
  ~exit_registration() { reset(); }

  void reset() noexcept {
    if (ticket_ >= 0) forget_at_exit(std::exchange(ticket_, -1));
  }

 private:
  int ticket_ = -1;
};

// True once the process has begun to exit: the main thread's thread-local objects are being destroyed
// (exit() does that before it runs atexit handlers and static destructors) or the atexit handler ran.
// An engine destroyed then (a static one) stops its threads and calls the driver no more.
bool process_exiting() noexcept;
// Arms the main-thread sentinel behind process_exiting(); a no-op on other threads.
void watch_main_thread_exit();

}  // namespace ferry::detail
