// ferry::remote::endpoint: the public face of endpoint_core, and the argument checks every transfer
// passes before anything is sent.
#include <stdexcept>
#include <string>

#include "engine/remote/endpoint_core.hpp"

namespace ferry::remote {

endpoint::endpoint(std::shared_ptr<endpoint_core> core, executor_type executor)
    : core_(std::move(core)), executor_(std::move(executor)) {}

endpoint::endpoint(endpoint&&) noexcept = default;
endpoint& endpoint::operator=(endpoint&& other) noexcept {
  endpoint moved(std::move(other));  // what this held is released with `moved`
  std::swap(core_, moved.core_);
  std::swap(executor_, moved.executor_);
  return *this;
}

endpoint::~endpoint() { close(); }

std::uint64_t endpoint::peer() const noexcept { return core_ ? core_->peer() : 0; }

void endpoint::close() noexcept {
  if (auto core = std::move(core_)) core->close();
}

void endpoint::check_open(const char* operation) const {
  if (!core_) {
    throw std::invalid_argument(std::string("ferry::remote::endpoint::") + operation +
                                ": the endpoint is not connected (closed, moved from or default-constructed)");
  }
}

void endpoint::check_transfer(const char* operation, const local_bytes& local, const descriptor& remote,
                              bool writes_local) const {
  check_open(operation);
  std::string where = std::string("ferry::remote::endpoint::") + operation;
  if (local.address == nullptr || local.size == 0) {
    throw std::invalid_argument(where + ": local memory is null or empty (" + std::to_string(local.size) + " bytes)");
  }
  if (writes_local && !local.writable) {
    throw std::invalid_argument(where + ": local memory is read-only (a span of const bytes) but is the destination");
  }
  if (remote.packed_key().empty()) {
    throw std::invalid_argument(where + ": the remote descriptor is empty (default-constructed)");
  }
  if (local.size != remote.size()) {
    throw std::invalid_argument(where + ": local memory has " + std::to_string(local.size) +
                                " bytes, the remote descriptor covers " + std::to_string(remote.size()) +
                                " (use descriptor::window to address part of it)");
  }
  std::lock_guard guard(core_->worker().lock());
  (void)core_->key_for(remote, where);
}

std::shared_ptr<detail::request> endpoint::prepare(endpoint_core& core, detail::completion_ptr done) {
  return core.prepare(std::move(done));
}

namespace {
std::shared_ptr<detail::request_state> state_of(const std::shared_ptr<detail::request>& op) {
  return std::static_pointer_cast<detail::request_state>(op);
}
}  // namespace

void endpoint::start_put(endpoint_core& core, const std::shared_ptr<detail::request>& op, local_bytes local,
                         const descriptor& remote) {
  core.put(state_of(op), local, remote);
}
void endpoint::start_get(endpoint_core& core, const std::shared_ptr<detail::request>& op, local_bytes local,
                         const descriptor& remote) {
  core.get(state_of(op), local, remote);
}
void endpoint::start_send(endpoint_core& core, const std::shared_ptr<detail::request>& op,
                          std::span<const std::byte> message) {
  core.send(state_of(op), message);
}
void endpoint::start_receive(endpoint_core& core, const std::shared_ptr<detail::request>& op,
                             std::span<std::byte> buffer) {
  core.receive(state_of(op), buffer);
}

}  // namespace ferry::remote
