// Simulated streams: each is a FIFO of operations run in order by its own worker thread (a blocked
// operation, such as a gate or a stream wait, must hold back only its own stream). Work appended to the
// legacy stream waits for earlier work on the context's blocking streams and the other way round, as
// with the driver's legacy default stream.
#pragma once

#include <cuda.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace ferry::sim::detail {

class context;

struct stream_op {
  std::function<void()> work;
  // Event records still mark their events in a poisoned context, so that nothing waits forever.
  bool runs_when_poisoned = false;
};

class stream {
 public:
  enum class kind { legacy, per_thread, blocking, non_blocking };

  stream(context& owner, kind type);
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  context& owner() const noexcept { return owner_; }
  kind type() const noexcept { return type_; }
  CUstream handle() noexcept { return reinterpret_cast<CUstream>(this); }
  // Blocking streams (and the per-thread default stream) order themselves with the legacy stream.
  bool orders_with_legacy() const noexcept { return type_ == kind::blocking || type_ == kind::per_thread; }

  // Appends `op`; its sequence number (from 1), or 0 once the stream has been closed.
  std::uint64_t push(stream_op op);
  std::uint64_t submitted() const;
  bool reached(std::uint64_t sequence) const;

  // The host waits until `sequence` has run; gives up (false) when the owner context is poisoned.
  bool wait(std::uint64_t sequence);
  // Another stream's worker waits; gives up when either context is poisoned.
  void wait_from_worker(std::uint64_t sequence, const context& waiter);
  // Waits until everything submitted has run (or been discarded), whatever the sticky status.
  void wait_idle();
  // Waits until `sequence` has run (or been discarded), whatever the sticky status: a call that returns
  // once its own work is done must not return while that work may still touch the caller's memory.
  void wait_until_run(std::uint64_t sequence);
  // Wakes host waiters so that they notice a sticky error.
  void wake();

  // The next operation this stream runs fails with `status` (poisoning the context) instead.
  void fail_next(CUresult status);
  void clear_failure();

  // The worker runs what is queued, then exits.
  void close();
  bool finished() const;
  void join();

 private:
  void run();

  context& owner_;
  const kind type_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<stream_op> queue_;
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  CUresult pending_failure_ = CUDA_SUCCESS;
  bool closing_ = false;
  bool finished_ = false;
  std::mutex join_mutex_;
  std::thread worker_;
};

// 0 and CU_STREAM_LEGACY name the current context's legacy stream, CU_STREAM_PER_THREAD the calling
// thread's default stream (both need a current context); anything else must be a live stream.
CUresult resolve_stream(CUstream handle, std::shared_ptr<stream>& out);

// The stream of a memory operation (copy, memset, prefetch...): the driver wants a current context
// for these even when the stream is explicit, and neither context may be poisoned.
CUresult stream_for_memory_call(CUstream handle, std::shared_ptr<stream>& out);

// Appends `op` to `s`, behind the work it must wait for under the legacy stream's implicit ordering,
// and says where it is in `sequence` (when given; stream::wait and wait_until_run take it).
// CUDA_ERROR_CONTEXT_IS_DESTROYED when the stream's context died.
CUresult enqueue(stream& s, stream_op op, std::uint64_t* sequence = nullptr);

// Waits until everything submitted so far to `ctx`'s legacy stream and blocking streams has run: what a
// synchronous call (issued to the legacy stream) waits for. Returns the context's sticky status.
CUresult drain_legacy_order(context& ctx);

// Runs `work` on the calling thread after drain_legacy_order(ctx): the synchronous driver calls.
CUresult run_synchronously(context& ctx, const std::function<void()>& work);

// Waits for every stream of `ctx` (cuCtxSynchronize).
CUresult synchronize_context(context& ctx);

// Streams made by cuStreamCreate.
std::shared_ptr<stream> create_user_stream(context& ctx, stream::kind type);
CUresult destroy_user_stream(CUstream handle);
void forget_user_streams_of(const context* ctx);
std::size_t user_stream_count();

}  // namespace ferry::sim::detail
