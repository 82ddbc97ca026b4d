// Page-locked slots that small pageable transfers are staged through without the staging pool's
// machinery: a poke's bytes are copied into a slot on the thread that starts it and the copy engine moves
// the slot like any page-locked memory; a peek lands in a slot and its bytes are copied out on the bridge
// thread that learns the copy is done. Taking and giving back a slot is lock-free (free_indices), so the
// transfer keeps the planner's at-once route: the copy goes on its stream before the op's bookkeeping.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include <cuda.h>

#include "engine/async/free_indices.hpp"
#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class small_staging {
 public:
  // `slots` slots of `slot_bytes` each, page-locked memory of `context`, allocated when the first slot is
  // asked for; an allocation the driver refuses is said to `report` (engine_options::on_failure). No slots
  // (either is 0): take() always answers nullptr.
  small_staging(const driver_table& driver, CUcontext context, std::size_t slot_bytes, std::uint32_t slots,
                std::function<void(const std::string&)> report);
  small_staging(const small_staging&) = delete;
  small_staging& operator=(const small_staging&) = delete;
  // The engine's context must be current.
  ~small_staging();

  std::size_t slot_bytes() const noexcept { return slot_bytes_; }

  // A free slot for a transfer of `bytes`, or nullptr: too large, every slot in use, or no page-locked
  // memory to be had (then never again: such transfers take another plan).
  std::byte* take(std::size_t bytes) noexcept;
  void give_back(std::byte* slot) noexcept;

  // Page-locked bytes held: every slot once one has been asked for, else 0.
  std::size_t allocated_bytes() const noexcept;

 private:
  bool allocate_once() noexcept;

  const driver_table& driver_;
  const CUcontext context_;
  const std::size_t slot_bytes_;
  const std::uint32_t count_;
  const std::function<void(const std::string&)> report_;
  std::mutex allocating_;
  std::atomic<std::byte*> memory_{nullptr};
  std::atomic<bool> unavailable_{false};  // the allocation failed, or there are no slots
  free_indices free_;
};

}  // namespace ferry::detail
