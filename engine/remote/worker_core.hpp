// A UCX context and worker, and the bridge that drives the worker's progress from an Asio executor:
// UCX's wakeup file descriptor on a posix::stream_descriptor while only host transports are in flight,
// polling through the executor while an op touches device memory (UCX's CUDA transports complete
// through host callbacks that no file descriptor announces) or when asked to poll.
//
// One mutex guards every UCX call: the worker is created single-threaded and ops may be initiated,
// cancelled and progressed from any thread of the executor's context (or any thread at all).
#pragma once

#include <cuda.h>
#include <ucp/api/ucp.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/remote.hpp"

namespace ferry::remote::detail {

class endpoint_core;

// Makes `context` current on the calling thread for a UCX call, then restores the thread's own: UCX's
// CUDA transports (cuda_copy, cuda_ipc) and its CUDA memory domain call the driver in the current
// context, and the threads that call UCX (the caller's, the executor's) need not have any. A null
// context (no device memory registered yet) changes nothing.
class cuda_context_scope {
 public:
  explicit cuda_context_scope(CUcontext context) noexcept;
  cuda_context_scope(const cuda_context_scope&) = delete;
  cuda_context_scope& operator=(const cuda_context_scope&) = delete;
  ~cuda_context_scope();

 private:
  bool pushed_ = false;
};

// The context that owns the device memory at `address` (nullptr when the driver knows none).
CUcontext context_of_device_memory(std::uint64_t address) noexcept;

class worker_core : public std::enable_shared_from_this<worker_core> {
 public:
  worker_core(boost::asio::any_io_executor executor, worker_options options);
  ~worker_core();

  worker_core(const worker_core&) = delete;
  worker_core& operator=(const worker_core&) = delete;

  // Starts the progress bridge (needs shared_from_this, so not in the constructor).
  void start();
  // Closes the endpoints and the listener, stops the bridge; registrations keep the context alive.
  void shutdown();

  const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
  std::uint64_t id() const noexcept { return id_; }
  ucp_context_h context() const noexcept { return context_; }
  ucp_worker_h handle() const noexcept { return worker_; }
  std::mutex& lock() noexcept { return lock_; }
  // The CUDA context of the device memory registered with this worker (the latest one), which its UCX
  // calls run in; null until device memory is registered.
  void use_cuda_context(CUcontext context) noexcept { cuda_context_.store(context); }
  CUcontext cuda_context() const noexcept { return cuda_context_.load(); }
  const worker_options& options() const noexcept { return options_; }

  // This worker's UCX address, for the wire-up.
  std::vector<std::byte> address();

  // An op entered or left UCX (under the lock); ops that touch device memory switch progress to polling.
  void op_started(bool touches_device) noexcept;
  void op_finished(bool touches_device) noexcept;
  // Makes sure a progress pass runs soon (after an op was started or cancelled from outside a pass).
  void kick();

  // Whether a pass is inside UCX's progress (under the lock): an op that completes there is handed to
  // the pass with defer(), which completes it once the lock is released (under in_place_completions).
  bool collecting() const noexcept { return collecting_; }
  void defer(completion_ptr done, boost::system::error_code error, std::size_t bytes);

  void add_endpoint(const std::shared_ptr<endpoint_core>& endpoint);
  boost::asio::ip::tcp::acceptor* acceptor() noexcept { return acceptor_ ? &*acceptor_ : nullptr; }
  unsigned short listen(std::string_view address, unsigned short port);

 private:
  // An op completed inside a pass's progress, its handler not yet run.
  struct finished_op {
    completion_ptr done;
    boost::system::error_code error;
    std::size_t bytes = 0;
  };

  void pass();
  // After a pass's progress (under the lock): polls again through the executor, or arms the wakeup
  // descriptor and waits on it (which releases the lock).
  void continue_after_progress(std::unique_lock<std::mutex>& guard);
  // Completes `finished` in order (the lock released), handlers run here where in_place_completions lets
  // them; if one throws, the rest are posted.
  static void deliver(std::vector<finished_op>& finished);
  void wait_for_events();

  boost::asio::any_io_executor executor_;
  worker_options options_;
  std::uint64_t id_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::mutex lock_;
  std::optional<boost::asio::posix::stream_descriptor> events_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::vector<std::weak_ptr<endpoint_core>> endpoints_;
  // Under lock_:
  std::size_t in_flight_ = 0;
  std::size_t device_in_flight_ = 0;
  std::atomic<CUcontext> cuda_context_{nullptr};
  bool pass_posted_ = false;
  bool collecting_ = false;
  std::vector<finished_op> finished_;  // defer()'s, delivered by the pass
  bool waiting_ = false;
  bool stopped_ = false;
};

// The state behind ferry::remote::registration.
}  // namespace ferry::remote::detail

namespace ferry::remote {
struct registration::state {
  std::shared_ptr<detail::worker_core> worker;
  ucp_mem_h memory = nullptr;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  memory_kind kind = memory_kind::host;
  std::vector<std::byte> key;  // UCX's packed remote key
  ~state();
};
}  // namespace ferry::remote
