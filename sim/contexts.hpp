// Simulated contexts: primary and created contexts, their sticky errors and peer access, and each
// thread's stack of current contexts.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ferry::sim::detail {

class stream;

// Never deleted: a handle the application still holds after cuCtxDestroy (or after a primary context's
// last release) points at a dead object that calls refuse, never at freed memory.
class context {
 public:
  context(CUdevice device, bool primary) noexcept : device_(device), primary_(primary) {}
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  CUcontext handle() noexcept { return reinterpret_cast<CUcontext>(this); }
  CUdevice device() const noexcept { return device_; }
  bool primary() const noexcept { return primary_; }
  bool alive() const noexcept { return alive_.load(std::memory_order_acquire); }
  // Unique for each life of the context (a primary context brought back gets a new one), as the
  // driver's cuCtxGetId.
  unsigned long long id() const noexcept { return id_.load(std::memory_order_acquire); }

  // The sticky error, as the real driver keeps it: the first failure wins and stays.
  CUresult sticky() const noexcept { return sticky_.load(std::memory_order_acquire); }
  bool poisoned() const noexcept { return sticky() != CUDA_SUCCESS; }
  void poison(CUresult status);
  void clear_sticky() noexcept { sticky_.store(CUDA_SUCCESS, std::memory_order_release); }

  // The legacy null stream and the calling thread's per-thread default stream, made on first use;
  // nullptr once the context is dead.
  std::shared_ptr<stream> legacy_stream();
  std::shared_ptr<stream> per_thread_stream();
  std::shared_ptr<stream> legacy_stream_if_made();
  // Streams the context waits for in cuCtxSynchronize and wakes when poisoned.
  void track(const std::shared_ptr<stream>& s);
  std::vector<std::shared_ptr<stream>> streams();
  // Held while work is appended to any stream of the context, so that the implicit ordering between
  // the legacy stream and blocking streams sees one order of submission.
  std::mutex& ordering() noexcept { return ordering_; }

  CUresult enable_peer_access(const context& peer);
  CUresult disable_peer_access(const context& peer);
  void forget_peer(const context* peer);

  void activate();
  // Marks the context dead and hands over its streams, for teardown.
  std::vector<std::shared_ptr<stream>> deactivate();

  // Retains of a primary context; guarded by the registry's lifecycle lock.
  int primary_references = 0;

 private:
  const CUdevice device_;
  const bool primary_;
  std::atomic<bool> alive_{false};
  std::atomic<unsigned long long> id_{0};
  std::atomic<CUresult> sticky_{CUDA_SUCCESS};
  std::mutex ordering_;
  std::mutex mutex_;
  std::shared_ptr<stream> legacy_;
  std::map<std::thread::id, std::shared_ptr<stream>> per_thread_;
  std::vector<std::weak_ptr<stream>> streams_;
  std::set<const context*> peers_;
};

// A live context behind `handle`, or nullptr (unknown, or dead).
context* find_context(CUcontext handle) noexcept;
std::vector<context*> live_contexts();
// Created contexts plus retained primary contexts (current_usage().contexts).
std::size_t held_context_count();

CUresult retain_primary(CUdevice device, CUcontext* out);
CUresult release_primary(CUdevice device);
CUresult create_context(CUdevice device, CUcontext* out);
CUresult destroy_context(CUcontext handle);

// Frees everything a dying context owns: stream work drains, streams, events, modules and memory go.
void tear_down(context& ctx, std::vector<std::shared_ptr<stream>> streams);

// The calling thread's context stack. The top may be dead (destroyed by another thread).
context* top_of_stack() noexcept;
void push_current(context* ctx);
context* pop_current() noexcept;
void set_current(context* ctx);
void drop_from_this_thread(const context* ctx) noexcept;

// The current context for a call that needs one: CUDA_ERROR_INVALID_CONTEXT when there is none,
// CUDA_ERROR_CONTEXT_IS_DESTROYED when it died, else its sticky status.
CUresult current_context(context*& out) noexcept;
// The same, without the sticky check (frees still release what they name).
CUresult current_context_even_if_poisoned(context*& out) noexcept;

}  // namespace ferry::sim::detail
