// The engine's machinery: validated transfers are submitted to streams (in order per caller stream),
// watched by the completion bridge, and completed through their operation, which posts to the handler's
// executor. Pageable transfers move through the staging pool chunk by chunk.
#include "ferry/detail/engine_core.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <thread>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/async/completion_bridge.hpp"
#include "engine/async/copy_batcher.hpp"
#include "engine/async/copy_crew.hpp"
#include "engine/async/process_exit.hpp"
#include "engine/async/registration_cache.hpp"
#include "engine/async/staging_pool.hpp"
#include "engine/async/stream_sequencer.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "ferry/detail/check.hpp"
#include "ferry/detail/stage_trace.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {
namespace {

thread_local CUcontext thread_context = nullptr;

// Engine threads (workers, the bridge) make the engine's context current once.
void use_context(const driver_table& driver, CUcontext context) {
  if (thread_context != context) {
    driver.cuCtxSetCurrent(context);
    thread_context = context;
  }
}

// Makes the engine's context current on a caller's thread for one submission, then restores the caller's.
class caller_context {
 public:
  caller_context(const driver_table& driver, CUcontext context) : driver_(driver) {
    CUcontext current = nullptr;
    driver_.cuCtxGetCurrent(&current);
    if (current != context) {
      pushed_ = driver_.cuCtxPushCurrent(context) == CUDA_SUCCESS;
    }
  }
  ~caller_context() {
    if (pushed_) {
      CUcontext popped = nullptr;
      driver_.cuCtxPopCurrent(&popped);
    }
  }

 private:
  const driver_table& driver_;
  bool pushed_ = false;
};

}  // namespace

struct engine_core::impl {
  impl(const engine_options& options);
  ~impl();

  // Operation bookkeeping for wait_all: the sequence numbers of ops not yet completed.
  std::uint64_t admit();
  void retire(std::uint64_t sequence);
  void complete(const std::shared_ptr<operation>& op, std::uint64_t sequence);
  void finish_wait(const std::shared_ptr<operation>& op);  // completes a wait_all

  void fail(const std::shared_ptr<operation>& op, CUresult status, const std::string& where);
  std::string where(const prepared_transfer& transfer, CUstream stream) const;

  void run_single(std::shared_ptr<operation> op, std::uint64_t sequence, std::shared_ptr<prepared_transfer> transfer,
                  CUstream stream, bool sequenced);
  // A single submission's work put on a stream, and its completion armed right behind it (so that the
  // GPU signals as soon as the work is done, whatever the engine does before it hands the op over).
  struct submission {
    CUresult enqueued = CUDA_SUCCESS;
    CUresult armed = CUDA_SUCCESS;
    completion_bridge::ticket ticket;
  };
  submission enqueue_and_arm(const prepared_transfer& transfer, CUstream stream);
  // Hands the op to the bridge, or fails it.
  void watch_submitted(std::shared_ptr<operation> op, std::uint64_t sequence,
                       std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced,
                       submission submitted);
  // The fast path of start(): see its definition. False when the transfer must take the planner's path.
  bool start_at_once(operation_factory& make_op, prepared_transfer& prepared, std::optional<CUstream> stream);
  // Whether the batcher is offered this page-locked transfer (small, on a pool stream).
  bool batchable(const prepared_transfer& transfer, bool sequenced) const;
  // Counts a batchable copy in flight until the returned token (kept by its transfer) goes. Only while
  // another is in flight is a copy offered to the batcher: copies of a request/response loop arrive
  // within the batch window of each other, and each would wait for a batch that never fills.
  std::shared_ptr<void> count_small_copy();
  std::atomic<std::size_t> small_copies_in_flight{0};
  void run_staged(std::shared_ptr<operation> op, std::uint64_t sequence, std::shared_ptr<prepared_transfer> transfer,
                  CUstream stream, bool sequenced);
  void post_work(std::function<void()> work);
  // Process exit: stops every engine thread at once; the driver is called no more.
  void stop_for_exit();
  // memcpy split among the copier threads; the calling thread copies a slice too and returns when all are done.
  void parallel_copy(std::byte* destination, const std::byte* source, std::size_t bytes);

  const driver_table& driver;
  engine_options options;
  int ordinal;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::vector<CUstream> pool;
  std::atomic<std::size_t> next_pool_stream{0};
  std::atomic<int> sticky{CUDA_SUCCESS};

  std::unique_ptr<completion_bridge> bridge;
  std::unique_ptr<staging_pool> staging;
  std::unique_ptr<registration_cache> registrations;
  std::unique_ptr<copy_batcher> batcher;
  int exit_ticket = -1;
  std::atomic<bool> stopped_for_exit{false};  // the process is exiting: no more driver calls
  std::atomic<std::size_t> pinned_plans{0}, registered_plans{0}, staged_plans{0}, batched_plans{0};
  // Counts the plan a transfer takes and reports it (engine_options::on_plan): once the plan is final, so
  // that the report and plan_counts() always agree.
  void record_plan(const prepared_transfer& transfer, transfer_plan plan);
  // Read once, and the machine-dependent defaults below chosen from it in one place:
  // std::thread::hardware_concurrency() opens /sys/devices/system/cpu/online on each call (glibc), a few
  // microseconds that every op paid while executor_spin() asked it.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::chrono::microseconds executor_spin =
      options.executor_spin ? *options.executor_spin
                            : cores >= 4 ? std::chrono::microseconds(5000) : std::chrono::microseconds(0);
  std::size_t copier_count;
  boost::asio::thread_pool workers;   // submissions and continuations; they may wait for copiers
  copy_crew copiers;                  // memcpy slices only; they never wait, so workers cannot deadlock
  stream_sequencer sequencer;

  std::mutex live_mutex;
  std::condition_variable live_changed;
  std::uint64_t next_sequence = 0;
  std::set<std::uint64_t> live;
  std::multimap<std::uint64_t, std::shared_ptr<operation>> waiters;  // wait_all ops by sequence
};

engine_core::impl::impl(const engine_options& opts)
    : driver(detail::driver()),
      options(opts),
      ordinal(opts.device),
      copier_count(opts.copy_threads != 0 ? opts.copy_threads : std::clamp<std::size_t>(cores, 1, 8)),
      workers(2),
      // The caller of parallel_copy copies too. The crew spins between chunks only where cores are to spare.
      copiers(copier_count - 1, cores >= 4 ? std::chrono::microseconds(500) : std::chrono::microseconds(0)),
      sequencer([this](stream_sequencer::submitter next) { post_work(std::move(next)); }) {
  int count = 0;
  check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count) {
    throw_invalid_argument("engine", "device " + std::to_string(ordinal) + " is not in [0, " + std::to_string(count) + ")");
  }
  if (options.pool_streams == 0) throw_invalid_argument("engine", "pool_streams is 0; the engine needs at least one");
  if (options.staging_chunk_bytes == 0 || options.staging_chunks == 0) {
    throw_invalid_argument("engine", "staging_chunk_bytes and staging_chunks must be positive");
  }
  check(driver.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  check(driver.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain", "device " + std::to_string(ordinal));
  caller_context in_engine(driver, context);
  for (std::size_t i = 0; i < options.pool_streams; ++i) {
    CUstream stream = nullptr;
    if (CUresult status = driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING); status != CUDA_SUCCESS) {
      for (CUstream created : pool) driver.cuStreamDestroy(created);
      driver.cuDevicePrimaryCtxRelease(device);
      throw_cuda_error(status, "cuStreamCreate", "engine stream pool", std::source_location::current());
    }
    pool.push_back(stream);
  }
  if (!options.pending_spin) {
    options.pending_spin = cores >= 4 ? std::chrono::microseconds(20000) : std::chrono::microseconds(0);
  }
  try {
    bridge = std::make_unique<completion_bridge>(driver, context, options);  // allocates its completion flags
  } catch (...) {
    for (CUstream created : pool) driver.cuStreamDestroy(created);
    driver.cuDevicePrimaryCtxRelease(device);
    throw;
  }
  staging = std::make_unique<staging_pool>(driver, options.staging_chunk_bytes, options.staging_chunks);
  registrations = std::make_unique<registration_cache>(driver, options.registration_cache_bytes,
                                                       options.registration_threshold_bytes);
  // Registered after the driver's cuInit (driver() ran above), so it runs before the driver's teardown.
  exit_ticket = stop_at_exit([this] { stop_for_exit(); });
  watch_main_thread_exit();
  if (options.batch_window.count() > 0) {
    batcher = std::make_unique<copy_batcher>(
        driver, context, ordinal, *bridge, [this] { return pool[next_pool_stream.fetch_add(1) % pool.size()]; },
        options.batch_window, options.batch_most_copies, options.on_failure);
  }
}

void engine_core::impl::stop_for_exit() {
  if (stopped_for_exit.exchange(true)) return;
  if (batcher) batcher->stop_for_exit();
  bridge->stop_for_exit();
  workers.stop();
  workers.join();
  copiers.stop();
}

engine_core::impl::~impl() {
  forget_at_exit(exit_ticket);
  if (process_exiting()) stop_for_exit();  // a static engine destroyed during exit
  if (stopped_for_exit) {
    // Destroyed during exit after the driver's teardown began: its threads are stopped; what the
    // driver holds for it goes with the process. Destroying these would call the driver.
    (void)batcher.release();
    (void)bridge.release();
    (void)staging.release();
    (void)registrations.release();
    return;
  }
  // Every op ends: GPU work completes (or fails, sticky errors included), and staged ops stop
  // submitting once the bridge reports their chunks.
  {
    std::unique_lock lock(live_mutex);
    live_changed.wait(lock, [&] { return live.empty(); });
  }
  caller_context in_engine(driver, context);  // freeing page-locked memory (flags, staging) needs it
  batcher.reset();
  bridge.reset();
  workers.join();
  copiers.stop();
  staging.reset();
  registrations.reset();
  for (CUstream stream : pool) driver.cuStreamDestroy(stream);
  driver.cuDevicePrimaryCtxRelease(device);
}

void engine_core::impl::post_work(std::function<void()> work) {
  boost::asio::post(workers, [this, work = std::move(work)] {
    use_context(driver, context);
    work();
  });
}

void engine_core::impl::parallel_copy(std::byte* destination, const std::byte* source, std::size_t bytes) {
  copiers.copy(destination, source, bytes);
}

std::uint64_t engine_core::impl::admit() {
  std::lock_guard lock(live_mutex);
  const std::uint64_t sequence = next_sequence++;
  live.insert(sequence);
  return sequence;
}

void engine_core::impl::retire(std::uint64_t sequence) {
  std::vector<std::shared_ptr<operation>> ready;
  {
    std::lock_guard lock(live_mutex);
    live.erase(sequence);
    const std::uint64_t oldest_live = live.empty() ? next_sequence : *live.begin();
    // A wait_all admitted as sequence s is satisfied when nothing older than s is live.
    for (auto it = waiters.begin(); it != waiters.end() && it->first <= oldest_live;) {
      ready.push_back(std::move(it->second));
      it = waiters.erase(it);
    }
  }
  live_changed.notify_all();
  for (auto& op : ready) finish_wait(op);
}

void engine_core::impl::finish_wait(const std::shared_ptr<operation>& op) {
  // After a sticky error nothing submitted earlier has run as asked: the wait reports it too.
  if (int status = sticky.load(); status != CUDA_SUCCESS) {
    fail(op, static_cast<CUresult>(status), "engine::wait_all on device " + std::to_string(ordinal) +
                                                " (the context failed)");
  }
  op->finish();
}

void engine_core::impl::complete(const std::shared_ptr<operation>& op, std::uint64_t sequence) {
  if (op->finish()) retire(sequence);
}

std::string engine_core::impl::where(const prepared_transfer& transfer, CUstream stream) const {
  return transfer.label() + " on stream " + hex(stream) + " of device " + std::to_string(ordinal);
}

void engine_core::impl::fail(const std::shared_ptr<operation>& op, CUresult status, const std::string& detail) {
  if (is_sticky(status)) {
    int expected = CUDA_SUCCESS;
    sticky.compare_exchange_strong(expected, status);
  }
  const char* name = nullptr;
  driver.cuGetErrorName(status, &name);
  std::string message = detail + ": " + (name ? name : std::to_string(static_cast<int>(status)));
  op->record_error(boost::system::error_code(make_error_code(status)), message);
  if (options.on_failure) options.on_failure(message);
}

void engine_core::impl::run_single(std::shared_ptr<operation> op, std::uint64_t sequence,
                                   std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  auto finished_submitting = [&] {
    if (sequenced) sequencer.done(stream);
  };
  if (op->cancel_requested()) {  // never reached the stream: nothing to wait for
    finished_submitting();
    complete(op, sequence);
    return;
  }
  if (int status = sticky.load(); status != CUDA_SUCCESS) {
    fail(op, static_cast<CUresult>(status), where(*transfer, stream) + " (not submitted: the context failed earlier)");
    finished_submitting();
    complete(op, sequence);
    return;
  }
  submission submitted = enqueue_and_arm(*transfer, stream);
  watch_submitted(std::move(op), sequence, std::move(transfer), stream, sequenced, std::move(submitted));
}

engine_core::impl::submission engine_core::impl::enqueue_and_arm(const prepared_transfer& transfer, CUstream stream) {
  submission submitted;
  submitted.enqueued = transfer.bytes == 0 ? CUDA_SUCCESS : transfer.enqueue(transfer, stream);
  stage_trace::mark(stage_trace::stage::copy_enqueued);
  if (submitted.enqueued == CUDA_SUCCESS) submitted.armed = bridge->arm(stream, submitted.ticket);
  return submitted;
}

void engine_core::impl::watch_submitted(std::shared_ptr<operation> op, std::uint64_t sequence,
                                        std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced,
                                        submission submitted) {
  auto finished_submitting = [&] {
    if (sequenced) sequencer.done(stream);
  };
  if (submitted.enqueued != CUDA_SUCCESS) {
    fail(op, submitted.enqueued, where(*transfer, stream) + " (enqueue)");
    finished_submitting();
    complete(op, sequence);
    return;
  }
  op->mark_submitted();
  const std::size_t bytes = transfer->bytes;
  const CUresult status = submitted.armed;
  if (status == CUDA_SUCCESS) {
    const completion_bridge::warm_up touched{op.get(), transfer.get(), sizeof(prepared_transfer)};
    bridge->watch_armed(std::move(submitted.ticket), [this, op, sequence, transfer, stream, bytes](CUresult result) {
      if (result == CUDA_SUCCESS) {
        op->add_bytes(bytes);
      } else {
        fail(op, result, where(*transfer, stream));
      }
      // The GPU is done with the memory: the registration is free, and the copy no longer in flight,
      // before the caller hears (who may start the next one at once).
      transfer->hold.reset();
      transfer->counted.reset();
      complete(op, sequence);
    }, touched);
  }
  finished_submitting();
  stage_trace::mark(stage_trace::stage::handed_to_bridge);
  if (status != CUDA_SUCCESS) {
    // The work is on the stream but cannot be watched: wait for it here rather than lose track of the
    // caller's memory.
    CUresult drained = driver.cuStreamSynchronize(stream);
    fail(op, status, where(*transfer, stream) + " (cuEventRecord)");
    if (drained == CUDA_SUCCESS) op->add_bytes(bytes);
    complete(op, sequence);
  }
}

// A pageable transfer: chunk k+1 is leased and filled while the copy engine moves chunk k. Cancellation
// is checked before each chunk; chunks already on the stream finish, and the op reports the bytes moved.
struct staged_state : std::enable_shared_from_this<staged_state> {
  engine_core::impl* engine;
  std::shared_ptr<operation> op;
  std::uint64_t sequence;
  std::shared_ptr<prepared_transfer> transfer;
  CUstream stream;
  bool sequenced;
  bool to_device;
  std::size_t next_offset = 0;          // touched only by the thread submitting the next chunk
  std::atomic<std::size_t> in_flight{0};
  std::atomic<bool> all_submitted{false};

  void maybe_finish() {
    if (all_submitted.load() && in_flight.load() == 0) engine->complete(op, sequence);
  }

  void stop_submitting() {
    all_submitted = true;
    // Finish (if the chunks are done) before the next op on the stream may be submitted: its completion
    // must not overtake this one's. If chunks are still in flight, the bridge reports this op's last
    // chunk before anything submitted after it, since it answers a stream's events in order.
    maybe_finish();
    if (sequenced) engine->sequencer.done(stream);
  }

  // Leases the next chunk (or stops). Runs on the thread that finished the previous step. On an engine
  // worker, a chunk that is free now is returned to be filled on this thread: handing it to another
  // worker would cost a wake-up per chunk (25-250 us on a virtual machine). Otherwise the lease hands the
  // chunk to a worker when it comes, and nullptr is returned.
  staging_pool::chunk next(bool on_worker) {
    if (next_offset >= transfer->bytes || op->cancel_requested() || engine->sticky.load() != CUDA_SUCCESS) {
      if (int status = engine->sticky.load(); status != CUDA_SUCCESS && next_offset < transfer->bytes) {
        engine->fail(op, static_cast<CUresult>(status),
                     engine->where(*transfer, stream) + " (not submitted: the context failed earlier)");
      }
      stop_submitting();
      return nullptr;
    }
    try {
      if (on_worker) {
        if (staging_pool::chunk free_now = engine->staging->try_lease()) return free_now;
      }
      engine->staging->lease(op, [self = shared_from_this()](staging_pool::chunk chunk) {
        if (chunk == nullptr) {  // cancelled while waiting for a chunk
          self->stop_submitting();
          return;
        }
        self->engine->post_work([self, chunk] { self->submit(chunk); });
      });
    } catch (const cuda_error& error) {
      engine->fail(op, error.status(), engine->where(*transfer, stream) + " (staging pool allocation)");
      stop_submitting();
    } catch (const std::bad_alloc&) {
      engine->fail(op, CUDA_ERROR_OUT_OF_MEMORY, engine->where(*transfer, stream) + " (staging pool allocation)");
      stop_submitting();
    }
    return nullptr;
  }

  // On a worker: fills (or fetches into) chunk after chunk while they are free.
  void submit(staging_pool::chunk chunk) {
    while (chunk != nullptr) chunk = submit_chunk(chunk);
  }

  // Puts one chunk on the stream; returns the next chunk to fill on this thread, if any.
  staging_pool::chunk submit_chunk(staging_pool::chunk chunk) {
    if (op->cancel_requested()) {
      engine->staging->release(chunk);
      stop_submitting();
      return nullptr;
    }
    const std::size_t offset = next_offset;
    const std::size_t length = std::min(engine->staging->chunk_bytes(), transfer->bytes - offset);
    CUresult status;
    if (to_device) {
      engine->parallel_copy(chunk, reinterpret_cast<const std::byte*>(transfer->source.address) + offset, length);
      status = engine->driver.cuMemcpyHtoDAsync(transfer->destination.address + offset, chunk, length, stream);
    } else {
      status = engine->driver.cuMemcpyDtoHAsync(chunk, transfer->source.address + offset, length, stream);
    }
    if (status != CUDA_SUCCESS) {
      engine->staging->release(chunk);
      engine->fail(op, status, engine->where(*transfer, stream) + " (enqueue of chunk at offset " + std::to_string(offset) + ")");
      stop_submitting();
      return nullptr;
    }
    op->mark_submitted();
    next_offset = offset + length;
    ++in_flight;
    status = engine->bridge->watch(stream, [self = shared_from_this(), chunk, offset, length](CUresult result) {
      self->chunk_done(chunk, offset, length, result);
    });
    if (status != CUDA_SUCCESS) {
      CUresult drained = engine->driver.cuStreamSynchronize(stream);
      chunk_done(chunk, offset, length, drained == CUDA_SUCCESS ? status : drained);
      stop_submitting();
      return nullptr;
    }
    return next(true);
  }

  // On the bridge thread: the GPU is done with the chunk.
  void chunk_done(staging_pool::chunk chunk, std::size_t offset, std::size_t length, CUresult result) {
    if (result != CUDA_SUCCESS) {
      engine->fail(op, result, engine->where(*transfer, stream) + " (chunk at offset " + std::to_string(offset) + ")");
      engine->staging->release(chunk);
      --in_flight;
      maybe_finish();
      return;
    }
    if (to_device) {
      op->add_bytes(length);
      engine->staging->release(chunk);
      --in_flight;
      maybe_finish();
      return;
    }
    // Copying out is host work: not on the bridge thread.
    engine->post_work([self = shared_from_this(), chunk, offset, length] {
      self->engine->parallel_copy(reinterpret_cast<std::byte*>(self->transfer->destination.address) + offset, chunk,
                                  length);
      self->op->add_bytes(length);
      self->engine->staging->release(chunk);
      --self->in_flight;
      self->maybe_finish();
    });
  }
};

void engine_core::impl::record_plan(const prepared_transfer& transfer, transfer_plan plan) {
  switch (plan) {
    case transfer_plan::registered: registered_plans++; break;
    case transfer_plan::staged: staged_plans++; break;
    case transfer_plan::batched: batched_plans++; break;
    default: pinned_plans++; break;
  }
  if (options.on_plan) options.on_plan(transfer.operation, plan, transfer.bytes);
}

void engine_core::impl::run_staged(std::shared_ptr<operation> op, std::uint64_t sequence,
                                   std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  auto state = std::make_shared<staged_state>();
  state->engine = this;
  state->op = std::move(op);
  state->sequence = sequence;
  state->transfer = std::move(transfer);
  state->stream = stream;
  state->sequenced = sequenced;
  state->to_device = state->transfer->source.kind == memory_kind::pageable_host;
  state->next(false);  // on the caller's thread: the first chunk is filled by a worker
}

engine_core::engine_core(const engine_options& options) : impl_(std::make_unique<impl>(options)) {}

engine_core::~engine_core() = default;

CUcontext engine_core::context() const noexcept { return impl_->context; }

int engine_core::device_ordinal() const noexcept { return impl_->ordinal; }

std::string prepared_transfer::label() const {
  if (source.address == 0) return std::string(operation) + ": " + extra;  // fill, prefetch: one side
  return std::string(operation) + ": " + std::to_string(bytes) + " bytes [" + hex(source.address) + " -> " +
         hex(destination.address) + ")" + extra;
}

prepared_transfer engine_core::prepare_copy(std::string_view operation, std::size_t count, std::size_t element_size,
                                            endpoint source, endpoint destination) {
  stage_trace::mark(stage_trace::stage::prepare_begins);
  caller_context in_engine(impl_->driver, impl_->context);
  const plan_1d plan = plan_copy_1d(operation, count, element_size, source, destination);
  // A pageable side may be staged: the engine's threads then read or write it on the host, which
  // device memory passed as a host span would not survive (the fuzzer met it as a crash).
  for (const endpoint* side : {&source, &destination}) {
    if (side->kind == memory_kind::pageable_host && plan.bytes > 0 && is_device_only_memory(side->address)) {
      throw_invalid_argument(operation, std::string(side->argument) + " " + hex(side->address) +
                                            " is device memory, not host memory (pass it as a device_ptr)");
    }
  }
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = plan.bytes;
  transfer.source = source;
  transfer.destination = destination;
  transfer.pageable = source.kind == memory_kind::pageable_host || destination.kind == memory_kind::pageable_host;
  transfer.batchable = true;
  // The direct form; a pageable transfer uses it once its memory is page-locked (registered).
  transfer.enqueue = [plan](const prepared_transfer& self, CUstream stream) {
    const char* call = nullptr;
    return enqueue_copy_1d(plan, self.source, self.destination, stream, call);
  };
  stage_trace::mark(stage_trace::stage::prepare_ends);
  return transfer;
}

void engine_core::check_device_range(std::string_view operation, std::size_t count, std::size_t element_size,
                                     endpoint side) {
  caller_context in_engine(impl_->driver, impl_->context);
  detail::check_device_range(operation, count, element_size, side);
}

prepared_transfer engine_core::prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                               std::size_t element_size, endpoint source, plane source_plane,
                                               endpoint destination, plane destination_plane) {
  caller_context in_engine(impl_->driver, impl_->context);
  const CUDA_MEMCPY2D copy =
      plan_copy_2d(operation, width, height, element_size, source, source_plane, destination, destination_plane);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = copy.WidthInBytes * copy.Height;
  transfer.source = source;
  transfer.destination = destination;
  transfer.extra = " (" + std::to_string(width) + " x " + std::to_string(height) + " elements)";
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, copy](const prepared_transfer&, CUstream stream) {
    return driver.cuMemcpy2DAsync(&copy, stream);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                                 CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                                 CUcontext destination_context) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes =
      plan_copy_peer(operation, count, element_size, source, source_context, destination, destination_context);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.source = device_side("source", source);
  transfer.destination = device_side("destination", destination);
  transfer.extra = " (context " + hex(source_context) + " to context " + hex(destination_context) + ")";
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, source, source_context, destination, destination_context, bytes](const prepared_transfer&,
                                                                                                CUstream stream) {
    return driver.cuMemcpyPeerAsync(destination, destination_context, source, source_context, bytes, stream);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                                            std::size_t element_size, const void* value) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes = plan_fill(operation, destination, count, element_size);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("destination", destination);
  transfer.extra = std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes at " +
                   hex(destination);
  std::array<std::byte, 16> pattern{};  // the op may start after the caller's value is gone
  std::memcpy(pattern.data(), value, element_size);
  transfer.enqueue = [destination, count, element_size, pattern](const prepared_transfer&, CUstream stream) {
    const char* call = nullptr;
    return enqueue_fill(destination, count, element_size, pattern.data(), stream, call);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                                std::size_t element_size, CUmemLocation location) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes = plan_prefetch(operation, pointer, count, element_size, location);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("pointer", pointer);
  transfer.extra = std::to_string(bytes) + " bytes at " + hex(pointer) + " to " +
                   (location.type == CU_MEM_LOCATION_TYPE_HOST ? std::string("the host")
                                                               : "device " + std::to_string(location.id));
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, pointer, bytes, location](const prepared_transfer&, CUstream stream) {
    return driver.cuMemPrefetchAsync(pointer, bytes, location, 0, stream);
  };
  return transfer;
}

namespace {

const endpoint& host_side_of(const prepared_transfer& transfer) {
  return transfer.source.kind == memory_kind::pageable_host ? transfer.source : transfer.destination;
}

}  // namespace

std::string_view to_string(transfer_plan plan) noexcept {
  switch (plan) {
    case transfer_plan::automatic: return "automatic";
    case transfer_plan::pinned: return "pinned";
    case transfer_plan::registered: return "registered";
    case transfer_plan::staged: return "staged";
    case transfer_plan::batched: return "batched";
  }
  return "?";
}

bool engine_core::impl::batchable(const prepared_transfer& transfer, bool sequenced) const {
  return !sequenced && batcher && transfer.batchable && transfer.bytes > 0 && transfer.bytes <= options.batch_max_bytes &&
         sticky.load() == CUDA_SUCCESS;
}

std::shared_ptr<void> engine_core::impl::count_small_copy() {
  small_copies_in_flight.fetch_add(1);
  return std::shared_ptr<void>(nullptr, [this](void*) { small_copies_in_flight.fetch_sub(1); });
}

// Page-locked memory, not for the batcher, on a stream nothing else is submitting to: the work goes on
// the stream first, with its completion armed right behind it, and the op's bookkeeping (its operation
// and handler, the live set, the hand-off to the bridge) runs while the GPU moves the bytes (issue 3's
// roundtrip_4KiB: see the README's H200 figures).
bool engine_core::impl::start_at_once(operation_factory& make_op, prepared_transfer& prepared,
                                      std::optional<CUstream> stream) {
  if (prepared.pageable || prepared.bytes == 0 || sticky.load() != CUDA_SUCCESS) return false;
  std::shared_ptr<void> counted;
  if (batchable(prepared, stream.has_value())) {
    if (small_copies_in_flight.load() > 0) return false;  // the planner offers it to the batcher
    counted = count_small_copy();                         // alone: straight to a stream
  }
  const CUstream target = stream ? *stream : pool[next_pool_stream.fetch_add(1) % pool.size()];
  if (stream && !sequencer.try_claim(target)) return false;  // an op before it is still submitting
  caller_context in_engine(driver, context);
  stage_trace::mark(stage_trace::stage::enqueue_begins);
  submission submitted = enqueue_and_arm(prepared, target);
  std::shared_ptr<operation> op;
  std::shared_ptr<prepared_transfer> transfer;
  std::uint64_t sequence = 0;
  try {
    op = make_op();
    stage_trace::mark(stage_trace::stage::operation_made);
    transfer = std::make_shared<prepared_transfer>(std::move(prepared));
    transfer->plan = transfer_plan::pinned;
    transfer->counted = std::move(counted);
    sequence = admit();
    stage_trace::mark(stage_trace::stage::admitted);
  } catch (...) {
    // Nothing can report this op's completion: let the GPU finish with the caller's memory first. (The
    // bridge takes the armed event back.)
    if (submitted.enqueued == CUDA_SUCCESS) driver.cuStreamSynchronize(target);
    if (submitted.enqueued == CUDA_SUCCESS && submitted.armed == CUDA_SUCCESS) {
      bridge->watch_armed(std::move(submitted.ticket), [](CUresult) {});
    }
    if (stream) sequencer.done(target);
    throw;
  }
  record_plan(*transfer, transfer_plan::pinned);
  watch_submitted(std::move(op), sequence, std::move(transfer), target, stream.has_value(), std::move(submitted));
  return true;
}

void engine_core::start(operation_factory make_op, prepared_transfer prepared, std::optional<CUstream> stream) {
  impl& engine = *impl_;
  if (engine.start_at_once(make_op, prepared, stream)) return;
  auto op = make_op();
  const std::uint64_t sequence = engine.admit();
  auto transfer = std::make_shared<prepared_transfer>(std::move(prepared));
  const bool sequenced = stream.has_value();
  const CUstream target =
      stream ? *stream : engine.pool[engine.next_pool_stream.fetch_add(1) % engine.pool.size()];

  // The planner: page-locked memory goes straight to the copy engine; pageable memory is registered
  // when it is large and seen again, else staged.
  transfer_plan plan = transfer->plan;
  if (!transfer->pageable) {
    plan = transfer_plan::pinned;
  } else if (plan == transfer_plan::automatic) {
    const endpoint& host = host_side_of(*transfer);
    // The cache first: memory it registered is known to the driver too.
    if (transfer->registrable && engine.registrations->worth_registering(host.address, transfer->bytes)) {
      plan = transfer_plan::registered;
    } else if (auto known = range_known_to_driver(host.address);
               known && host.address + transfer->bytes <= known->base + known->size) {
      plan = transfer_plan::pinned;  // the caller's own pinned or registered memory, passed as a span
    } else {
      // Remembers a large buffer; may drop (unregister) an older registration at the same address, which
      // needs the engine's context current, and the caller's thread need not have it.
      if (transfer->registrable) {
        caller_context in_engine(engine.driver, engine.context);
        engine.registrations->acquire(host.address, transfer->bytes, false);
      }
      plan = transfer_plan::staged;
    }
  }
  if (plan == transfer_plan::pinned && engine.batchable(*transfer, sequenced)) {
    transfer->counted = engine.count_small_copy();
    const bool up = transfer->source.kind != memory_kind::device;
    const bool down = transfer->destination.kind != memory_kind::device;
    copy_batcher::copy item{
        transfer->destination.address, transfer->source.address, transfer->bytes,
        up ? direction::host_to_device : down ? direction::device_to_host : direction::device_to_device, op,
        [&engine, op, sequence, transfer](CUresult result) {
          if (result == CUDA_SUCCESS) {
            op->add_bytes(transfer->bytes);
          } else if (result != copy_batcher::not_submitted) {
            engine.fail(op, result, transfer->label() + " (batched) of device " + std::to_string(engine.ordinal));
          }
          transfer->counted.reset();  // before the caller hears
          engine.complete(op, sequence);
        }};
    if (engine.batcher->offer(item)) plan = transfer_plan::batched;
  }
  transfer->plan = plan;
  // A registered plan is final only once the memory is registered, on an engine thread (below).
  if (plan != transfer_plan::registered) engine.record_plan(*transfer, plan);
  if (plan == transfer_plan::batched) return;

  auto submit = [&engine, op, sequence, transfer, target, sequenced] {
    caller_context in_engine(engine.driver, engine.context);
    if (transfer->plan == transfer_plan::staged) {
      engine.run_staged(op, sequence, transfer, target, sequenced);
    } else if (transfer->plan == transfer_plan::registered) {
      // Registering blocks for milliseconds: never on the caller's thread.
      engine.post_work([&engine, op, sequence, transfer, target, sequenced] {
        const endpoint& host = host_side_of(*transfer);
        transfer->hold = engine.registrations->acquire(host.address, transfer->bytes, true);
        // The driver may refuse the registration (the range overlaps memory registered already, or it
        // cannot lock the pages): the transfer is staged instead, and reported so.
        transfer->plan = transfer->hold ? transfer_plan::registered : transfer_plan::staged;
        engine.record_plan(*transfer, transfer->plan);
        if (!transfer->hold) {
          engine.run_staged(op, sequence, transfer, target, sequenced);
        } else {
          engine.run_single(op, sequence, transfer, target, sequenced);
        }
      });
    } else {
      engine.run_single(op, sequence, transfer, target, sequenced);
    }
  };
  if (sequenced) {
    engine.sequencer.submit(target, std::move(submit));
  } else {
    submit();
  }
}

void engine_core::forget_host_memory(const void* address, std::size_t bytes) {
  caller_context in_engine(impl_->driver, impl_->context);  // unregistering needs the engine's context
  impl_->registrations->forget(reinterpret_cast<std::uintptr_t>(address), bytes);
}

plan_counts engine_core::counts() const noexcept {
  return {impl_->pinned_plans.load(), impl_->registered_plans.load(), impl_->staged_plans.load(),
          impl_->batched_plans.load(), impl_->batcher ? impl_->batcher->batch_refusals() : 0};
}

void engine_core::wait_all(std::shared_ptr<operation> op) {
  impl& engine = *impl_;
  bool ready = false;
  {
    std::lock_guard lock(engine.live_mutex);
    const std::uint64_t sequence = engine.next_sequence;
    ready = engine.live.empty() || *engine.live.begin() >= sequence;
    if (!ready) engine.waiters.emplace(sequence, op);
  }
  if (ready) engine.finish_wait(op);
}

void engine_core::order(CUstream first, CUstream then) {
  if (first == then) return;  // one stream is in order already
  impl& engine = *impl_;
  // Holds `then`'s submission queue, then waits for `first`'s: the event is recorded after everything
  // submitted to `first` so far (staged transfers included), and the wait is on `then` before anything
  // submitted to it later.
  engine.sequencer.submit(then, [&engine, first, then] {
    engine.sequencer.submit(first, [&engine, first, then] {
      caller_context in_engine(engine.driver, engine.context);
      CUevent event = nullptr;
      CUresult status = engine.driver.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
      if (status == CUDA_SUCCESS) {
        status = engine.driver.cuEventRecord(event, first);
        if (status == CUDA_SUCCESS) status = engine.driver.cuStreamWaitEvent(then, event, 0);
        // Destroying a recorded event is safe: the wait keeps what it needs.
        engine.driver.cuEventDestroy(event);
      }
      if (status != CUDA_SUCCESS && engine.options.on_failure) {
        const char* name = nullptr;
        engine.driver.cuGetErrorName(status, &name);
        engine.options.on_failure("engine::order: stream " + hex(then) + " after stream " + hex(first) + ": " +
                                  (name ? name : std::to_string(static_cast<int>(status))));
      }
      engine.sequencer.done(first);
      engine.sequencer.done(then);
    });
  });
}

void engine_core::cancellation_requested(const std::shared_ptr<operation>&) { impl_->staging->wake_cancelled(); }

std::error_code engine_core::sticky_error() const noexcept {
  const int status = impl_->sticky.load();
  return status == CUDA_SUCCESS ? std::error_code() : make_error_code(static_cast<CUresult>(status));
}

std::chrono::microseconds engine_core::executor_spin() const noexcept { return impl_->executor_spin; }

double engine_core::poller_cpu_seconds() const { return impl_->bridge->cpu_seconds(); }

std::size_t engine_core::pinned_bytes() const {
  return impl_->staging->allocated_bytes() + impl_->registrations->registered_bytes();
}

}  // namespace ferry::detail
