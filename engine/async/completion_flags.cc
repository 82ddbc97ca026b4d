#include "engine/async/completion_flags.hpp"

#include <atomic>
#include <string>

#include "engine/errors/check.hpp"

namespace ferry::detail {

completion_flags::completion_flags(const driver_table& driver, std::size_t words)
    : driver_(driver), last_value_(words, 0) {
  void* memory = nullptr;
  const std::string what = "the completion flags (" + std::to_string(words) + " words)";
  check(driver_.cuMemHostAlloc(&memory, words * sizeof(std::uint32_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
        "cuMemHostAlloc", what);
  if (CUresult status = driver_.cuMemHostGetDevicePointer(&device_words_, memory, 0); status != CUDA_SUCCESS) {
    driver_.cuMemFreeHost(memory);
    throw_cuda_error(status, "cuMemHostGetDevicePointer", what, std::source_location::current());
  }
  words_ = static_cast<std::uint32_t*>(memory);
  for (std::size_t i = 0; i < words; ++i) words_[i] = 0;
}

completion_flags::~completion_flags() {
  if (words_ != nullptr) driver_.cuMemFreeHost(words_);
}

completion_flags::flag completion_flags::next_use(std::uint32_t index) noexcept {
  std::uint32_t value = last_value_[index] + 1;
  if (value == 0) value = 1;  // 0 is the word's initial content
  last_value_[index] = value;
  return flag{index, value};
}

CUresult completion_flags::enqueue_write(CUstream stream, const flag& used) const {
  // Flags 0: a system-wide fence before the write, so that what the work wrote to host memory (a peek's
  // bytes) is visible before the word is. (The v2 entry point refuses NO_MEMORY_BARRIER anyway.)
  return driver_.cuStreamWriteValue32(stream, device_words_ + used.index * sizeof(std::uint32_t), used.value, 0);
}

bool completion_flags::is_written(const flag& used) const noexcept {
  return std::atomic_ref<std::uint32_t>(words_[used.index]).load(std::memory_order_acquire) == used.value;
}

}  // namespace ferry::detail
