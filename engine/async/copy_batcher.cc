#include "engine/async/copy_batcher.hpp"

namespace ferry::detail {

copy_batcher::copy_batcher(const driver_table& driver, CUcontext context, int ordinal, completion_bridge& bridge,
                           std::function<CUstream()> next_stream, std::chrono::microseconds window,
                           std::size_t most_copies, std::function<void(const std::string&)> report)
    : driver_(driver),
      context_(context),
      ordinal_(ordinal),
      bridge_(bridge),
      next_stream_(std::move(next_stream)),
      window_(window),
      most_copies_(most_copies),
      report_(std::move(report)),
      thread_([this] { run(); }) {}

copy_batcher::~copy_batcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void copy_batcher::stop_for_exit() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandoned_ = true;
    open_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool copy_batcher::offer(copy& item) {
  std::vector<copy> full;
  {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const bool burst = now - last_arrival_ < window_;
    last_arrival_ = now;
    if (stopping_ || (!burst && open_.empty())) return false;  // (a stopped batcher takes nothing)
    const bool opened = open_.empty();
    if (opened) opened_ = now;
    open_.push_back(std::move(item));
    if (open_.size() >= most_copies_) {
      full.swap(open_);
    } else if (opened) {
      // Only the first copy of a batch wakes the batcher thread (to time the window); later ones join a
      // batch it already waits for, and waking it for each would cost a system call per copy. Under the
      // lock: once it is released the batch may complete and the engine destroy the batcher.
      wake_.notify_one();
    }
  }
  if (!full.empty()) submit(std::move(full));
  return true;
}

void copy_batcher::run() {
  driver_.cuCtxSetCurrent(context_);
  std::unique_lock lock(mutex_);
  while (!abandoned_) {
    if (open_.empty()) {
      if (stopping_) break;
      wake_.wait(lock, [&] { return stopping_ || !open_.empty(); });
      continue;
    }
    const auto due = opened_ + window_;
    if (!stopping_ && std::chrono::steady_clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    std::vector<copy> batch;
    batch.swap(open_);
    lock.unlock();
    submit(std::move(batch));
    lock.lock();
  }
}

void copy_batcher::submit(std::vector<copy> batch) {
  // Cancelled before submission: never submitted.
  std::vector<copy> live;
  live.reserve(batch.size());
  for (copy& item : batch) {
    if (item.op->cancel_requested()) {
      item.done(not_submitted);
    } else {
      live.push_back(std::move(item));
    }
  }
  if (live.empty()) return;
  std::vector<CUdeviceptr> destinations, sources;
  std::vector<std::size_t> sizes;
  for (const copy& item : live) {
    destinations.push_back(item.destination);
    sources.push_back(item.source);
    sizes.push_back(item.bytes);
  }
  // One attribute per copy: the driver refuses copies whose location hints are left invalid, and a
  // batch may mix directions.
  std::vector<CUmemcpyAttributes> attributes(live.size());
  std::vector<std::size_t> attribute_indices(live.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    CUmemcpyAttributes& a = attributes[i];
    // Stream order is all the copies need: the host does not touch their memory until completion.
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    const bool from_host = live[i].way == direction::host_to_device;
    const bool to_host = live[i].way == direction::device_to_host;
    a.srcLocHint.type = from_host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    a.srcLocHint.id = from_host ? 0 : ordinal_;
    a.dstLocHint.type = to_host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    a.dstLocHint.id = to_host ? 0 : ordinal_;
    attribute_indices[i] = i;
  }
  // Full batches are submitted on the offering thread, which need not have the engine's context.
  CUcontext current = nullptr;
  driver_.cuCtxGetCurrent(&current);
  const bool pushed = current != context_ && driver_.cuCtxPushCurrent(context_) == CUDA_SUCCESS;
  struct pop_on_exit {
    const driver_table& driver;
    bool pushed;
    ~pop_on_exit() {
      CUcontext popped = nullptr;
      if (pushed) driver.cuCtxPopCurrent(&popped);
    }
  } restore{driver_, pushed};
  const CUstream stream = next_stream_();
  CUresult status = driver_.cuMemcpyBatchAsync(destinations.data(), sources.data(), sizes.data(), live.size(),
                                               attributes.data(), attribute_indices.data(), attributes.size(), stream);
  if (status != CUDA_SUCCESS) {
    // A driver without batched copies, or a batch it refuses as a whole (it enqueues nothing then):
    // one call per copy, so that each copy's own status reaches its op; still one event for the lot.
    batch_refusals_++;
    if (report_) {
      const char* name = nullptr;
      driver_.cuGetErrorName(status, &name);
      report_("cuMemcpyBatchAsync refused a batch of " + std::to_string(live.size()) + " copies with " +
              (name ? name : std::to_string(static_cast<int>(status))) + "; submitted one by one");
    }
    status = CUDA_SUCCESS;
    for (std::size_t i = 0; i < live.size() && status == CUDA_SUCCESS; ++i) {
      switch (live[i].way) {
        case direction::host_to_device:
          status = driver_.cuMemcpyHtoDAsync(destinations[i], reinterpret_cast<const void*>(sources[i]), sizes[i], stream);
          break;
        case direction::device_to_host:
          status = driver_.cuMemcpyDtoHAsync(reinterpret_cast<void*>(destinations[i]), sources[i], sizes[i], stream);
          break;
        case direction::device_to_device:
          status = driver_.cuMemcpyDtoDAsync(destinations[i], sources[i], sizes[i], stream);
          break;
      }
    }
  }
  batches_++;
  if (status != CUDA_SUCCESS) {
    for (copy& item : live) item.done(status);
    return;
  }
  for (copy& item : live) item.op->mark_submitted();
  auto shared = std::make_shared<std::vector<copy>>(std::move(live));
  status = bridge_.watch(stream, [shared](CUresult result) {
    for (copy& item : *shared) item.done(result);
  });
  if (status != CUDA_SUCCESS) {
    const CUresult drained = driver_.cuStreamSynchronize(stream);
    for (copy& item : *shared) item.done(drained == CUDA_SUCCESS ? status : drained);
  }
}

}  // namespace ferry::detail
