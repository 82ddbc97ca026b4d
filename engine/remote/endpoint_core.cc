#include "engine/remote/endpoint_core.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

namespace ferry::remote::detail {
namespace {

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// UCX's callbacks run inside a UCX call made under the worker's lock (a progress pass, a cancel).
void on_sent(void* ucx, ucs_status_t status, void* user) {
  auto* op = static_cast<request_state*>(user);
  op->ucx = nullptr;
  ucp_request_free(ucx);
  op->owner_->finish(*op, status, status == UCS_OK ? op->bytes : 0);
}

void on_received(void* ucx, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* op = static_cast<request_state*>(user);
  op->ucx = nullptr;
  ucp_request_free(ucx);
  op->owner_->finish(*op, status, status == UCS_OK ? info->length : 0);
}

// The puts one flush completes.
struct flush_group {
  endpoint_core* owner = nullptr;
  std::vector<request_state*> puts;
};

void complete(const flush_group& group, ucs_status_t status) {
  for (request_state* op : group.puts) group.owner->finish(*op, status, status == UCS_OK ? op->bytes : 0);
}

void on_flushed(void* ucx, ucs_status_t status, void* user) {
  std::unique_ptr<flush_group> group(static_cast<flush_group*>(user));
  ucp_request_free(ucx);
  complete(*group, status);
}

// The peer failed (UCX's own detection): handled outside UCX's callback, as UCX asks, on the executor.
void on_peer_error(void* user, ucp_ep_h, ucs_status_t status) {
  auto* endpoint = static_cast<endpoint_core*>(user);
  boost::asio::post(endpoint->worker().executor(), [weak = endpoint->weak_from_this(), status] {
    if (auto endpoint = weak.lock()) {
      {
        std::lock_guard guard(endpoint->worker().lock());
        endpoint->fail(boost::system::error_code(make_ucx_error_code(status)));
      }
      endpoint->worker().kick();
    }
  });
}

ucp_request_param_t send_parameters(request_state& op) {
  ucp_request_param_t parameters{};
  parameters.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  parameters.cb.send = on_sent;
  parameters.user_data = &op;
  return parameters;
}

}  // namespace

void request_state::cancel() noexcept {
  worker_core& worker = owner_->worker();
  {
    std::lock_guard guard(worker.lock());
    // Completed already, or asked before: nothing to do (cancellation after completion is harmless).
    if (completed || cancel_requested) return;
    cancel_requested = true;
    // The callback may run inside ucp_request_cancel, under this same lock, and finish the op.
    if (ucx != nullptr && withdraw_on_cancel) ucp_request_cancel(worker.handle(), ucx);
  }
  worker.kick();
}

endpoint_core::endpoint_core(std::shared_ptr<worker_core> worker, boost::asio::ip::tcp::socket socket,
                             std::uint64_t peer, std::uint64_t send_tag, std::uint64_t receive_tag)
    : worker_(std::move(worker)),
      socket_(std::move(socket)),
      peer_(peer),
      send_tag_(send_tag),
      receive_tag_(receive_tag) {}

// close() (or fail()) ran before the last reference went: the endpoint and keys are gone; only an
// endpoint that never finished its wire-up still holds UCX's endpoint.
endpoint_core::~endpoint_core() {
  release_endpoint();
}

// Forced: UCX completes every outstanding send, put, get and flush on the endpoint with an error.
void endpoint_core::release_endpoint() noexcept {
  for (auto& [packed, key] : keys_) ucp_rkey_destroy(key);
  keys_.clear();
  if (endpoint_ == nullptr) return;
  ucp_request_param_t parameters{};
  parameters.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  parameters.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t closing = ucp_ep_close_nbx(endpoint_, &parameters);
  if (UCS_PTR_IS_PTR(closing)) ucp_request_free(closing);
  endpoint_ = nullptr;
}

void endpoint_core::connect(const std::vector<std::byte>& peer_address) {
  {
    std::lock_guard guard(worker_->lock());
    ucp_ep_params_t parameters{};
    parameters.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
    parameters.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
    parameters.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    parameters.err_handler.cb = on_peer_error;
    parameters.err_handler.arg = this;
    ucs_status_t status = ucp_ep_create(worker_->handle(), &parameters, &endpoint_);
    if (status != UCS_OK) {
      endpoint_ = nullptr;
      throw std::system_error(make_ucx_error_code(status), "ferry::remote: ucp_ep_create");
    }
    watch_peer();
  }
  worker_->kick();
}

// The socket carries nothing after the wire-up: a read that ends means the peer closed it or died.
void endpoint_core::watch_peer() {
  socket_.async_read_some(boost::asio::buffer(&liveness_byte_, 1),
                          [weak = weak_from_this()](boost::system::error_code error, std::size_t) {
                            auto self = weak.lock();
                            if (!self) return;
                            {
                              std::lock_guard guard(self->worker_->lock());
                              if (self->failure_) return;  // closed here, or failed already
                              if (!error) {
                                self->watch_peer();
                                return;
                              }
                              // What the peer sent before it went is delivered first.
                              while (ucp_worker_progress(self->worker_->handle()) != 0) {
                              }
                              self->fail(boost::system::error_code(make_ucx_error_code(UCS_ERR_CONNECTION_RESET)));
                            }
                            self->worker_->kick();
                          });
}

void endpoint_core::close() noexcept {
  {
    std::lock_guard guard(worker_->lock());
    fail(boost::asio::error::operation_aborted);
  }
  worker_->kick();
}

void endpoint_core::fail(boost::system::error_code why) {
  if (failure_) return;
  failure_ = why;
  boost::system::error_code ignored;
  socket_.close(ignored);
  // Receives are the worker's, not the endpoint's: UCX would keep them posted; take them back. Copied
  // first: a cancelled op's callback may run inside ucp_request_cancel and leave pending_.
  std::vector<std::shared_ptr<request_state>> ops;
  for (auto& [raw, op] : pending_) ops.push_back(op);
  for (auto& op : ops) {
    if (op->ucx != nullptr && op->withdraw_on_cancel) ucp_request_cancel(worker_->handle(), op->ucx);
  }
  release_endpoint();
  fail_unflushed();
}

std::shared_ptr<request_state> endpoint_core::prepare(completion_ptr done) {
  return std::make_shared<request_state>(std::move(done), shared_from_this());
}

ucp_rkey_h endpoint_core::key_for(const descriptor& remote, std::string_view where) {
  if (remote.owner() != peer_) {
    throw std::invalid_argument(std::string(where) + ": the descriptor was exported by worker " + hex(remote.owner()) +
                                ", but this endpoint's peer is worker " + hex(peer_) +
                                " (a descriptor is usable only on a connection to the worker that exported it)");
  }
  if (auto found = keys_.find(remote.packed_key()); found != keys_.end()) return found->second;
  if (endpoint_ == nullptr) return nullptr;  // failed or closed: the op reports that instead
  ucp_rkey_h key = nullptr;
  ucs_status_t status = ucp_ep_rkey_unpack(endpoint_, remote.packed_key().data(), &key);
  if (status != UCS_OK) {
    throw std::invalid_argument(std::string(where) + ": UCX cannot unpack the descriptor's " +
                                std::to_string(remote.packed_key().size()) + "-byte remote key (" +
                                ucs_status_string(status) + ")");
  }
  keys_.emplace(remote.packed_key(), key);
  return key;
}

bool endpoint_core::admit(const std::shared_ptr<request_state>& op, bool touches_device) {
  if (failure_ || endpoint_ == nullptr) {
    op->completed = true;
    op->done_->complete(failure_ ? failure_ : boost::asio::error::not_connected, 0);
    return false;
  }
  op->touches_device = touches_device;
  worker_->op_started(touches_device);
  pending_.emplace(op.get(), op);
  return true;
}

void endpoint_core::track(const std::shared_ptr<request_state>& op, ucs_status_ptr_t status, std::size_t bytes) {
  op->bytes = bytes;
  if (UCS_PTR_IS_ERR(status)) {
    finish(*op, UCS_PTR_STATUS(status), 0);
  } else if (status == nullptr) {
    finish(*op, UCS_OK, bytes);
  } else {
    op->ucx = status;
  }
}

void endpoint_core::put(const std::shared_ptr<request_state>& op, local_bytes local, const descriptor& remote) {
  {
    std::lock_guard guard(worker_->lock());
    const cuda_context_scope in_device_context(worker_->cuda_context());
    if (!admit(op, local.kind == memory_kind::device || remote.kind() == memory_kind::device)) return;
    ucp_rkey_h key = key_for(remote, "ferry::remote::endpoint::async_put");
    ucp_request_param_t parameters{};
    if (local.kind == memory_kind::device) {
      parameters.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      parameters.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    ucs_status_ptr_t written = ucp_put_nbx(endpoint_, local.address, local.size, remote.address(), key, &parameters);
    if (UCS_PTR_IS_ERR(written)) {
      finish(*op, UCS_PTR_STATUS(written), 0);
      return;
    }
    // The put's own request only says the local buffer may be reused; a flush behind it says the
    // bytes are in the peer's memory, which is what the op promises (a notification may follow).
    if (written != nullptr) ucp_request_free(written);
    op->bytes = local.size;
    unflushed_.push_back(op.get());
    if (!flush_scheduled_) {
      flush_scheduled_ = true;
      boost::asio::post(worker_->executor(), [self = shared_from_this()] {
        {
          std::lock_guard guard(self->worker_->lock());
          self->flush_unflushed();
        }
        self->worker_->kick();
      });
    }
  }
  worker_->kick();
}

void endpoint_core::flush_unflushed() {
  flush_scheduled_ = false;
  if (unflushed_.empty()) return;
  if (failure_ || endpoint_ == nullptr) {
    fail_unflushed();
    return;
  }
  const cuda_context_scope in_device_context(worker_->cuda_context());
  auto group = std::make_unique<flush_group>();
  group->owner = this;
  group->puts = std::exchange(unflushed_, {});
  ucp_request_param_t parameters{};
  parameters.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  parameters.cb.send = on_flushed;
  parameters.user_data = group.get();
  ucs_status_ptr_t flushing = ucp_ep_flush_nbx(endpoint_, &parameters);
  if (UCS_PTR_IS_PTR(flushing)) {
    (void)group.release();  // on_flushed has it
    return;
  }
  complete(*group, UCS_PTR_STATUS(flushing));
}

void endpoint_core::fail_unflushed() {
  for (request_state* op : std::exchange(unflushed_, {})) finish(*op, UCS_ERR_CANCELED, 0);
}

void endpoint_core::get(const std::shared_ptr<request_state>& op, local_bytes local, const descriptor& remote) {
  {
    std::lock_guard guard(worker_->lock());
    const cuda_context_scope in_device_context(worker_->cuda_context());
    if (!admit(op, local.kind == memory_kind::device || remote.kind() == memory_kind::device)) return;
    ucp_rkey_h key = key_for(remote, "ferry::remote::endpoint::async_get");
    op->bytes = local.size;
    ucp_request_param_t parameters = send_parameters(*op);
    if (local.kind == memory_kind::device) {
      parameters.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      parameters.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    track(op, ucp_get_nbx(endpoint_, local.address, local.size, remote.address(), key, &parameters), local.size);
  }
  worker_->kick();
}

void endpoint_core::send(const std::shared_ptr<request_state>& op, std::span<const std::byte> message) {
  {
    std::lock_guard guard(worker_->lock());
    if (!admit(op, false)) return;
    ucp_request_param_t parameters = send_parameters(*op);
    track(op, ucp_tag_send_nbx(endpoint_, message.data(), message.size(), send_tag_, &parameters), message.size());
  }
  worker_->kick();
}

void endpoint_core::receive(const std::shared_ptr<request_state>& op, std::span<std::byte> buffer) {
  {
    std::lock_guard guard(worker_->lock());
    if (!admit(op, false)) return;
    op->withdraw_on_cancel = true;
    ucp_tag_recv_info_t info{};
    ucp_request_param_t parameters{};
    parameters.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO;
    parameters.cb.recv = on_received;
    parameters.user_data = op.get();
    parameters.recv_info.tag_info = &info;
    ucs_status_ptr_t status =
        ucp_tag_recv_nbx(worker_->handle(), buffer.data(), buffer.size(), receive_tag_, ~ucp_tag_t{0}, &parameters);
    track(op, status, status == nullptr ? info.length : 0);
  }
  worker_->kick();
}

void endpoint_core::finish(request_state& op, ucs_status_t status, std::size_t bytes) {
  if (op.completed) return;
  op.completed = true;
  worker_->op_finished(op.touches_device);
  boost::system::error_code error;
  if (op.cancel_requested) {
    error = boost::asio::error::operation_aborted;
  } else if (status != UCS_OK) {
    error = failure_ ? failure_ : boost::system::error_code(make_ucx_error_code(status));
  }
  // Held to the end: the op may hold the last reference to this endpoint.
  std::shared_ptr<request_state> hold;
  if (auto found = pending_.find(&op); found != pending_.end()) {
    hold = std::move(found->second);
    pending_.erase(found);
  }
  if (worker_->collecting()) {
    worker_->defer(std::move(op.done_), error, error ? 0 : bytes);
  } else {
    op.done_->complete(error, error ? 0 : bytes);
  }
}

}  // namespace ferry::remote::detail
