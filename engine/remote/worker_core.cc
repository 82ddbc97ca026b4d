#include "engine/remote/worker_core.hpp"

#include "engine/driver/driver_table.hpp"

#include <boost/asio/post.hpp>

#include <cstdlib>
#include <random>
#include <string>
#include <system_error>
#include <utility>

#include "engine/remote/endpoint_core.hpp"

namespace ferry::remote::detail {
namespace {

void check(ucs_status_t status, const char* call) {
  if (status != UCS_OK) throw std::system_error(make_ucx_error_code(status), std::string("ferry::remote: ") + call);
}

std::uint64_t random_id() {
  std::random_device device;
  std::uint64_t id = 0;
  while (id == 0) id = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return id;
}

}  // namespace

worker_core::worker_core(boost::asio::any_io_executor executor, worker_options options)
    : executor_(std::move(executor)), options_(std::move(options)), id_(random_id()) {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  // Sets one of UCX's settings, or releases the configuration and throws `what`.
  auto modify = [config](const char* name, const char* value, const std::string& what) {
    ucs_status_t status = ucp_config_modify(config, name, value);
    if (status == UCS_OK) return;
    ucp_config_release(config);
    throw std::system_error(make_ucx_error_code(status), what);
  };
  if (!options_.transports.empty()) {
    modify("TLS", options_.transports.c_str(),
           "ferry::remote::worker: UCX refuses the transport list '" + options_.transports + "'");
  }
  // Defaults for ferry's use of UCX; a setting in the environment (UCX_<name>) is left as it is.
  // - RNDV_THRESH=inf: with peer failure handling (which ferry's endpoints need: a peer that dies must
  //   fail their ops, not hang them) and the rendezvous protocol on, UCX uses for bulk RMA only
  //   transports that can invalidate registered memory, and TCP cannot: a put over TCP then went as
  //   copied messages ("software emulation" in UCX_PROTO_INFO=y) at a fraction of the zero-copy put's
  //   bandwidth. Without rendezvous the put is zero-copy again. ferry sends bulk data by put and get;
  //   its messages (notifications, descriptors) go eagerly, as small messages do anyway.
  // - TCP_TX_SEG_SIZE=64K (UCX's own receive segment): UCX carries a get over TCP as copied replies,
  //   8 KiB each by default, which bound its bandwidth (docs/performance.md).
  for (const auto& [name, value] : {std::pair{"RNDV_THRESH", "inf"}, std::pair{"TCP_TX_SEG_SIZE", "64K"}}) {
    if (std::getenv(("UCX_" + std::string(name)).c_str()) != nullptr) continue;
    modify(name, value, "ferry::remote: ucp_config_modify(" + std::string(name) + ")");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(status, "ucp_init");

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // lock_ serializes every call
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) {
    ucp_cleanup(context_);
    check(status, "ucp_worker_create");
  }
  int fd = -1;
  status = ucp_worker_get_efd(worker_, &fd);
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    check(status, "ucp_worker_get_efd");
  }
  // The descriptor belongs to UCX: released (not closed) before the worker is destroyed.
  events_.emplace(executor_, fd);
}

worker_core::~worker_core() {
  if (events_) {
    boost::system::error_code ignored;
    events_->cancel(ignored);
    events_->release();
  }
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

void worker_core::start() { kick(); }

void worker_core::shutdown() {
  std::vector<std::shared_ptr<endpoint_core>> open;
  {
    std::lock_guard guard(lock_);
    for (auto& weak : endpoints_) {
      if (auto endpoint = weak.lock()) open.push_back(std::move(endpoint));
    }
    endpoints_.clear();
    if (acceptor_) {
      boost::system::error_code ignored;
      acceptor_->close(ignored);
    }
  }
  for (auto& endpoint : open) endpoint->close();
  std::lock_guard guard(lock_);
  stopped_ = true;
  boost::system::error_code ignored;
  events_->cancel(ignored);
}

std::vector<std::byte> worker_core::address() {
  std::lock_guard guard(lock_);
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  check(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
  std::vector<std::byte> bytes(reinterpret_cast<std::byte*>(address), reinterpret_cast<std::byte*>(address) + length);
  ucp_worker_release_address(worker_, address);
  return bytes;
}

void worker_core::op_started(bool touches_device) noexcept {
  ++in_flight_;
  if (touches_device) ++device_in_flight_;
}

void worker_core::op_finished(bool touches_device) noexcept {
  --in_flight_;
  if (touches_device) --device_in_flight_;
}

void worker_core::kick() {
  {
    std::lock_guard guard(lock_);
    if (pass_posted_ || stopped_) return;
    pass_posted_ = true;
  }
  boost::asio::post(executor_, [self = shared_from_this()] { self->pass(); });
}

void worker_core::add_endpoint(const std::shared_ptr<endpoint_core>& endpoint) {
  std::lock_guard guard(lock_);
  std::erase_if(endpoints_, [](const auto& weak) { return weak.expired(); });
  endpoints_.push_back(endpoint);
}

unsigned short worker_core::listen(std::string_view address, unsigned short port) {
  namespace ip = boost::asio::ip;
  boost::system::error_code error;
  ip::address host = ip::make_address(std::string(address), error);
  if (error) {
    throw std::invalid_argument("ferry::remote::worker::listen: address '" + std::string(address) +
                                "' is not an IP address (" + error.message() + ")");
  }
  std::lock_guard guard(lock_);
  if (acceptor_) throw std::invalid_argument("ferry::remote::worker::listen: the worker listens already");
  acceptor_.emplace(executor_, ip::tcp::endpoint(host, port));
  return acceptor_->local_endpoint().port();
}

cuda_context_scope::cuda_context_scope(CUcontext context) noexcept {
  if (context == nullptr) return;
  const auto& driver = ferry::detail::driver();
  CUcontext current = nullptr;
  driver.cuCtxGetCurrent(&current);
  if (current != context) pushed_ = driver.cuCtxPushCurrent(context) == CUDA_SUCCESS;
}

cuda_context_scope::~cuda_context_scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  ferry::detail::driver().cuCtxPopCurrent(&popped);
}

CUcontext context_of_device_memory(std::uint64_t address) noexcept {
  CUcontext owner = nullptr;
  if (ferry::detail::driver().cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT,
                                                    static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS) {
    return nullptr;
  }
  return owner;
}

void worker_core::defer(completion_ptr done, boost::system::error_code error, std::size_t bytes) {
  finished_.push_back({std::move(done), error, bytes});
}

// One turn of the bridge: progress until UCX has nothing more, run the handlers of what completed
// (here, rather than posted behind the io_context's reactor: a request/response loop's next request goes
// out that much sooner), then either poll again through the executor or arm the wakeup descriptor and
// wait on it.
void worker_core::pass() {
  std::vector<finished_op> finished;
  {
    std::unique_lock guard(lock_);
    pass_posted_ = false;
    if (stopped_) return;
    {
      // UCX's CUDA transports call the driver in their progress only for transfers in flight.
      const cuda_context_scope in_device_context(device_in_flight_ > 0 ? cuda_context() : nullptr);
      collecting_ = true;
      while (ucp_worker_progress(worker_) != 0) {
      }
      collecting_ = false;
    }
    if (finished_.empty()) {
      continue_after_progress(guard);
      return;
    }
    finished.swap(finished_);
  }
  try {
    deliver(finished);
  } catch (...) {
    // As a posted handler's exception would: it leaves the io_context's run(), and the worker goes on.
    kick();
    throw;
  }
  std::unique_lock guard(lock_);
  finished.clear();
  if (finished_.empty() && finished_.capacity() < finished.capacity()) finished_.swap(finished);  // reused
  if (stopped_ || pass_posted_) return;  // a handler started an op: a pass is posted already
  // One more pass before the wakeup descriptor is armed: the handlers' executors may start the next ops
  // (a coroutine resumed through a post, a handler bound to a strand), and a request/response loop
  // then never pays for arming (three system calls) and the reactor's look at the descriptor.
  pass_posted_ = true;
  boost::asio::post(executor_, [self = shared_from_this()] { self->pass(); });
}

void worker_core::deliver(std::vector<finished_op>& finished) {
  std::size_t next = 0;
  try {
    const ferry::detail::in_place_completions delivering(true);
    for (; next < finished.size(); ++next) {
      completion_ptr done = std::move(finished[next].done);
      done->complete(finished[next].error, finished[next].bytes);
    }
  } catch (...) {
    // Left the marked scope: the other handlers are posted.
    for (++next; next < finished.size(); ++next) {
      finished[next].done->complete(finished[next].error, finished[next].bytes);
    }
    throw;
  }
}

void worker_core::continue_after_progress(std::unique_lock<std::mutex>& guard) {
  bool poll = options_.progress == progress_mode::polling ? in_flight_ > 0 : device_in_flight_ > 0;
  if (!poll && !waiting_) {
    ucs_status_t status = ucp_worker_arm(worker_);
    if (status == UCS_OK) {
      waiting_ = true;
      guard.unlock();
      wait_for_events();
      return;
    }
    poll = true;  // UCS_ERR_BUSY: events arrived between the progress and the arm
  }
  if (poll && !pass_posted_) {
    pass_posted_ = true;
    boost::asio::post(executor_, [self = shared_from_this()] { self->pass(); });
  }
}

void worker_core::wait_for_events() {
  events_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code error) {
                        {
                          std::lock_guard guard(self->lock_);
                          self->waiting_ = false;
                          if (error || self->stopped_) return;
                        }
                        self->kick();
                      });
}

}  // namespace ferry::remote::detail
