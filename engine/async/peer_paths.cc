// The paths of engine::copy_peer (peer_path): one cuMemcpyPeerAsync, the copy split over several streams
// (so that several copy engines move it) and joined back by events, or the copy kernel on the engine's
// device over peer access. Each path is the prepared transfer's enqueue: the engine submits, arms and
// completes it as any single-submission op, so it completes once, and cancellation stops it until it is
// enqueued.
#include "ferry/detail/peer_paths.hpp"

#include "engine/async/driver_handle.hpp"
#include "engine/transfer/prepared_transfer.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "engine/async/caller_context.hpp"
#include "engine/async/process_exit.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "engine/kernels/launch.hpp"

namespace ferry::detail {

namespace {

constexpr std::size_t most_split_ways = 16;
// Pieces of a split copy start on this boundary, so that each piece's copy is as wide as the whole's.
constexpr std::size_t piece_alignment = 4096;

std::string device_name(int ordinal) { return "device " + std::to_string(ordinal); }

}  // namespace

class peer_lanes {
 public:
  peer_lanes(CUcontext context, CUdevice device, const engine_options& options)
      : driver_(detail::driver()), context_(context), device_(device), path_(options.peer),
        split_min_bytes_(options.peer_split_min_bytes), ways_(options.peer_split_ways), groups_(options.pool_streams) {}
  peer_lanes(const peer_lanes&) = delete;
  peer_lanes& operator=(const peer_lanes&) = delete;
  // Every copy that used the lanes holds them until the GPU is done with it, so nothing is pending here
  // but work the engine already waited for.
  ~peer_lanes() {
    if (process_exiting()) {
      // The driver may be gone; it releases what it holds with the process.
      for (group& lanes : groups_) lanes.abandon();
      return;
    }
    caller_context in_engine(driver_, context_);
    for (group& lanes : groups_) lanes.release();
  }

  peer_path path() const noexcept { return path_; }
  std::size_t split_min_bytes() const noexcept { return split_min_bytes_; }
  CUcontext context() const noexcept { return context_; }
  CUdevice device() const noexcept { return device_; }
  const driver_table& driver() const noexcept { return driver_; }

  // Puts a split copy on `stream` (the engine's context is current): pieces 1.. on lanes that wait for
  // the work before it on `stream`, piece 0 on `stream`, and `stream` waits for every lane. On a failure
  // the pieces already enqueued are waited for before the status is returned: the op then completes at
  // once, and the caller's memory is free when it hears.
  CUresult enqueue_split(CUdeviceptr destination, CUcontext destination_context, CUdeviceptr source,
                         CUcontext source_context, std::size_t bytes, CUstream stream) {
    const std::size_t piece = std::max(piece_alignment, (bytes / ways_ + piece_alignment - 1) / piece_alignment *
                                                            piece_alignment);
    const std::size_t pieces = (bytes + piece - 1) / piece;
    group& lanes = groups_[next_group_.fetch_add(1, std::memory_order_relaxed) % groups_.size()];
    std::lock_guard hold(lanes.mutex);
    if (CUresult made = lanes.make(driver_, ways_ - 1); made != CUDA_SUCCESS) return made;
    // The events are reused by the next split on this group at once: a stream waits on the record an
    // event had when cuStreamWaitEvent was called, not on a later one.
    CUresult status = driver_.cuEventRecord(lanes.fork.get(), stream);
    std::size_t busy = 0;  // lanes given a piece
    for (std::size_t i = 1; i < pieces && status == CUDA_SUCCESS; ++i) {
      const CUstream lane = lanes.streams[i - 1].get();
      const std::size_t offset = i * piece;
      const std::size_t length = std::min(piece, bytes - offset);
      status = driver_.cuStreamWaitEvent(lane, lanes.fork.get(), 0);
      if (status != CUDA_SUCCESS) break;
      status = driver_.cuMemcpyPeerAsync(destination + offset, destination_context, source + offset, source_context,
                                         length, lane);
      if (status != CUDA_SUCCESS) break;
      busy = i;
      status = driver_.cuEventRecord(lanes.joins[i - 1].get(), lane);
      if (status == CUDA_SUCCESS) status = driver_.cuStreamWaitEvent(stream, lanes.joins[i - 1].get(), 0);
    }
    if (status == CUDA_SUCCESS) {
      status = driver_.cuMemcpyPeerAsync(destination, destination_context, source, source_context,
                                         std::min(piece, bytes), stream);
    }
    if (status != CUDA_SUCCESS) {
      for (std::size_t i = 0; i < busy; ++i) driver_.cuStreamSynchronize(lanes.streams[i].get());
    }
    return status;
  }

  void count(peer_path taken) noexcept {
    switch (taken) {
      case peer_path::split: split_.fetch_add(1, std::memory_order_relaxed); break;
      case peer_path::kernel: kernel_.fetch_add(1, std::memory_order_relaxed); break;
      default: copy_engine_.fetch_add(1, std::memory_order_relaxed); break;
    }
  }
  peer_counts counts() const noexcept {
    return {copy_engine_.load(std::memory_order_relaxed), split_.load(std::memory_order_relaxed),
            kernel_.load(std::memory_order_relaxed)};
  }

 private:
  // Streams and events for one split at a time; splits on different pool streams take different groups,
  // so that copies both ways at once do not queue behind each other on the lanes.
  struct group {
    std::mutex mutex;
    std::vector<owned_stream> streams;
    std::vector<owned_event> joins;
    owned_event fork;

    CUresult make(const driver_table& driver, std::size_t lanes) {
      if (fork) return CUDA_SUCCESS;
      CUevent made = nullptr;
      CUresult status = driver.cuEventCreate(&made, CU_EVENT_DISABLE_TIMING);
      fork = owned_event(driver, made);
      while (status == CUDA_SUCCESS && streams.size() < lanes) {
        CUstream lane = nullptr;
        status = driver.cuStreamCreate(&lane, CU_STREAM_NON_BLOCKING);
        if (status != CUDA_SUCCESS) break;
        streams.emplace_back(driver, lane);
        CUevent join = nullptr;
        status = driver.cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
        if (status == CUDA_SUCCESS) joins.emplace_back(driver, join);
      }
      if (status != CUDA_SUCCESS) release();  // all or nothing: the next split tries again
      return status;
    }
    void release() noexcept {
      streams.clear();
      joins.clear();
      fork.reset();
    }
    void abandon() noexcept {
      for (owned_stream& lane : streams) lane.abandon();
      for (owned_event& join : joins) join.abandon();
      fork.abandon();
    }
  };

  const driver_table& driver_;
  CUcontext context_;
  CUdevice device_;
  peer_path path_;
  std::size_t split_min_bytes_;
  std::size_t ways_;
  std::vector<group> groups_;
  std::atomic<std::size_t> next_group_{0};
  std::atomic<std::size_t> copy_engine_{0}, split_{0}, kernel_{0};
};

namespace {

bool known_path(peer_path path) {
  return path == peer_path::automatic || path == peer_path::copy_engine || path == peer_path::split ||
         path == peer_path::kernel;
}

int device_of(const driver_table& driver, std::string_view operation, CUdeviceptr pointer, std::string_view side) {
  int ordinal = -1;
  check(driver.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer),
        "cuPointerGetAttribute", std::string(operation) + ": the device of the " + std::string(side) + " " + hex(pointer));
  return ordinal;
}

// The kernel runs in the engine's context and must reach both sides there: a side of another context is
// on another device, a peer of the engine's, whose context the engine's context is given access to here
// (if it has none yet). Memory of another context on the engine's own device is refused: the path is
// for a peer device's memory (peer access joins devices, not contexts), and a copy within one device is
// the copy engine's. (Contexts of one device do share their memory with each other's kernels: the
// batch kernel moves such memory, tests/engine:foreign_memory_test.)
void prepare_kernel(const prepared_transfer& transfer, const peer_lanes& lanes, CUcontext source_context,
                    CUcontext destination_context) {
  const driver_table& driver = lanes.driver();
  const std::string_view operation = transfer.operation;
  const int engine_device = static_cast<int>(lanes.device());
  const std::string chosen = "peer_path is kernel, which runs in the engine's context on " +
                             device_name(engine_device) + "; ";
  int unified = 0;
  check(driver.cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, lanes.device()),
        "cuDeviceGetAttribute", device_name(engine_device) + " unified addressing");
  if (unified != 1) {
    throw_invalid_argument(operation, chosen + "it has no unified addressing: take copy_engine or split");
  }
  struct side {
    const char* name;
    CUdeviceptr address;
    CUcontext context;
  };
  for (const side& end : {side{"source", transfer.source.address, source_context},
                          side{"destination", transfer.destination.address, destination_context}}) {
    if (end.context == lanes.context()) continue;
    const int other_device = device_of(driver, operation, end.address, end.name);
    if (other_device == engine_device) {
      throw_invalid_argument(operation, chosen + "the " + end.name + " is memory of another context of that device (" +
                                            hex(end.context) + "), which the kernel path does not take (it is for a "
                                            "peer device's memory): take copy_engine or split");
    }
    int can = 0;
    check(driver.cuDeviceCanAccessPeer(&can, lanes.device(), static_cast<CUdevice>(other_device)),
          "cuDeviceCanAccessPeer", device_name(engine_device) + " -> " + device_name(other_device));
    if (can == 0) {
      throw_invalid_argument(operation, chosen + "the " + end.name + " is on " + device_name(other_device) +
                                            ", which is not its peer (cuDeviceCanAccessPeer is 0): take copy_engine "
                                            "or split");
    }
    caller_context in_engine(driver, lanes.context());
    const CUresult enabled = driver.cuCtxEnablePeerAccess(end.context, 0);
    if (enabled != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
      check(enabled, "cuCtxEnablePeerAccess",
            std::string(operation) + ": the engine's context " + hex(lanes.context()) + " to context " +
                hex(end.context) + " on " + device_name(other_device));
    }
  }
}

// automatic: split large copies between two devices, one copy engine for the rest.
peer_path resolve(const prepared_transfer& transfer, const peer_lanes& lanes) {
  if (transfer.bytes < lanes.split_min_bytes()) return peer_path::copy_engine;
  const driver_table& driver = lanes.driver();
  const int source_device = device_of(driver, transfer.operation, transfer.source.address, "source");
  const int destination_device = device_of(driver, transfer.operation, transfer.destination.address, "destination");
  return source_device != destination_device ? peer_path::split : peer_path::copy_engine;
}

}  // namespace

std::shared_ptr<peer_lanes> make_peer_lanes(CUcontext engine_context, CUdevice device, const engine_options& options) {
  if (!known_path(options.peer)) {
    throw_invalid_argument("engine", "peer " + std::to_string(static_cast<int>(options.peer)) + " is not a peer_path");
  }
  if (options.peer_split_ways < 2 || options.peer_split_ways > most_split_ways) {
    throw_invalid_argument("engine", "peer_split_ways is " + std::to_string(options.peer_split_ways) +
                                         "; a split copy takes 2 to " + std::to_string(most_split_ways) + " streams");
  }
  return std::make_shared<peer_lanes>(engine_context, device, options);
}

void choose_peer_path(transfer_request& request, peer_path path, const std::shared_ptr<peer_lanes>& lanes,
                      CUcontext source_context, CUcontext destination_context) {
  prepared_transfer& transfer = prepared_of(request);
  if (!known_path(path)) {
    throw_invalid_argument(transfer.operation,
                           "transfer_options::peer " + std::to_string(static_cast<int>(path)) + " is not a peer_path");
  }
  if (path == peer_path::automatic) path = lanes->path();
  if (path == peer_path::automatic) path = resolve(transfer, *lanes);
  const CUdeviceptr source = transfer.source.address;
  const CUdeviceptr destination = transfer.destination.address;
  const std::size_t bytes = transfer.bytes;
  if (path == peer_path::split) {
    transfer.enqueue = [lanes, source, source_context, destination, destination_context, bytes](
                           const prepared_transfer&, CUstream stream) {
      return lanes->enqueue_split(destination, destination_context, source, source_context, bytes, stream);
    };
    transfer.extra += " (split)";
  } else if (path == peer_path::kernel) {
    prepare_kernel(transfer, *lanes, source_context, destination_context);
    transfer.enqueue = [source, destination, bytes](const prepared_transfer&, CUstream stream) {
      return launch_copy_span(source, destination, bytes, stream);
    };
    transfer.extra += " (kernel)";
  }
  lanes->count(path);
}

peer_counts counts_of(const peer_lanes& lanes) noexcept { return lanes.counts(); }

}  // namespace ferry::detail
