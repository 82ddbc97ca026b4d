#include "engine/async/resident_copier.hpp"

#include <string>
#include <utility>

#include "engine/errors/check.hpp"
#include "engine/kernels/launch.hpp"

namespace ferry::detail {

resident_copier::resident_copier(const driver_table& driver, std::size_t slots, std::chrono::microseconds idle_stop,
                                 std::function<void(const std::string&)> report)
    : driver_(driver), slots_(slots), report_(std::move(report)), idle_stop_(idle_stop) {
  if (slots == 0 || slots >= 0xffff) {
    throw_invalid_argument("resident_copier", "slots is " + std::to_string(slots) +
                                                  ": the ring holds 1 to 65,534 slots (the entries that take turns "
                                                  "in a slot must have different tags)");
  }
  const std::string what = "the resident copier's ring (" + std::to_string(slots) + " slots)";
  void* memory = nullptr;
  // One line more than the slots: the word the kernel writes as it reads entries.
  const std::size_t bytes = (slots + 1) * sizeof(kernels::resident_slot);
  check(driver_.cuMemHostAlloc(&memory, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc",
        what);
  ring_memory_ = owned_host_memory(driver_, memory);
  ring_ = static_cast<kernels::resident_slot*>(memory);
  for (std::size_t i = 0; i <= slots; ++i) ring_[i] = kernels::resident_slot{};
  check(driver_.cuMemHostGetDevicePointer(&device_ring_, memory, 0), "cuMemHostGetDevicePointer", what);
  CUstream stream = nullptr;
  check(driver_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", what);
  stream_ = owned_stream(driver_, stream);
  idle_watch_ = std::jthread([this](std::stop_token stop) { watch_idle(stop); });
}

resident_copier::~resident_copier() {
  if (abandoned_) {
    // The process is exiting: the stream and the ring go with it, without a driver call.
    stream_.abandon();
    ring_memory_.abandon();
    return;
  }
  idle_watch_.request_stop();
  if (idle_watch_.joinable()) idle_watch_.join();
  finish();
  // Then the stream and the ring (the members, in that order).
}

void resident_copier::finish() {
  if (abandoned_) return;
  // The kernel may be busy with a full ring: stop once it has room (it keeps reading while it runs,
  // unless the context failed, which ends it anyway).
  while (running()) {
    stop();
    if (running() && driver_.cuStreamQuery(stream_.get()) != CUDA_ERROR_NOT_READY) break;
  }
  driver_.cuStreamSynchronize(stream_.get());
}

std::uint64_t resident_copier::consumed() const noexcept {
  auto* const word = reinterpret_cast<std::uint64_t*>(ring_ + slots_);
  return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
}

void resident_copier::write(std::uint64_t index, std::uint32_t kind, std::uint64_t source, std::uint64_t destination,
                            std::uint64_t bytes, std::uint64_t flag, std::uint32_t flag_value) noexcept {
  std::uint64_t words[kernels::resident_slot_words];
  kernels::resident_words({source, destination, bytes, flag, flag_value, kind}, index, words);
  // Each word whole and released: the kernel takes the entry once it sees the tag in every word, and
  // whatever the caller wrote before posting (the bytes to copy) is visible to it by then.
  kernels::resident_slot& slot = ring_[index % slots_];
  for (unsigned k = 0; k < kernels::resident_slot_words; ++k) {
    std::atomic_ref<std::uint64_t>(slot.words[k]).store(words[k], std::memory_order_release);
  }
}

bool resident_copier::post(std::uint64_t source, std::uint64_t destination, std::uint64_t bytes, std::uint64_t flag,
                           std::uint32_t flag_value) {
  // Each value shares its slot word with the entry's tag (the device's and the host's addresses are far
  // below this; anything else takes the copy engine).
  for (std::uint64_t value : {source, destination, bytes, flag}) {
    if (value >= kernels::resident_value_limit) return false;
  }
  std::uint64_t state = state_.load(std::memory_order_acquire);
  while (true) {
    if ((state & running_bit) == 0) {
      if (!usable()) return false;
      std::lock_guard lock(launch_mutex_);
      state = state_.load(std::memory_order_acquire);
      if ((state & running_bit) == 0 && !launch()) return false;
      state = state_.load(std::memory_order_acquire);
      continue;
    }
    const std::uint64_t index = state >> 1;
    if (!has_room(index)) return false;
    if (state_.compare_exchange_weak(state, state + 2, std::memory_order_acq_rel, std::memory_order_acquire)) {
      write(index, kernels::resident_copy_entry, source, destination, bytes, flag, flag_value);
      return true;
    }
  }
}

bool resident_copier::launch() {
  if (!usable()) return false;
  const std::uint64_t state = state_.load(std::memory_order_acquire);
  const std::uint64_t first = state >> 1;
  // A kernel stopped before this entry may still be finishing the entries before it: this one runs
  // after it on the stream.
  const CUresult status = launch_resident_copy(device_ring_, slots_, first,
                                               device_ring_ + slots_ * sizeof(kernels::resident_slot), stream_.get());
  if (status != CUDA_SUCCESS) {
    usable_.store(false, std::memory_order_relaxed);
    if (report_) {
      report_("the resident copier (ferry_resident_copy) could not be launched (" + status_name(status) +
              "); small copies go through the copy engine");
    }
    return false;
  }
  launches_.fetch_add(1, std::memory_order_relaxed);
  // Only a launch (under launch_mutex_) changes the state while no kernel runs.
  state_.store(state | running_bit, std::memory_order_release);
  // Through the watch's mutex: the watch cannot have found no kernel running and not be waiting yet.
  { std::lock_guard watching(watch_mutex_); }
  launched_.notify_one();
  return true;
}

void resident_copier::watch_idle(std::stop_token quit) {
  std::unique_lock lock(watch_mutex_);
  while (launched_.wait(lock, quit, [this] { return running(); })) {
    std::uint64_t seen = state_.load(std::memory_order_acquire) >> 1;
    // A look every idle_stop_ until the kernel stops (by the bridge, by finish, or here).
    while (true) {
      launched_.wait_for(lock, quit, idle_stop_, [] { return false; });
      if (quit.stop_requested()) return;
      const std::uint64_t state = state_.load(std::memory_order_acquire);
      if ((state & running_bit) == 0) break;
      if ((state >> 1) == seen) stop();  // nothing posted since the last look
      seen = state >> 1;
    }
  }
}

void resident_copier::stop() noexcept {
  std::uint64_t state = state_.load(std::memory_order_acquire);
  while ((state & running_bit) != 0) {
    const std::uint64_t index = state >> 1;
    if (!has_room(index)) return;
    // Takes the entry and clears the running bit at once: a post after this launches a new kernel,
    // which starts at the next entry, behind this one on the stream.
    if (state_.compare_exchange_weak(state, (index + 1) << 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      write(index, kernels::resident_stop, 0, 0, 0, 0, 0);
      return;
    }
  }
}

}  // namespace ferry::detail
