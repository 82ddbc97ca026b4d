// Page-locked slabs that hold a kernel batch's copy descriptors (sources, destinations, sizes: the
// arrays ferry_copy_blocks reads). The kernel reads them straight from host memory through unified
// addressing, so a batch costs no upload; a slab goes back to the pool only when its batch has
// completed, because the kernel reads it while it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class descriptor_slabs {
 public:
  // Slabs of `words` 64-bit words each, allocated in the current context when first needed.
  descriptor_slabs(const driver_table& driver, std::size_t words) : driver_(driver), words_(words) {}
  descriptor_slabs(const descriptor_slabs&) = delete;
  descriptor_slabs& operator=(const descriptor_slabs&) = delete;
  // Frees every slab (the engine's context must be current): all of them must be back.
  ~descriptor_slabs();

  // A free slab, or nullptr when the driver cannot allocate one, its status then in `status` (the batch
  // takes the copy engine, and says why).
  std::uint64_t* acquire(CUresult& status) noexcept;
  // A free slab, or nullptr when none is free (it allocates nothing).
  std::uint64_t* try_acquire_free() noexcept;
  void release(std::uint64_t* slab) noexcept;
  // At process exit: forgets the slabs without calling the driver (it is being torn down).
  void abandon() noexcept;

  std::size_t words() const noexcept { return words_; }

 private:
  const driver_table& driver_;
  const std::size_t words_;
  std::mutex mutex_;
  std::vector<std::uint64_t*> free_;
  std::vector<std::uint64_t*> all_;
};

}  // namespace ferry::detail
