#include "engine/memory/own_ranges.hpp"

#include <array>
#include <atomic>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "engine/driver/context_releases.hpp"

namespace ferry::detail {
namespace {

struct record {
  std::shared_mutex mutex;
  std::map<std::uintptr_t, known_range> ranges;  // by base
  // Raised each time a range is forgotten: the threads' caches hold only ranges found since the value
  // they saw.
  std::atomic<std::uint64_t> generation{0};
  // contexts_released() when the ranges were last checked against the driver.
  std::atomic<std::uint64_t> checked_at_release{0};
};

// Never destroyed: buffers freed by static destructors still forget their ranges.
record& shared_record() {
  static record* const instance = new record;
  return *instance;
}

// A thread's last few ranges found: an op's source and destination, usually the same allocations op
// after op.
struct thread_cache {
  std::uint64_t generation = ~std::uint64_t{0};
  std::array<known_range, 4> found{};
  unsigned next = 0;
};

bool holds(const known_range& range, std::uintptr_t address) noexcept {
  return range.size != 0 && address - range.base < range.size;
}

// Forgets each range the driver no longer knows as it was remembered, once per count of contexts
// released. Every range is asked about: a context's handle may be reused by a context made since, so no
// range can stand for the others of its context. Releases are rare beside ops.
void recheck(record& r) noexcept {
  std::unique_lock lock(r.mutex);
  const std::uint64_t released = contexts_released();
  if (r.checked_at_release.load(std::memory_order_relaxed) == released) return;  // another thread did
  r.checked_at_release.store(released, std::memory_order_release);
  bool forgot = false;
  for (auto it = r.ranges.begin(); it != r.ranges.end();) {
    const std::optional<known_range> known = range_known_to_driver(it->first);
    if (known && known->base == it->first && known->size == it->second.size) {
      ++it;
    } else {
      it = r.ranges.erase(it);
      forgot = true;
    }
  }
  if (forgot) r.generation.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace

void remember_own_range(std::uintptr_t base, std::size_t size, int device) noexcept {
  if (size == 0) return;
  record& r = shared_record();
  try {
    std::unique_lock lock(r.mutex);
    r.ranges.insert_or_assign(base, known_range{base, size, device});
  } catch (...) {
    // Not remembered: the driver is asked about it instead.
  }
}

void forget_own_range(std::uintptr_t base) noexcept {
  record& r = shared_record();
  std::unique_lock lock(r.mutex);
  if (r.ranges.erase(base) != 0) r.generation.fetch_add(1, std::memory_order_acq_rel);
}

std::optional<known_range> own_range(std::uintptr_t address) noexcept {
  thread_local thread_cache cache;
  record& r = shared_record();
  if (contexts_released() != r.checked_at_release.load(std::memory_order_acquire)) recheck(r);
  const std::uint64_t generation = r.generation.load(std::memory_order_acquire);
  if (cache.generation != generation) {
    cache.found = {};
    cache.generation = generation;
  }
  for (const known_range& range : cache.found) {
    if (holds(range, address)) return range;
  }
  std::shared_lock lock(r.mutex);
  auto after = r.ranges.upper_bound(address);
  if (after == r.ranges.begin()) return std::nullopt;
  const known_range range = std::prev(after)->second;
  if (!holds(range, address)) return std::nullopt;
  // Cached under the generation read before the lookup: a range forgotten since is dropped at the next
  // look, which sees the raised generation.
  cache.found[cache.next++ % cache.found.size()] = range;
  return range;
}

}  // namespace ferry::detail
