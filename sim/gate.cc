// ferry::sim::gate: a latch in a stream's FIFO.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "sim/contexts.hpp"
#include "sim/control.hpp"
#include "sim/streams.hpp"

namespace ferry::sim {

struct gate::state {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
};

gate::gate(CUstream stream) : state_(std::make_shared<state>()) {
  std::shared_ptr<detail::stream> s;
  if (detail::resolve_stream(stream, s) != CUDA_SUCCESS) {
    throw std::invalid_argument("ferry::sim::gate: the sim knows no such stream");
  }
  detail::context& ctx = s->owner();
  // A context poisoned while the gate is closed discards the stream's work, the gate included.
  auto hold = [latch = state_, &ctx] {
    std::unique_lock lock(latch->mutex);
    while (!latch->open && !ctx.poisoned()) latch->opened.wait_for(lock, std::chrono::milliseconds(1));
  };
  if (detail::enqueue(*s, {std::move(hold)}) != CUDA_SUCCESS) {
    throw std::invalid_argument("ferry::sim::gate: the stream's context is destroyed");
  }
}

gate::~gate() { open(); }

void gate::open() noexcept {
  {
    std::lock_guard lock(state_->mutex);
    state_->open = true;
  }
  state_->opened.notify_all();
}

}  // namespace ferry::sim
