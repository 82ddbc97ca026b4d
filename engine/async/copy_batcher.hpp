// Coalesces concurrent small copies into one submission: one cuMemcpyBatchAsync (a small copy's driver time
// is mostly the call's own, which a batch pays once for all its copies), or one launch of the
// gather/scatter kernel (ferry_copy_blocks), which reads and writes page-locked host memory directly and
// moves a batch's blocks at link speed. A copy joins a batch only when another arrived within the burst
// window before it, so a lone copy (a request/response loop) is submitted at once; a batch is submitted
// when it is full or its window has passed, so no copy waits longer than the window.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/async/completion_bridge.hpp"
#include "engine/async/descriptor_slabs.hpp"
#include "engine/async/driver_handle.hpp"
#include "engine/async/kernel_choice.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/detail/operation.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::detail {

class copy_batcher {
 public:
  // NOT_READY never reaches a continuation from the bridge, so it can mean "cancelled, never submitted".
  static constexpr CUresult not_submitted = CUDA_ERROR_NOT_READY;

  struct copy {
    CUdeviceptr destination;
    CUdeviceptr source;  // host addresses too: unified addressing
    std::size_t bytes;
    direction way;  // for drivers without cuMemcpyBatchAsync
    batch_path path;  // the caller's choice (transfer_options::batching)
    bool kernel_reaches;  // its device sides are memory of the engine's device (else the copy engine moves it)
    std::shared_ptr<operation> op;
    std::uint64_t sequence;  // the op's, in the engine's record of ops in flight
    std::shared_ptr<prepared_transfer> transfer;
  };
  // Called once per copy with the status of its batch (on the bridge thread), or with not_submitted when
  // its op was cancelled before the batch was submitted. One for all copies: a copy carries no callable
  // of its own, which would cost an allocation per copy on the offering thread.
  using finisher = std::function<void(copy&, CUresult)>;

  struct settings {
    std::chrono::microseconds window;
    std::size_t most_copies;
    batch_path path;  // engine_options::batching
    kernel_choice automatic;  // where batch_path::automatic takes the kernel
    bool kernel_usable;  // the device reaches page-locked host memory at its host address
  };

  copy_batcher(const driver_table& driver, CUcontext context, int ordinal, completion_bridge& bridge,
               std::function<CUstream()> next_stream, settings chosen, finisher finish,
               std::function<void(const std::string&)> report);
  copy_batcher(const copy_batcher&) = delete;
  copy_batcher& operator=(const copy_batcher&) = delete;
  // Submits what is collected, then stops the thread. The engine's context must be current (its stream
  // and slabs are freed).
  ~copy_batcher();

  // At process exit: stops the thread at once and drops the open batch (its ops never complete: the
  // process is ending). The batcher must then be leaked, not destroyed.
  void stop_for_exit();

  // Takes the copy into the open batch, or returns false (the caller submits it alone) when no other
  // copy arrived within the window before it.
  bool offer(copy& item);

  std::size_t batches_submitted() const noexcept { return batches_.load(); }
  // Batches the driver refused as a whole (then submitted copy by copy).
  std::size_t batch_refusals() const noexcept { return batch_refusals_.load(); }
  // Batches (or the part of a batch) moved by the copy engine, and by the kernel.
  std::size_t copy_engine_batches() const noexcept { return copy_engine_batches_.load(); }
  std::size_t kernel_batches() const noexcept { return kernel_batches_.load(); }

 private:
  void run();
  std::vector<copy> take_open();  // under mutex_
  std::vector<copy> drop_cancelled(std::vector<copy> batch);
  // Submits the batch's live copies as one, and hands them to the bridge.
  void submit(std::vector<copy> batch);
  // Puts the copies on `stream`: the first `by_kernel` with one launch (descriptors in `slab`), the
  // others through the copy engine. The first failure, if any.
  CUresult enqueue(std::vector<copy>& live, std::size_t by_kernel, CUstream stream, std::uint64_t*& slab);
  // Orders the copies that take the kernel first; how many they are.
  std::size_t kernel_share(std::vector<copy>& live) const;
  CUresult launch_kernel(const copy* first, std::size_t count, CUstream stream, std::uint64_t*& slab);
  // One cuMemcpyBatchAsync, or one call per copy where the driver refuses the batch.
  CUresult enqueue_copy_engine(const copy* first, std::size_t count, CUstream stream);
  void report_refusal(CUresult status, std::size_t copies);
  void report_kernel_refusal(CUresult status, std::size_t copies);
  // Marks the copies submitted and has the bridge complete them when the stream reaches this point; the
  // slab goes back with them.
  void watch(std::vector<copy> live, CUstream stream, std::uint64_t* slab);

  const driver_table& driver_;
  CUcontext context_;
  int ordinal_;  // the device, for the copies' location hints
  completion_bridge& bridge_;
  std::function<CUstream()> next_stream_;
  const settings settings_;
  // Kernel batches go on a stream of the context's highest priority: the GPU then gives the copy kernel's
  // blocks SMs as soon as blocks of a running compute kernel finish, instead of after all of that kernel's
  // waiting blocks (nothing preempts a running block). Null when the driver would not create it: kernel
  // batches then take the pool streams.
  owned_stream priority_stream_;
  std::atomic<bool> kernel_usable_;  // cleared when the driver refuses a launch for good
  descriptor_slabs slabs_;
  finisher finish_;
  std::function<void(const std::string&)> report_;  // engine_options::on_failure, for refused batches

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<copy> open_;  // room for most_copies, made once: offering never allocates
  std::chrono::steady_clock::time_point opened_;
  std::chrono::steady_clock::time_point last_arrival_;
  bool stopping_ = false;
  bool abandoned_ = false;
  std::atomic<std::size_t> batches_{0};
  std::atomic<std::size_t> batch_refusals_{0};
  std::atomic<std::size_t> copy_engine_batches_{0};
  std::atomic<std::size_t> kernel_batches_{0};
  std::thread thread_;
};

}  // namespace ferry::detail
