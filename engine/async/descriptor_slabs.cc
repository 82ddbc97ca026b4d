#include "engine/async/descriptor_slabs.hpp"

namespace ferry::detail {

descriptor_slabs::~descriptor_slabs() {
  for (std::uint64_t* slab : all_) driver_.cuMemFreeHost(slab);
}

std::uint64_t* descriptor_slabs::acquire(CUresult& status) noexcept {
  status = CUDA_SUCCESS;
  if (std::uint64_t* slab = try_acquire_free()) return slab;
  std::lock_guard lock(mutex_);
  void* made = nullptr;
  // Mapped: the kernel reads the descriptors at their host address.
  status = driver_.cuMemHostAlloc(&made, words_ * sizeof(std::uint64_t), CU_MEMHOSTALLOC_DEVICEMAP);
  if (status != CUDA_SUCCESS) return nullptr;
  try {
    all_.reserve(all_.size() + 1);
    free_.reserve(all_.size() + 1);  // release() then never allocates
  } catch (...) {
    driver_.cuMemFreeHost(made);
    status = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  all_.push_back(static_cast<std::uint64_t*>(made));
  return static_cast<std::uint64_t*>(made);
}

std::uint64_t* descriptor_slabs::try_acquire_free() noexcept {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return nullptr;
  std::uint64_t* slab = free_.back();
  free_.pop_back();
  return slab;
}

void descriptor_slabs::release(std::uint64_t* slab) noexcept {
  if (slab == nullptr) return;
  std::lock_guard lock(mutex_);
  free_.push_back(slab);
}

void descriptor_slabs::abandon() noexcept {
  std::lock_guard lock(mutex_);
  free_.clear();
  all_.clear();
}

}  // namespace ferry::detail
