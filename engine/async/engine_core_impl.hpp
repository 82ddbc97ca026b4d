// The engine's private state (engine_core::impl), shared by the files that implement engine_core: the
// lifecycle and the small members (engine_core.cc), admission and wait_all (admission.cc), start and the
// routes of the planner's decision (dispatch.cc), and the executors: single submissions
// (single_submission.cc), batched copies (batched_copies.cc) and staged transfers (staged_transfer.cc).
// The decision itself is planner.hpp's; the argument checks that prepare a transfer live with their kind
// in engine/transfer.
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/async/block_lists.hpp"
#include "engine/async/caller_context.hpp"
#include "engine/async/completion_bridge.hpp"
#include "engine/async/copy_batcher.hpp"
#include "engine/async/copy_crew.hpp"
#include "engine/async/free_indices.hpp"
#include "engine/async/live_sequences.hpp"
#include "engine/async/planner.hpp"
#include "engine/async/pool_streams.hpp"
#include "engine/async/primary_context.hpp"
#include "engine/async/process_exit.hpp"
#include "engine/async/registration_cache.hpp"
#include "engine/async/resident_copier.hpp"
#include "engine/async/small_staging.hpp"
#include "engine/async/staging_pool.hpp"
#include "engine/async/stream_sequencer.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/detail/engine_core.hpp"
#include "ferry/stream.hpp"

namespace ferry::detail {

inline thread_local CUcontext thread_context = nullptr;

// Engine threads (workers, the bridge) make the engine's context current once.
inline void use_context(const driver_table& driver, CUcontext context) {
  if (thread_context != context) {
    driver.cuCtxSetCurrent(context);
    thread_context = context;
  }
}

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

  // The stream `transfer` goes on: `stream`, else a pool stream, whose count of work in flight the
  // transfer then holds (released with its memory).
  CUstream target_for(prepared_transfer& transfer, std::optional<CUstream> stream);

  // What the planner reads of `transfer` started on `stream` (or a pool stream) and of the engine now.
  plan_facts facts_of(const prepared_transfer& transfer, std::optional<CUstream> stream) const;
  bool known_page_locked(const prepared_transfer& transfer) const;
  // The routes that make the op first: queued, batched, registered and staged (dispatch.cc). A batcher
  // that refuses the copy is noted in `facts`, and the planner decides again.
  void run_queued(plan_decision decision, plan_facts& facts, operation_factory& make_op, prepared_transfer&& prepared,
                  std::optional<CUstream> stream);
  void submit_queued(route way, std::shared_ptr<operation> op, std::uint64_t sequence,
                     std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced);
  // Counts a small page-locked copy in flight and offers it to the batcher; false when the batcher does
  // not take it (it is then submitted alone).
  bool offer_to_batcher(const std::shared_ptr<operation>& op, std::uint64_t sequence,
                        const std::shared_ptr<prepared_transfer>& transfer);
  // A batched copy's end (the batcher's finisher): its bytes or its failure, then its op completes.
  void batched_copy_done(copy_batcher::copy& item, CUresult result);
  // On a worker: registers the host side, then submits at once, or staged if the driver refuses.
  void run_registered(std::shared_ptr<operation> op, std::uint64_t sequence,
                      std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced);

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
  // Posts to the resident copier: false when it could not (the ring full, the kernel refused), leaving
  // nothing armed.
  bool post_to_resident(const prepared_transfer& transfer, submission& submitted);
  // A single submission from its start to its completion: all that the bridge's continuation needs, in
  // a slot reused from op to op, so that the continuation holds one pointer (std::function keeps it
  // without an allocation).
  struct single_slot {
    std::shared_ptr<operation> op;
    prepared_transfer transfer;
    std::uint64_t sequence = 0;
    CUstream stream = nullptr;
    std::uint32_t index = free_indices::none;  // in single_slots; none for a slot of its own (all were taken)
    // The page-locked slot a small pageable transfer is staged through (small_staging), or nullptr; the
    // transfer keeps the caller's addresses.
    std::byte* staged_through = nullptr;
  };
  static constexpr std::uint32_t reused_single_slots = 256;
  static constexpr std::size_t resident_slots = 256;  // entries of the resident copier's ring
  // A reused slot holding `transfer` (moved in), or one of its own when all are taken.
  single_slot* take_slot(prepared_transfer&& transfer);
  // What the GPU's work held that the caller may look at once it hears: a registration's lease, the
  // counts of small copies in flight and of the work on its pool stream, a staging slot. return_slot
  // releases it too.
  void release_memory_of(single_slot& slot) noexcept;
  void return_slot(single_slot* slot) noexcept;
  // On the bridge thread: the work of `slot` is done (or failed); completes its op.
  void single_done(single_slot* slot, CUresult result);
  // Hands the op to the bridge, or fails it.
  void watch_submitted(std::shared_ptr<operation> op, std::uint64_t sequence, single_slot* slot, bool sequenced,
                       submission submitted);
  // Asks for the lines the at-once route's bookkeeping writes once the work is on its stream (a submission
  // slot's free list, the record of ops in flight): the bridge thread wrote them last, completing earlier
  // ops, and they arrive while the work's driver calls run.
  void prefetch_bookkeeping() const noexcept;
  // The at-once executor (single_submission.cc): see run_at_once's definition. False, with the refusal
  // noted in `facts`, when a resource it needs is taken.
  bool run_at_once(plan_decision decision, plan_facts& facts, operation_factory& make_op, prepared_transfer& prepared,
                   std::optional<CUstream> stream);
  CUstream enqueue_at_once(plan_decision& decision, plan_facts& facts, prepared_transfer& prepared, CUstream target,
                           std::byte* staging_slot, submission& submitted);
  // What an at-once transfer put on its stream, until its op has it.
  struct at_once_work {
    transfer_plan plan;
    CUstream target;
    std::byte* staging_slot;
    in_flight_count counted;
    submission submitted;
  };
  void hand_over_at_once(operation_factory& make_op, prepared_transfer& prepared, at_once_work& work, bool sequenced);
  void abandon_at_once(at_once_work& work, bool sequenced) noexcept;
  // Puts a small pageable transfer on `stream` through `slot` (a poke's bytes copied in first), armed.
  submission enqueue_small_staged(prepared_transfer& transfer, CUstream stream, std::byte* slot);
  // A small staged peek's bytes, from its slot to the caller's memory, once the copy is done.
  static void deliver_staged_bytes(const single_slot& slot);
  // Counts a batchable copy in flight until the returned token (kept by its transfer) goes. Only while
  // another is in flight is a copy offered to the batcher: copies of a request/response loop arrive
  // within the batch window of each other, and each would wait for a batch that never fills.
  in_flight_count count_small_copy();
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
  plan_limits limits;  // the options the planner reads, set with them
  int ordinal;
  CUdevice device = 0;
  // The engine's context made current on the thread that makes or destroys the engine, while its
  // handles are made and released: declared before them, so that the caller's context comes back only
  // after they are gone, from ~impl or from a constructor that throws.
  std::optional<caller_context> handles_context;
  // Declared in the order they are made: the pool's streams are destroyed (in order) before the hold on
  // the context is released.
  retained_primary_context primary;
  CUcontext context = nullptr;  // primary's, for the engine's threads and calls
  std::vector<ferry::stream> pool_held;
  pool_streams pool;  // chooses among pool_held's streams
  std::atomic<int> sticky{CUDA_SUCCESS};

  std::unique_ptr<completion_bridge> bridge;
  std::unique_ptr<staging_pool> staging;
  std::unique_ptr<small_staging> small_slots;
  std::unique_ptr<registration_cache> registrations;
  std::unique_ptr<copy_batcher> batcher;
  std::unique_ptr<block_lists> blocks;  // engine::poke_blocks / peek_blocks
  std::unique_ptr<resident_copier> resident;  // engine_options::resident_copies
  exit_registration exit_ticket;  // stop_for_exit, registered until the engine ends
  std::atomic<bool> stopped_for_exit{false};  // the process is exiting: no more driver calls
  std::atomic<std::size_t> pinned_plans{0}, registered_plans{0}, staged_plans{0}, batched_plans{0},
      driver_staged_plans{0}, resident_plans{0};
  // Counts the plan a transfer takes and reports it (engine_options::on_plan): once the plan is final, so
  // that the report and plan_counts() always agree.
  void record_plan(const prepared_transfer& transfer, transfer_plan plan);
  // Read once, and the machine-dependent defaults below chosen from it in one place:
  // std::thread::hardware_concurrency() opens /sys/devices/system/cpu/online on each call (glibc), system
  // calls too dear for every op to pay.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::chrono::microseconds executor_spin =
      options.executor_spin ? *options.executor_spin
                            : cores >= 4 ? std::chrono::microseconds(5000) : std::chrono::microseconds(0);
  std::size_t copier_count;
  boost::asio::thread_pool workers;   // submissions and continuations; they may wait for copiers
  copy_crew copiers;                  // memcpy slices only; they never wait, so workers cannot deadlock
  stream_sequencer sequencer;

  std::unique_ptr<single_slot[]> single_slots = std::make_unique<single_slot[]>(reused_single_slots);
  free_indices free_single_slots{reused_single_slots};

  std::mutex live_mutex;
  std::condition_variable live_changed;
  std::uint64_t next_sequence = 0;
  live_sequences live;
  std::multimap<std::uint64_t, std::shared_ptr<operation>> waiters;  // wait_all ops by sequence
};

}  // namespace ferry::detail
