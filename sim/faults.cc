// Fault injection: the controls of control.hpp and the checks the entry points make.
#include "sim/faults.hpp"

#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/contexts.hpp"
#include "sim/control.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

struct armed_call {
  std::string entry_point;
  unsigned calls_left;  // this many more calls, then the failing one
  CUresult status;
};

struct fault_state {
  std::mutex mutex;
  std::vector<armed_call> armed;
  std::size_t budget = std::numeric_limits<std::size_t>::max();
  std::size_t spent = 0;
};

fault_state& state() {
  static fault_state* const instance = new fault_state();
  return *instance;
}

// Every entry point asks on every call, so the common case (nothing armed) must not take the lock.
std::atomic<bool> any_armed{false};

}  // namespace

std::optional<CUresult> injected_failure(std::string_view entry_point) {
  if (!any_armed.load(std::memory_order_acquire)) return std::nullopt;
  fault_state& f = state();
  std::lock_guard lock(f.mutex);
  for (auto it = f.armed.begin(); it != f.armed.end(); ++it) {
    if (it->entry_point != entry_point) continue;
    if (it->calls_left-- != 0) continue;
    const CUresult status = it->status;
    f.armed.erase(it);
    any_armed.store(!f.armed.empty(), std::memory_order_release);
    return status;
  }
  return std::nullopt;
}

bool charge_allocation(std::size_t bytes) {
  fault_state& f = state();
  std::lock_guard lock(f.mutex);
  if (bytes > f.budget - f.spent) return false;
  f.spent += bytes;
  return true;
}

void refund_allocation(std::size_t bytes) {
  fault_state& f = state();
  std::lock_guard lock(f.mutex);
  f.spent -= bytes < f.spent ? bytes : f.spent;
}

}  // namespace ferry::sim::detail

namespace ferry::sim {

void fail_call(std::string_view entry_point, unsigned nth, CUresult status) {
  if (nth == 0) throw std::invalid_argument("ferry::sim::fail_call: nth counts from 1");
  detail::fault_state& f = detail::state();
  std::lock_guard lock(f.mutex);
  f.armed.push_back({std::string(entry_point), nth - 1, status});
  detail::any_armed.store(true, std::memory_order_release);
}

void out_of_memory_after(std::size_t bytes) {
  detail::fault_state& f = detail::state();
  std::lock_guard lock(f.mutex);
  f.budget = bytes;
  f.spent = 0;
}

void fail_stream(CUstream stream, CUresult status) {
  std::shared_ptr<detail::stream> s;
  if (detail::resolve_stream(stream, s) != CUDA_SUCCESS) {
    throw std::invalid_argument("ferry::sim::fail_stream: the sim knows no such stream");
  }
  s->fail_next(status);
}

void reset_faults() {
  {
    detail::fault_state& f = detail::state();
    std::lock_guard lock(f.mutex);
    f.armed.clear();
    f.budget = std::numeric_limits<std::size_t>::max();
    f.spent = 0;
    detail::any_armed.store(false, std::memory_order_release);
  }
  for (detail::context* ctx : detail::live_contexts()) {
    const bool poisoned = ctx->poisoned();
    for (const std::shared_ptr<detail::stream>& s : ctx->streams()) {
      s->clear_failure();
      // Work queued before the reset is discarded for certain, not run by a worker that was slow to
      // get to it. Poisoned streams drain quickly: every wait in them gives up on a sticky error.
      if (poisoned) s->wait_idle();
    }
    ctx->clear_sticky();
  }
}

}  // namespace ferry::sim
