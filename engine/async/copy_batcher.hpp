// Coalesces concurrent small copies into one cuMemcpyBatchAsync: submitting a 4 KiB copy costs ~2.5 us
// alone and ~0.8 us inside a batch. A copy joins a batch only when another arrived within the burst
// window before it, so a lone copy (a request/response loop) is submitted at once; a batch is
// submitted when it is full or its window has passed, so no copy waits longer than the window.
#pragma once

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/async/completion_bridge.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/transfer/plans.hpp"
#include "ferry/detail/operation.hpp"

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
    std::shared_ptr<operation> op;
    // Called once with the status of the batch (on the bridge thread), or with not_submitted when the
    // op was cancelled before the batch was submitted.
    std::function<void(CUresult)> done;
  };

  copy_batcher(const driver_table& driver, CUcontext context, int ordinal, completion_bridge& bridge,
               std::function<CUstream()> next_stream, std::chrono::microseconds window, std::size_t most_copies,
               std::function<void(const std::string&)> report);
  copy_batcher(const copy_batcher&) = delete;
  copy_batcher& operator=(const copy_batcher&) = delete;
  // Submits what is collected, then stops the thread.
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

 private:
  void run();
  // Submits the batch's live copies as one, and hands them to the bridge.
  void submit(std::vector<copy> batch);
  // Puts the copies on `stream`: one cuMemcpyBatchAsync, or one call per copy where the driver refuses
  // the batch. The first failure, if any.
  CUresult enqueue(const std::vector<copy>& live, CUstream stream);
  void report_refusal(CUresult status, std::size_t copies);
  // Marks the copies submitted and has the bridge complete them when the stream reaches this point.
  void watch(std::vector<copy> live, CUstream stream);

  const driver_table& driver_;
  CUcontext context_;
  int ordinal_;  // the device, for the copies' location hints
  completion_bridge& bridge_;
  std::function<CUstream()> next_stream_;
  std::chrono::microseconds window_;
  std::size_t most_copies_;
  std::function<void(const std::string&)> report_;  // engine_options::on_failure, for refused batches

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<copy> open_;
  std::chrono::steady_clock::time_point opened_;
  std::chrono::steady_clock::time_point last_arrival_;
  bool stopping_ = false;
  bool abandoned_ = false;
  std::atomic<std::size_t> batches_{0};
  std::atomic<std::size_t> batch_refusals_{0};
  std::thread thread_;
};

}  // namespace ferry::detail
