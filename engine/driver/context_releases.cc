#include "engine/driver/context_releases.hpp"

#include <atomic>

namespace ferry::detail {
namespace {

std::atomic<std::uint64_t> released{0};

}  // namespace

void note_context_released() noexcept { released.fetch_add(1, std::memory_order_acq_rel); }

std::uint64_t contexts_released() noexcept { return released.load(std::memory_order_acquire); }

}  // namespace ferry::detail
