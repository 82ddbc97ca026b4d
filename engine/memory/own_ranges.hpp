// The ranges of memory ferry allocated or registered itself (malloc_host, register_host, malloc_device,
// malloc_managed and the buffers built on them), so that an op's argument checks find its pointers without
// asking the driver: a pointer-attribute query per side per op, which takes the driver's locks. A pointer
// not found here is asked of the driver, so forgetting a range is always safe; remembering one
// the driver no longer holds is not, and so ranges are forgotten before ferry frees or unregisters them,
// and checked against the driver at the first look after ferry destroyed or released a context
// (engine/driver/context_releases.hpp: a context that goes away frees its memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/memory/known_ranges.hpp"

namespace ferry::detail {

// Remembers [base, base + size), memory on `device` (the ordinal of the current context's device when
// it was allocated or registered). Never throws: a range that cannot be remembered is asked of the driver.
void remember_own_range(std::uintptr_t base, std::size_t size, int device) noexcept;

// Forgets the range that starts at `base`, if remembered (before ferry frees or unregisters it).
void forget_own_range(std::uintptr_t base) noexcept;

// The remembered range that holds `address`, if any. A lookup from a thread's small cache of ranges it
// found lately, valid until any range is forgotten; else from the shared record, under a reader lock.
std::optional<known_range> own_range(std::uintptr_t address) noexcept;

}  // namespace ferry::detail
