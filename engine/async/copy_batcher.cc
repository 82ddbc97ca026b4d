#include "engine/async/copy_batcher.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/async/caller_context.hpp"
#include "engine/errors/check.hpp"
#include "engine/kernels/launch.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

namespace {

// A stream of the current context's highest priority, or none where the driver makes none.
owned_stream highest_priority_stream(const driver_table& driver) noexcept {
  int least = 0;
  int greatest = 0;
  CUstream made = nullptr;
  if (driver.cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS ||
      driver.cuStreamCreateWithPriority(&made, CU_STREAM_NON_BLOCKING, greatest) != CUDA_SUCCESS) {
    return {};
  }
  return owned_stream(driver, made);
}

template <class T>
std::vector<T> with_capacity(std::size_t count) {
  std::vector<T> made;
  made.reserve(count);
  return made;
}

}  // namespace

copy_batcher::copy_batcher(const driver_table& driver, CUcontext context, int ordinal, completion_bridge& bridge,
                           std::function<CUstream()> next_stream, settings chosen, finisher finish,
                           std::function<void(const std::string&)> report)
    : driver_(driver),
      context_(context),
      ordinal_(ordinal),
      bridge_(bridge),
      next_stream_(std::move(next_stream)),
      settings_(chosen),
      priority_stream_(chosen.kernel_usable ? highest_priority_stream(driver) : owned_stream{}),
      kernel_usable_(chosen.kernel_usable),
      // Three words per copy: the sources, destinations and sizes ferry_copy_blocks reads.
      slabs_(driver, 3 * chosen.most_copies),
      finish_(std::move(finish)),
      report_(std::move(report)),
      open_(with_capacity<copy>(chosen.most_copies)),
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
  slabs_.abandon();
}

// The open batch's copies, moved into a vector of the calling thread's: open_ keeps its memory, which the
// offering thread allocated once. A batch's vector is freed by the thread that answers its copies, and
// memory freed on another thread than the one that allocated it goes back under the allocating
// thread's arena lock, which that thread (an io thread, allocating its coroutines' frames) then waits for.
std::vector<copy_batcher::copy> copy_batcher::take_open() {
  std::vector<copy> batch(std::make_move_iterator(open_.begin()), std::make_move_iterator(open_.end()));
  open_.clear();
  return batch;
}

bool copy_batcher::offer(copy& item) {
  std::vector<copy> full;
  {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const bool burst = now - last_arrival_ < settings_.window;
    last_arrival_ = now;
    if (stopping_ || (!burst && open_.empty())) return false;  // (a stopped batcher takes nothing)
    const bool opened = open_.empty();
    if (opened) opened_ = now;
    open_.push_back(std::move(item));
    if (open_.size() >= settings_.most_copies) {
      full = take_open();
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
    const auto due = opened_ + settings_.window;
    if (!stopping_ && std::chrono::steady_clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    std::vector<copy> batch = take_open();
    lock.unlock();
    submit(std::move(batch));
    lock.lock();
  }
}

namespace {

// A batch as cuMemcpyBatchAsync takes it: one array per field, one attribute per copy.
struct batch_arrays {
  std::vector<CUdeviceptr> destinations;
  std::vector<CUdeviceptr> sources;
  std::vector<std::size_t> sizes;
  std::vector<CUmemcpyAttributes> attributes;
  std::vector<std::size_t> attribute_indices;
};

batch_arrays describe_batch(const copy_batcher::copy* live, std::size_t count, int ordinal) {
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

// Copies cancelled before their batch is submitted are never submitted: they hear not_submitted now.
std::vector<copy_batcher::copy> copy_batcher::drop_cancelled(std::vector<copy> batch) {
  std::vector<copy> live;
  live.reserve(batch.size());
  for (copy& item : batch) {
    if (item.op->cancel_requested()) {
      finish_(item, not_submitted);
    } else {
      live.push_back(std::move(item));
    }
  }
  return live;
}

void copy_batcher::submit(std::vector<copy> batch) {
  std::vector<copy> live = drop_cancelled(std::move(batch));
  if (live.empty()) return;
  // Full batches are submitted on the offering thread, which need not have the engine's context.
  caller_context in_engine(driver_, context_);
  const std::size_t by_kernel = kernel_share(live);
  const CUstream stream = by_kernel > 0 && priority_stream_ ? priority_stream_.get() : next_stream_();
  std::uint64_t* slab = nullptr;
  const CUresult status = enqueue(live, by_kernel, stream, slab);
  batches_++;
  if (status != CUDA_SUCCESS) {
    // Part of the batch may be on the stream already: the GPU finishes with its memory (and the slab)
    // before anyone hears.
    driver_.cuStreamSynchronize(stream);
    slabs_.release(slab);
    for (copy& item : live) finish_(item, status);
    return;
  }
  watch(std::move(live), stream, slab);
}

std::size_t copy_batcher::kernel_share(std::vector<copy>& live) const {
  if (!kernel_usable_.load(std::memory_order_relaxed)) return 0;
  std::size_t bytes = 0;
  for (const copy& item : live) bytes += item.bytes;
  const bool automatic_takes_kernel =
      settings_.path == batch_path::kernel ||
      (settings_.path == batch_path::automatic && settings_.automatic.suits(live.size(), bytes));
  const auto end = std::stable_partition(live.begin(), live.end(), [&](const copy& item) {
    return item.kernel_reaches &&
           (item.path == batch_path::kernel || (item.path == batch_path::automatic && automatic_takes_kernel));
  });
  return static_cast<std::size_t>(end - live.begin());
}

CUresult copy_batcher::enqueue(std::vector<copy>& live, std::size_t by_kernel, CUstream stream, std::uint64_t*& slab) {
  if (by_kernel > 0) {
    const CUresult launched = launch_kernel(live.data(), by_kernel, stream, slab);
    if (launched == CUDA_SUCCESS) {
      kernel_batches_++;
    } else if (is_sticky(launched)) {
      return launched;
    } else {
      // The copy engine takes them instead; the kernel is not tried again unless only the slab was
      // missing (memory may come back), since a launch refused now would be refused every time.
      if (slab != nullptr) kernel_usable_.store(false, std::memory_order_relaxed);
      slabs_.release(slab);
      slab = nullptr;
      report_kernel_refusal(launched, by_kernel);
      by_kernel = 0;
    }
  }
  if (by_kernel == live.size()) return CUDA_SUCCESS;
  copy_engine_batches_++;
  return enqueue_copy_engine(live.data() + by_kernel, live.size() - by_kernel, stream);
}

CUresult copy_batcher::launch_kernel(const copy* first, std::size_t count, CUstream stream, std::uint64_t*& slab) {
  CUresult status = CUDA_SUCCESS;
  slab = slabs_.acquire(status);
  if (slab == nullptr) return status;
  for (std::size_t i = 0; i < count; ++i) {
    slab[i] = first[i].source;
    slab[count + i] = first[i].destination;
    slab[2 * count + i] = first[i].bytes;
  }
  // Host addresses are device addresses here (unified addressing; kernel_usable says the device can
  // use them for registered memory too), so the kernel reads the slab and the host blocks in place.
  const auto words = reinterpret_cast<CUdeviceptr>(slab);
  const std::size_t array_bytes = count * sizeof(std::uint64_t);
  return launch_copy_blocks(words, words + array_bytes, words + 2 * array_bytes, count, stream);
}

CUresult copy_batcher::enqueue_copy_engine(const copy* first, std::size_t count, CUstream stream) {
  batch_arrays arrays = describe_batch(first, count, ordinal_);
  CUresult status = driver_.cuMemcpyBatchAsync(arrays.destinations.data(), arrays.sources.data(), arrays.sizes.data(),
                                               count, arrays.attributes.data(), arrays.attribute_indices.data(),
                                               arrays.attributes.size(), stream);
  if (status == CUDA_SUCCESS) return status;
  // A driver without batched copies, or a batch it refuses as a whole (it enqueues nothing then):
  // one call per copy, so that each copy's own status reaches its op; still one event for the lot.
  report_refusal(status, count);
  status = CUDA_SUCCESS;
  for (std::size_t i = 0; i < count && status == CUDA_SUCCESS; ++i) status = enqueue_alone(first[i], stream);
  return status;
}

void copy_batcher::report_refusal(CUresult status, std::size_t copies) {
  batch_refusals_++;
  if (!report_) return;
  report_("cuMemcpyBatchAsync refused a batch of " + std::to_string(copies) + " copies with " +
          status_name(status) + "; submitted one by one");
}

void copy_batcher::report_kernel_refusal(CUresult status, std::size_t copies) {
  if (!report_) return;
  report_("the copy kernel (ferry_copy_blocks) could not take a batch of " + std::to_string(copies) + " copies (" +
          status_name(status) + "); submitted through the copy engine");
}

void copy_batcher::watch(std::vector<copy> live, CUstream stream, std::uint64_t* slab) {
  for (copy& item : live) item.op->mark_submitted();
  auto shared = std::make_shared<std::vector<copy>>(std::move(live));
  // The slab goes back before the copies are answered: once the last one is, the engine (and with it
  // this batcher) may be destroyed.
  const CUresult status = bridge_.watch(stream, [this, shared, slab](CUresult result) {
    slabs_.release(slab);
    for (copy& item : *shared) finish_(item, result);
  });
  if (status != CUDA_SUCCESS) {
    const CUresult drained = driver_.cuStreamSynchronize(stream);
    slabs_.release(slab);
    for (copy& item : *shared) finish_(item, drained == CUDA_SUCCESS ? status : drained);
  }
}

}  // namespace ferry::detail
