// Large pageable buffers that are transferred again and again are registered (cuMemHostRegister) once
// and then moved by the copy engine directly, at pinned speed, instead of through the staging pool.
// Registering takes time in proportion to the buffer's size, which one transfer does not win back, so a
// buffer is registered the second time it is seen.
// Bounded in bytes; least recently used registrations that no transfer is using are dropped first.
//
// The hazard: ferry cannot see free(). Registration pins the pages behind the addresses; if the caller
// frees the buffer and a new one is later allocated at the same addresses, the cached registration
// still names the old pages, and transfers would read or write memory that is not the new buffer.
// So a caller that frees (or shrinks, or reallocates) a buffer it gave to the engine must first call
// engine::forget_host_memory on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class registration_cache {
 public:
  registration_cache(const driver_table& driver, std::size_t capacity_bytes, std::size_t threshold_bytes)
      : driver_(driver), capacity_(capacity_bytes), threshold_(threshold_bytes) {}
  registration_cache(const registration_cache&) = delete;
  registration_cache& operator=(const registration_cache&) = delete;
  ~registration_cache();

  // A use of a registered range; the registration stays while any lease lives.
  using lease = std::shared_ptr<void>;

  // For a transfer of [address, address + bytes): a lease when the range is registered (registering it
  // now if it was seen before and fits), or nullptr when it should be staged. `force` registers on
  // first sight. Blocking (cuMemHostRegister): call it off the caller's thread.
  lease acquire(std::uintptr_t address, std::size_t bytes, bool force);

  // Whether acquire() would register or find a registration (cheap; no driver call).
  bool worth_registering(std::uintptr_t address, std::size_t bytes) const;

  // Drops registrations overlapping [address, address + bytes): now if unused, else when the last
  // transfer using them ends.
  void forget(std::uintptr_t address, std::size_t bytes);

  std::size_t registered_bytes() const;

 private:
  struct entry {
    std::uintptr_t address;
    std::size_t bytes;
    bool registered = false;
    bool forgotten = false;
    std::size_t in_use = 0;
    std::list<std::uintptr_t>::iterator recency;
  };

  void release(std::uintptr_t address);
  bool make_room(std::size_t bytes);  // under mutex_
  void forget_stale_sightings();      // under mutex_
  void drop(std::map<std::uintptr_t, entry>::iterator it);  // under mutex_

  const driver_table& driver_;
  std::size_t capacity_;
  std::size_t threshold_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, entry> entries_;  // by start address
  std::list<std::uintptr_t> recency_;        // most recent first
  std::size_t registered_bytes_ = 0;
};

}  // namespace ferry::detail
