// The engine's lifecycle: its context, pool streams, bridge, staging and threads are made when it is
// built and released when it is destroyed (after the GPU is done with every byte of caller and staging
// memory), or dropped without a driver call when the process exits first. Also the small members of
// engine_core: the prepare_* calls (engine/transfer checks and plans each kind; here it is done in the
// engine's context), ordering between streams, the metrics and the accessors.
#include "engine/async/engine_core_impl.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <string>

#include "engine/async/engine_options_check.hpp"
#include "engine/async/kernel_choice.hpp"
#include "engine/async/process_exit.hpp"
#include "engine/errors/check.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "ferry/detail/prefetch.hpp"
#include "engine/trace/stage_marks.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

engine_core::impl::impl(const engine_options& opts)
    : driver(detail::driver()),
      options(opts),
      ordinal(opts.device),
      copier_count(opts.copy_threads != 0 ? opts.copy_threads : std::clamp<std::size_t>(cores, 1, 8)),
      workers(2),
      // The caller of parallel_copy copies too. The crew spins between chunks only where cores are to spare.
      copiers(copier_count - 1, cores >= 4 ? std::chrono::microseconds(500) : std::chrono::microseconds(0)),
      sequencer([this](stream_sequencer::submitter next) { post_work(std::move(next)); }) {
  device = check_engine_options(options, cores, driver);
  const spin_windows spins = resolved_spin_windows(options, cores);
  options.spin_window = spins.least;
  options.max_spin_window = spins.most;
  limits = plan_limits::of(options);
  primary = retained_primary_context::retain(driver, device, ordinal);
  context = primary.get();
  // From here on a throw releases what was made (the members' destructors), in this context.
  handles_context.emplace(driver, context);
  pool_held.reserve(options.pool_streams);
  pool.reserve(options.pool_streams);
  for (std::size_t i = 0; i < options.pool_streams; ++i) {
    CUstream stream = nullptr;
    if (CUresult status = driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING); status != CUDA_SUCCESS) {
      throw_cuda_error(status, "cuStreamCreate", "engine stream pool", std::source_location::current());
    }
    pool.add(pool_held.emplace_back(ferry::stream::adopt(stream)).get());
  }
  if (!options.pending_spin) {
    options.pending_spin = cores >= 4 ? std::chrono::microseconds(20000) : std::chrono::microseconds(0);
  }
  std::function<void()> before_idle_park;
  if (options.resident_copies) {
    resident =
        std::make_unique<resident_copier>(driver, resident_slots, options.resident_idle_stop, options.on_failure);
    // The poller parks once spin_window has passed without activity: the kernel stops with it.
    before_idle_park = [copier = resident.get()] { copier->stop(); };
  }
  // Allocates its completion flags.
  bridge = std::make_unique<completion_bridge>(driver, context, options, completion_bridge::default_flag_words,
                                               std::move(before_idle_park));
  staging = std::make_unique<staging_pool>(driver, options.staging_chunk_bytes, options.staging_chunks);
  small_slots = std::make_unique<small_staging>(driver, context, options.small_staged_max_bytes,
                                                static_cast<std::uint32_t>(options.small_staging_slots),
                                                options.on_failure);
  registrations = std::make_unique<registration_cache>(driver, options.registration_cache_bytes,
                                                       options.registration_threshold_bytes);
  // Registered after the driver's cuInit (driver() ran above), so it runs before the driver's teardown.
  exit_ticket = exit_registration([this] { stop_for_exit(); });
  watch_main_thread_exit();
  const bool kernel_usable = kernel_reaches_host_memory(driver, device);
  const kernel_choice automatic{options.batch_kernel_min_copies, options.batch_kernel_max_mean_bytes};
  blocks = std::make_unique<block_lists>(
      driver, block_lists::settings{ordinal, kernel_usable, automatic}, *staging,
      [this](std::byte* destination, const std::byte* source, std::size_t bytes) {
        parallel_copy(destination, source, bytes);
      },
      options.on_failure);
  if (options.batch_window.count() > 0) {
    const copy_batcher::settings batching{options.batch_window, options.batch_most_copies, options.batching,
                                          automatic, kernel_usable};
    batcher = std::make_unique<copy_batcher>(
        driver, context, ordinal, *bridge, [this] { return pool.next_in_turn(); },
        batching, [this](copy_batcher::copy& item, CUresult result) { batched_copy_done(item, result); },
        options.on_failure);
  }
  handles_context.reset();
}

void engine_core::impl::stop_for_exit() {
  if (stopped_for_exit.exchange(true)) return;
  if (batcher) batcher->stop_for_exit();
  if (blocks) blocks->abandon();
  if (resident) {
    // Ends the kernel without a driver call (it would otherwise run until the driver tears the context
    // down), and leaves the ring and stream to the process's end.
    resident->stop();
    resident->abandon();
  }
  bridge->stop_for_exit();
  workers.stop();
  workers.join();
  copiers.stop();
}

engine_core::impl::~impl() {
  exit_ticket.reset();
  if (process_exiting()) stop_for_exit();  // a static engine destroyed during exit
  if (stopped_for_exit) {
    // Destroyed during exit after the driver's teardown began: its threads are stopped; what the
    // driver holds for it goes with the process. Destroying these would call the driver.
    (void)batcher.release();
    (void)blocks.release();
    (void)resident.release();
    (void)bridge.release();
    (void)staging.release();
    (void)small_slots.release();
    (void)registrations.release();
    for (ferry::stream& held : pool_held) (void)held.release();
    (void)primary.release();
    return;
  }
  // Every op ends: GPU work completes (or fails, sticky errors included), and staged ops stop
  // submitting once the bridge reports their chunks.
  {
    std::unique_lock lock(live_mutex);
    live_changed.wait(lock, [&] { return live.empty(); });
  }
  // Freeing page-locked memory (flags, staging) needs it; it stays current until the members that hold
  // the pool's streams and the context are gone (handles_context).
  handles_context.emplace(driver, context);
  // First: a free waits for the whole context, the resident kernel included.
  if (resident) resident->finish();
  batcher.reset();
  blocks.reset();  // before the staging pool, whose chunks its lists lease
  bridge.reset();
  resident.reset();  // after the bridge, whose thread stops it when it parks
  workers.join();
  copiers.stop();
  staging.reset();
  small_slots.reset();
  registrations.reset();
  // Then the members: the pool's streams are destroyed, the hold on the context released, and the
  // caller's context put back, in that order (their declaration order).
}

CUstream engine_core::impl::target_for(prepared_transfer& transfer, std::optional<CUstream> stream) {
  if (stream) return *stream;
  pool_streams::choice pooled = pool.take();
  transfer.on_pool_stream = std::move(pooled.held);
  return pooled.stream;
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

engine_core::engine_core(const engine_options& options) : impl_(std::make_unique<impl>(options)) {}

engine_core::~engine_core() = default;

CUcontext engine_core::context() const noexcept { return impl_->context; }

int engine_core::device_ordinal() const noexcept { return impl_->ordinal; }

transfer_request engine_core::prepare_copy(std::string_view operation, std::size_t count, std::size_t element_size,
                                            endpoint source, endpoint destination) {
  stage_trace::mark(stage_trace::stage::prepare_begins);
  // The at-once route of a copy given no stream reads and counts these before the copy (the small copies in
  // flight, the work on each pool stream): fetched while the arguments are checked (the bridge thread
  // wrote them last, as an earlier copy completed).
  prefetch_for_write(&impl_->small_copies_in_flight, sizeof(impl_->small_copies_in_flight));
  impl_->pool.prefetch();
  caller_context in_engine(impl_->driver, impl_->context);
  transfer_request transfer =
      transfer_request_access::make(prepare_copy_1d(operation, count, element_size, source, destination));
  stage_trace::mark(stage_trace::stage::prepare_ends);
  return transfer;
}

void engine_core::check_device_range(std::string_view operation, std::size_t count, std::size_t element_size,
                                     endpoint side) {
  caller_context in_engine(impl_->driver, impl_->context);
  detail::check_device_range(operation, count, element_size, side);
}

transfer_request engine_core::prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                               std::size_t element_size, endpoint source, plane source_plane,
                                               endpoint destination, plane destination_plane) {
  caller_context in_engine(impl_->driver, impl_->context);
  return transfer_request_access::make(detail::prepare_copy_2d(operation, width, height, element_size, source,
                                                               source_plane, destination, destination_plane));
}

transfer_request engine_core::prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                                 CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                                 CUcontext destination_context) {
  caller_context in_engine(impl_->driver, impl_->context);
  return transfer_request_access::make(detail::prepare_copy_peer(operation, count, element_size, source,
                                                                 source_context, destination, destination_context));
}

transfer_request engine_core::prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                                            std::size_t element_size, const void* value) {
  caller_context in_engine(impl_->driver, impl_->context);
  return transfer_request_access::make(detail::prepare_fill(operation, destination, count, element_size, value));
}

transfer_request engine_core::prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                                std::size_t element_size, CUmemLocation location) {
  caller_context in_engine(impl_->driver, impl_->context);
  return transfer_request_access::make(detail::prepare_prefetch(operation, pointer, count, element_size, location));
}

void engine_core::forget_host_memory(const void* address, std::size_t bytes) {
  caller_context in_engine(impl_->driver, impl_->context);  // unregistering needs the engine's context
  impl_->registrations->forget(reinterpret_cast<std::uintptr_t>(address), bytes);
}

plan_counts engine_core::counts() const noexcept {
  const copy_batcher* batcher = impl_->batcher.get();
  return {impl_->pinned_plans.load(),
          impl_->registered_plans.load(),
          impl_->staged_plans.load(),
          impl_->batched_plans.load(),
          batcher ? batcher->batch_refusals() : 0,
          impl_->driver_staged_plans.load(),
          batcher ? batcher->copy_engine_batches() : 0,
          batcher ? batcher->kernel_batches() : 0,
          impl_->blocks->kernel_lists(),
          impl_->blocks->copy_engine_lists(),
          impl_->resident_plans.load()};
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
      CUevent made = nullptr;
      CUresult status = engine.driver.cuEventCreate(&made, CU_EVENT_DISABLE_TIMING);
      // Destroyed once the wait is queued, which is safe: the wait keeps what it needs.
      const owned_event event(engine.driver, made);
      if (status == CUDA_SUCCESS) status = engine.driver.cuEventRecord(event.get(), first);
      if (status == CUDA_SUCCESS) status = engine.driver.cuStreamWaitEvent(then, event.get(), 0);
      if (status != CUDA_SUCCESS && engine.options.on_failure) {
        engine.options.on_failure("engine::order: stream " + hex(then) + " after stream " + hex(first) + ": " +
                                  status_name(status));
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

std::chrono::microseconds engine_core::executor_linger() const noexcept { return impl_->bridge->spin_window(); }

double engine_core::poller_cpu_seconds() const { return impl_->bridge->cpu_seconds(); }

std::size_t engine_core::pinned_bytes() const {
  return impl_->staging->allocated_bytes() + impl_->small_slots->allocated_bytes() +
         impl_->registrations->registered_bytes();
}

}  // namespace ferry::detail
