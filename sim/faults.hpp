// Fault injection consulted by the entry points: one-shot failures of the Nth call of an entry point,
// and the out-of-memory budget.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace ferry::sim::detail {

// The status an armed fail_call makes this call of `entry_point` return, counting the call.
std::optional<CUresult> injected_failure(std::string_view entry_point);

// Takes `bytes` from the out_of_memory_after budget; false when they do not fit (nothing taken).
bool charge_allocation(std::size_t bytes);
void refund_allocation(std::size_t bytes);

}  // namespace ferry::sim::detail
