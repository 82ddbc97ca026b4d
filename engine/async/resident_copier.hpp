// The resident copier (engine_options::resident_copies): a block of the ferry_resident_copy kernel that
// stays on the GPU while small copies keep coming, and copies what the initiating call posts to a ring
// in mapped page-locked memory. Posting is a few stores to host memory and no driver call: a small
// page-locked copy given no stream costs its initiating call no cuMemcpy*Async and no flag write (the
// kernel writes the op's completion flag itself), and starts on the GPU as soon as the block reads the
// entry, without the copy engine's setup.
//
// The kernel runs only while it is wanted: the completion bridge stops it (an entry of kind stop, no
// driver call) when it parks, so that an idle engine holds no SM and a call that waits for the whole
// context (cuCtxSynchronize, and the frees of memory: cuMemFree, cuMemFreeHost) is not kept waiting for
// long; the next post launches it again. A thread of the copier's own, which never calls the driver, also
// stops it once nothing was posted for idle_stop: the bridge may itself be held in a driver call while
// the kernel runs (under a tool such as compute-sanitizer a stream query can wait inside the tool, every
// other thread waiting for the driver's lock), and a kernel that only the bridge could stop would then run
// for ever. Entries are taken in ring order; the ring's state (the next entry's index, and whether a
// kernel is running to take it) is one host word, changed by compare-exchange, so a post takes no lock
// unless it must launch the kernel.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "engine/async/driver_handle.hpp"
#include "engine/driver/driver_table.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail {

class resident_copier {
 public:
  // A ring of `slots` entries and a non-blocking stream for the kernel, made in the current context
  // (the engine's); throws ferry::cuda_error naming the call. `report` hears a launch the driver refused.
  // A running kernel is stopped once no entry was posted for between idle_stop and twice that.
  resident_copier(const driver_table& driver, std::size_t slots, std::chrono::microseconds idle_stop,
                  std::function<void(const std::string&)> report);
  resident_copier(const resident_copier&) = delete;
  resident_copier& operator=(const resident_copier&) = delete;
  // Ends the idle watch, finish(), then frees the ring and the stream.
  ~resident_copier();

  // Stops the kernel and waits for it to end (the engine's context must be current). Anything that
  // waits for the whole context (freeing page-locked or device memory does, cuMemFreeHost among them)
  // would otherwise wait for the kernel: the engine finishes the copier before it frees anything.
  void finish();

  // The stream the kernel runs on: its status is the posted copies' status (a fault ends the kernel).
  CUstream stream() const noexcept { return stream_.get(); }

  // Posts a copy of `bytes` bytes from `source` to `destination` (device-accessible addresses), after
  // which the kernel writes `flag_value` to the word at device address `flag`. Launches the kernel
  // first when none is running (the engine's context must be current). False when nothing was posted:
  // the ring is full, an address or the size is 2^48 or more (a slot word holds 48 bits of it), or the
  // driver refused the launch (reported; the copier is then not used again).
  bool post(std::uint64_t source, std::uint64_t destination, std::uint64_t bytes, std::uint64_t flag,
            std::uint32_t flag_value);

  // Ends the running kernel once it has done every entry posted before (no driver call); the next post
  // launches it again. Does nothing when no kernel runs, or when the ring is full (the kernel is busy:
  // the next stop ends it).
  void stop() noexcept;

  // At process exit: forgets the ring and the stream without calling the driver. The idle watch ends
  // first (it wakes at once): it would read the ring after the driver's teardown.
  void abandon() noexcept {
    abandoned_ = true;
    idle_watch_.request_stop();
    if (idle_watch_.joinable()) idle_watch_.join();
  }

  bool usable() const noexcept { return usable_.load(std::memory_order_relaxed); }
  bool running() const noexcept { return (state_.load(std::memory_order_acquire) & running_bit) != 0; }
  std::uint64_t launches() const noexcept { return launches_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t running_bit = 1;  // the state word: next index << 1 | running_bit

  // The entries the kernel has done (the word it writes after each): slots before them are free again.
  std::uint64_t consumed() const noexcept;
  bool has_room(std::uint64_t index) const noexcept { return index - consumed() < slots_; }
  void write(std::uint64_t index, std::uint32_t kind, std::uint64_t source, std::uint64_t destination,
             std::uint64_t bytes, std::uint64_t flag, std::uint32_t flag_value) noexcept;
  // Under launch_mutex_: launches a kernel that starts at the state's index, and marks it running.
  bool launch();
  // The idle watch's thread: while a kernel runs, looks at the next entry's index every idle_stop_ and
  // stops the kernel when it has not moved since the look before.
  void watch_idle(std::stop_token stop);

  const driver_table& driver_;
  const std::size_t slots_;
  std::function<void(const std::string&)> report_;
  owned_host_memory ring_memory_;            // declared before the stream: released after it
  kernels::resident_slot* ring_ = nullptr;  // slots_ slots, then the consumed word (one more line)
  CUdeviceptr device_ring_ = 0;
  owned_stream stream_;
  std::mutex launch_mutex_;
  std::atomic<bool> usable_{true};
  std::atomic<std::uint64_t> launches_{0};
  bool abandoned_ = false;
  alignas(64) std::atomic<std::uint64_t> state_{0};
  const std::chrono::microseconds idle_stop_;
  std::mutex watch_mutex_;
  std::condition_variable_any launched_;  // a launch wakes the idle watch
  std::jthread idle_watch_;               // last: stopped and joined first
};

}  // namespace ferry::detail
