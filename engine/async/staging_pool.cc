#include "engine/async/staging_pool.hpp"

#include <string>

#include "engine/errors/check.hpp"

namespace ferry::detail {

staging_pool::staging_pool(const driver_table& driver, std::size_t chunk_bytes, std::size_t chunks)
    : driver_(driver), chunk_bytes_(chunk_bytes), chunk_count_(chunks) {}

staging_pool::~staging_pool() {
  if (memory_ != nullptr) driver_.cuMemFreeHost(memory_);
}

void staging_pool::allocate_once() {
  if (memory_ != nullptr) return;
  // One allocation for the whole pool, made when a pageable transfer first needs it.
  void* memory = nullptr;
  const std::size_t bytes = chunk_bytes_ * chunk_count_;
  if (CUresult status = driver_.cuMemHostAlloc(&memory, bytes, CU_MEMHOSTALLOC_PORTABLE); status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemHostAlloc",
                     "the staging pool (" + std::to_string(chunk_count_) + " chunks of " +
                         std::to_string(chunk_bytes_) + " bytes)",
                     std::source_location::current());
  }
  memory_ = memory;
  for (std::size_t i = chunk_count_; i-- > 0;) free_.push_back(static_cast<std::byte*>(memory) + i * chunk_bytes_);
}

void staging_pool::lease(const std::shared_ptr<operation>& op, on_lease ready) {
  std::unique_lock lock(mutex_);
  allocate_once();
  if (!free_.empty()) {
    chunk leased = free_.back();
    free_.pop_back();
    lock.unlock();
    ready(leased);
    return;
  }
  waiters_.emplace_back(op, std::move(ready));
}

staging_pool::chunk staging_pool::try_lease() { return take_free(0); }

staging_pool::chunk staging_pool::try_lease_ahead() { return take_free(1); }

staging_pool::chunk staging_pool::take_free(std::size_t kept) {
  std::lock_guard lock(mutex_);
  allocate_once();
  // Ops already waiting come first.
  if (free_.size() <= kept || !waiters_.empty()) return nullptr;
  chunk leased = free_.back();
  free_.pop_back();
  return leased;
}

void staging_pool::release(chunk released) {
  std::unique_lock lock(mutex_);
  while (!waiters_.empty()) {
    auto [owner, ready] = std::move(waiters_.front());
    waiters_.pop_front();
    if (owner.expired()) continue;
    lock.unlock();
    ready(released);
    return;
  }
  free_.push_back(released);
}

void staging_pool::wake_cancelled() {
  std::vector<on_lease> cancelled;
  {
    std::lock_guard lock(mutex_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto owner = it->first.lock();
      if (!owner || owner->cancel_requested()) {
        if (owner) cancelled.push_back(std::move(it->second));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (on_lease& ready : cancelled) ready(nullptr);
}

std::size_t staging_pool::free_chunks() const {
  std::lock_guard lock(mutex_);
  return memory_ ? free_.size() : chunk_count_;
}

std::size_t staging_pool::allocated_bytes() const {
  std::lock_guard lock(mutex_);
  return memory_ ? chunk_bytes_ * chunk_count_ : 0;
}

}  // namespace ferry::detail
