// What the driver knows about an address: the allocation (device, managed, pinned or registered) that
// holds it. Argument checks use it to reject unknown pointers and ranges that run past an allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/detail/transfer.hpp"

namespace ferry::detail {

struct known_range {
  std::uintptr_t base;
  std::size_t size;
  // The ordinal of the device the memory is on (-1 when the driver did not say). A kernel faults on
  // another device's memory, which the copy engine reaches through unified addressing; contexts of one
  // device share their memory with each other's kernels.
  int device = -1;
};

// The ordinal of the current context's device (-1 when there is none).
int current_device() noexcept;

// Whether `range` is memory of the device of the calling thread's current context: what a kernel
// launched in that context may touch.
bool on_current_device(const known_range& range) noexcept;

// What a message refusing one of the engine's kernels says of a side in memory the kernel cannot reach:
// "destination 0x10000 is memory of device 1, not of the engine's device 0". `device` is the ordinal of
// the memory's device (known_range::device); -1, where the driver did not say, is treated as another
// device's.
std::string memory_of_another_device(std::string_view argument, std::uintptr_t address, int device,
                                     int engine_device);

// The allocation holding `address`, or nullopt when the driver knows no such memory.
std::optional<known_range> range_known_to_driver(std::uintptr_t address) noexcept;

// What the driver knows of an address the caller passed as host memory (what a pageable side turns out
// to be: pinned, registered or managed memory, device memory, or nothing the driver knows), asked in one
// driver call that does not fail for memory the driver does not know: range_known_to_driver's fallback
// for device memory would fail for every plain pageable buffer, once per op.
struct host_memory_facts {
  bool device_only = false;          // device memory that the host cannot read (not managed)
  std::optional<known_range> range;  // the allocation holding it, if the driver knows one
};
host_memory_facts ask_driver_about_host_memory(std::uintptr_t address) noexcept;

// The allocation holding an address passed as host memory: ask_driver_about_host_memory's range.
std::optional<known_range> host_range_known_to_driver(std::uintptr_t address) noexcept;

// Throws std::invalid_argument unless side.address is non-null (a null pageable one is accepted when
// bytes is 0: an empty container), and, for device and pinned memory, unless
// [address + offset, address + offset + bytes) lies inside one allocation the driver knows:
// first looked up in the ranges ferry allocated or registered itself (own_ranges.hpp), without a driver
// call, then asked of the driver.
// Pageable host memory cannot be looked up: it is checked only for null and for running past the end of
// the address space. Returns the allocation found (none for pageable memory or no bytes).
std::optional<known_range> check_side(std::string_view operation, const endpoint& side, std::size_t offset,
                                      std::size_t bytes);

// Whether [address + offset, address + offset + bytes) runs past the end of the address space (its end
// would wrap to a low address). `bytes` is at least 1.
constexpr bool runs_past_address_space(std::uintptr_t address, std::size_t offset, std::size_t bytes) noexcept {
  return offset > UINTPTR_MAX - address || bytes - 1 > UINTPTR_MAX - address - offset;
}

// Whether `address` is device memory that the host cannot read: ask_driver_about_host_memory's device_only.
bool is_device_only_memory(std::uintptr_t address) noexcept;

// Throws std::invalid_argument when [a, a + bytes) and [b, b + bytes) overlap.
void check_disjoint(std::string_view operation, std::uintptr_t a, std::uintptr_t b, std::size_t bytes);

}  // namespace ferry::detail
