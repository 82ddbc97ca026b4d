#include "engine/async/registration_cache.hpp"

namespace ferry::detail {

registration_cache::~registration_cache() {
  for (auto& [address, item] : entries_) {
    if (item.registered) driver_.cuMemHostUnregister(reinterpret_cast<void*>(address));
  }
}

bool registration_cache::worth_registering(std::uintptr_t address, std::size_t bytes) const {
  if (bytes < threshold_ || bytes > capacity_) return false;
  std::lock_guard lock(mutex_);
  auto it = entries_.find(address);
  return it != entries_.end() && it->second.bytes >= bytes;
}

registration_cache::lease registration_cache::acquire(std::uintptr_t address, std::size_t bytes, bool force) {
  std::unique_lock lock(mutex_);
  if (!force && (bytes < threshold_ || bytes > capacity_)) return nullptr;
  auto it = entries_.find(address);
  if (it != entries_.end() && (it->second.bytes < bytes || it->second.forgotten)) {
    if (it->second.in_use != 0) return nullptr;  // a different buffer at this address is still in flight
    drop(it);
    it = entries_.end();
  }
  if (it == entries_.end()) {
    forget_stale_sightings();
    entry fresh{address, bytes, false, false, 0, {}};
    recency_.push_front(address);
    fresh.recency = recency_.begin();
    it = entries_.emplace(address, fresh).first;
    if (!force) return nullptr;  // first sight: stage it, remember it
  }
  entry& item = it->second;
  recency_.splice(recency_.begin(), recency_, item.recency);
  if (!item.registered) {
    if (!make_room(item.bytes)) return nullptr;
    // Registration blocks for milliseconds; the range is reserved meanwhile (in_use) so nothing drops it.
    ++item.in_use;
    lock.unlock();
    const CUresult status =
        driver_.cuMemHostRegister(reinterpret_cast<void*>(address), item.bytes, CU_MEMHOSTREGISTER_PORTABLE);
    lock.lock();
    --item.in_use;
    if (status != CUDA_SUCCESS) {
      // Registered elsewhere (the caller did it), or not registrable: transfers of it are staged.
      drop(entries_.find(address));
      return nullptr;
    }
    item.registered = true;
    registered_bytes_ += item.bytes;
  }
  ++item.in_use;
  return lease(reinterpret_cast<void*>(address), [this](void* released) {
    release(reinterpret_cast<std::uintptr_t>(released));
  });
}

void registration_cache::forget_stale_sightings() {
  // Buffers seen once and never again must not accumulate: keep the most recent sightings only.
  constexpr std::size_t most_sightings = 4096;
  for (auto victim = recency_.rbegin(); entries_.size() >= most_sightings && victim != recency_.rend();) {
    auto it = entries_.find(*victim);
    ++victim;
    if (!it->second.registered && it->second.in_use == 0) {
      drop(it);
      victim = recency_.rbegin();
    }
  }
}

void registration_cache::release(std::uintptr_t address) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(address);
  if (it == entries_.end()) return;
  if (--it->second.in_use == 0 && it->second.forgotten) drop(it);
}

void registration_cache::forget(std::uintptr_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    const bool overlaps = it->first < address + bytes && address < it->first + it->second.bytes;
    if (overlaps) {
      if (it->second.in_use == 0) {
        drop(it);
      } else {
        it->second.forgotten = true;
      }
    }
    it = next;
  }
}

std::size_t registration_cache::registered_bytes() const {
  std::lock_guard lock(mutex_);
  return registered_bytes_;
}

bool registration_cache::make_room(std::size_t bytes) {
  for (auto victim = recency_.rbegin(); registered_bytes_ + bytes > capacity_ && victim != recency_.rend();) {
    auto it = entries_.find(*victim);
    ++victim;
    if (it->second.registered && it->second.in_use == 0) {
      // Dropping invalidates the reverse iterator's base; restart from the least recent end.
      drop(it);
      victim = recency_.rbegin();
    }
  }
  return registered_bytes_ + bytes <= capacity_;
}

void registration_cache::drop(std::map<std::uintptr_t, entry>::iterator it) {
  if (it->second.registered) {
    driver_.cuMemHostUnregister(reinterpret_cast<void*>(it->first));
    registered_bytes_ -= it->second.bytes;
  }
  recency_.erase(it->second.recency);
  entries_.erase(it);
}

}  // namespace ferry::detail
