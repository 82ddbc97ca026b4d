#include "engine/async/copy_batcher.hpp"

#include <string>
#include <utility>

#include "engine/async/caller_context.hpp"

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

namespace {

// Copies cancelled before their batch is submitted are never submitted: they hear not_submitted now.
std::vector<copy_batcher::copy> drop_cancelled(std::vector<copy_batcher::copy> batch) {
  std::vector<copy_batcher::copy> live;
  live.reserve(batch.size());
  for (copy_batcher::copy& item : batch) {
    if (item.op->cancel_requested()) {
      item.done(copy_batcher::not_submitted);
    } else {
      live.push_back(std::move(item));
    }
  }
  return live;
}

// A batch as cuMemcpyBatchAsync takes it: one array per field, one attribute per copy.
struct batch_arrays {
  std::vector<CUdeviceptr> destinations;
  std::vector<CUdeviceptr> sources;
  std::vector<std::size_t> sizes;
  std::vector<CUmemcpyAttributes> attributes;
  std::vector<std::size_t> attribute_indices;
};

batch_arrays describe_batch(const std::vector<copy_batcher::copy>& live, int ordinal) {
  const std::size_t count = live.size();
  batch_arrays arrays{std::vector<CUdeviceptr>(count), std::vector<CUdeviceptr>(count), std::vector<std::size_t>(count),
                      std::vector<CUmemcpyAttributes>(count), std::vector<std::size_t>(count)};
  for (std::size_t i = 0; i < count; ++i) {
    arrays.destinations[i] = live[i].destination;
    arrays.sources[i] = live[i].source;
    arrays.sizes[i] = live[i].bytes;
    // An attribute per copy: the driver refuses copies whose location hints are left invalid, and a
    // batch may mix directions.
    CUmemcpyAttributes& a = arrays.attributes[i];
    // Stream order is all the copies need: the host does not touch their memory until completion.
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    const bool from_host = live[i].way == direction::host_to_device;
    const bool to_host = live[i].way == direction::device_to_host;
    a.srcLocHint.type = from_host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    a.srcLocHint.id = from_host ? 0 : ordinal;
    a.dstLocHint.type = to_host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    a.dstLocHint.id = to_host ? 0 : ordinal;
    arrays.attribute_indices[i] = i;
  }
  return arrays;
}

// One copy of a refused batch, through the call a copy outside a batch makes. Batched copies are
// page-locked: a host side is pinned.
CUresult enqueue_alone(const copy_batcher::copy& item, CUstream stream) {
  const endpoint source{item.way == direction::host_to_device ? memory_kind::pinned_host : memory_kind::device,
                        item.source, "source"};
  const endpoint destination{item.way == direction::device_to_host ? memory_kind::pinned_host : memory_kind::device,
                             item.destination, "destination"};
  const char* call = nullptr;
  return enqueue_copy_1d(plan_1d{item.bytes, item.way}, source, destination, stream, call);
}

}  // namespace

void copy_batcher::submit(std::vector<copy> batch) {
  std::vector<copy> live = drop_cancelled(std::move(batch));
  if (live.empty()) return;
  // Full batches are submitted on the offering thread, which need not have the engine's context.
  caller_context in_engine(driver_, context_);
  const CUstream stream = next_stream_();
  const CUresult status = enqueue(live, stream);
  batches_++;
  if (status != CUDA_SUCCESS) {
    for (copy& item : live) item.done(status);
    return;
  }
  watch(std::move(live), stream);
}

CUresult copy_batcher::enqueue(const std::vector<copy>& live, CUstream stream) {
  batch_arrays arrays = describe_batch(live, ordinal_);
  CUresult status = driver_.cuMemcpyBatchAsync(arrays.destinations.data(), arrays.sources.data(), arrays.sizes.data(),
                                               live.size(), arrays.attributes.data(),
                                               arrays.attribute_indices.data(), arrays.attributes.size(), stream);
  if (status == CUDA_SUCCESS) return status;
  // A driver without batched copies, or a batch it refuses as a whole (it enqueues nothing then):
  // one call per copy, so that each copy's own status reaches its op; still one event for the lot.
  report_refusal(status, live.size());
  status = CUDA_SUCCESS;
  for (std::size_t i = 0; i < live.size() && status == CUDA_SUCCESS; ++i) status = enqueue_alone(live[i], stream);
  return status;
}

void copy_batcher::report_refusal(CUresult status, std::size_t copies) {
  batch_refusals_++;
  if (!report_) return;
  const char* name = nullptr;
  driver_.cuGetErrorName(status, &name);
  report_("cuMemcpyBatchAsync refused a batch of " + std::to_string(copies) + " copies with " +
          (name ? name : std::to_string(static_cast<int>(status))) + "; submitted one by one");
}

void copy_batcher::watch(std::vector<copy> live, CUstream stream) {
  for (copy& item : live) item.op->mark_submitted();
  auto shared = std::make_shared<std::vector<copy>>(std::move(live));
  const CUresult status = bridge_.watch(stream, [shared](CUresult result) {
    for (copy& item : *shared) item.done(result);
  });
  if (status != CUDA_SUCCESS) {
    const CUresult drained = driver_.cuStreamSynchronize(stream);
    for (copy& item : *shared) item.done(drained == CUDA_SUCCESS ? status : drained);
  }
}

}  // namespace ferry::detail
