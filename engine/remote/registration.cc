// ferry::remote::registration and worker::register_memory: memory mapped into the worker's UCX context,
// and descriptors of it.
#include <stdexcept>
#include <string>
#include <system_error>

#include "engine/remote/worker_core.hpp"
#include "ferry/backend.hpp"

namespace ferry::remote {
namespace {

std::shared_ptr<registration::state> map(const std::shared_ptr<detail::worker_core>& worker, std::uint64_t address,
                                         std::size_t bytes, memory_kind kind) {
  auto made = std::make_shared<registration::state>();
  made->worker = worker;
  made->address = address;
  made->size = bytes;
  made->kind = kind;
  std::lock_guard guard(worker->lock());
  if (kind == memory_kind::device) {
    if (CUcontext owner = detail::context_of_device_memory(address)) worker->use_cuda_context(owner);
  }
  const detail::cuda_context_scope in_device_context(worker->cuda_context());
  ucp_mem_map_params_t parameters{};
  parameters.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  parameters.address = reinterpret_cast<void*>(address);
  parameters.length = bytes;
  parameters.memory_type = kind == memory_kind::device ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  ucs_status_t status = ucp_mem_map(worker->context(), &parameters, &made->memory);
  if (status != UCS_OK) {
    made->memory = nullptr;
    throw std::system_error(make_ucx_error_code(status), "ferry::remote::worker::register_memory: ucp_mem_map of " +
                                                             std::to_string(bytes) + " bytes");
  }
  void* packed = nullptr;
  std::size_t packed_size = 0;
  status = ucp_rkey_pack(worker->context(), made->memory, &packed, &packed_size);
  if (status != UCS_OK) {
    throw std::system_error(make_ucx_error_code(status), "ferry::remote::worker::register_memory: ucp_rkey_pack");
  }
  made->key.assign(static_cast<std::byte*>(packed), static_cast<std::byte*>(packed) + packed_size);
  ucp_rkey_buffer_release(packed);
  return made;
}

}  // namespace

registration::state::~state() {
  if (memory == nullptr) return;
  std::lock_guard guard(worker->lock());
  const detail::cuda_context_scope in_device_context(worker->cuda_context());
  ucp_mem_unmap(worker->context(), memory);
}

registration::registration(registration&&) noexcept = default;
registration& registration::operator=(registration&& other) noexcept {
  registration(std::move(other)).state_.swap(state_);
  return *this;
}
registration::~registration() = default;

std::uint64_t registration::address() const noexcept { return state_ ? state_->address : 0; }
std::uint64_t registration::size() const noexcept { return state_ ? state_->size : 0; }
memory_kind registration::kind() const noexcept { return state_ ? state_->kind : memory_kind::host; }

descriptor registration::export_descriptor() const {
  if (!state_) throw std::invalid_argument("ferry::remote::registration::export_descriptor: empty registration");
  return export_descriptor(0, state_->size);
}

descriptor registration::export_descriptor(std::uint64_t offset, std::uint64_t size) const {
  if (!state_) throw std::invalid_argument("ferry::remote::registration::export_descriptor: empty registration");
  if (offset > state_->size || size > state_->size - offset || size == 0) {
    throw std::invalid_argument("ferry::remote::registration::export_descriptor: offset " + std::to_string(offset) +
                                " and size " + std::to_string(size) + " do not fit in the registration's " +
                                std::to_string(state_->size) + " bytes (or size is 0)");
  }
  return descriptor::make(state_->worker->id(), state_->kind, state_->address, state_->size, state_->address + offset,
                          size, state_->key);
}

registration worker::register_memory(std::span<std::byte> host) {
  if (!core_) throw std::invalid_argument("ferry::remote::worker::register_memory: the worker was moved from");
  if (host.empty() || host.data() == nullptr) {
    throw std::invalid_argument("ferry::remote::worker::register_memory: host memory is empty (" +
                                std::to_string(host.size()) + " bytes)");
  }
  return registration(map(core_, reinterpret_cast<std::uintptr_t>(host.data()), host.size(), memory_kind::host));
}

registration worker::register_device(std::uint64_t address, std::size_t bytes) {
  if (!core_) throw std::invalid_argument("ferry::remote::worker::register_memory: the worker was moved from");
  if (address == 0 || bytes == 0) {
    throw std::invalid_argument("ferry::remote::worker::register_memory: device memory at " + std::to_string(address) +
                                " of " + std::to_string(bytes) + " bytes is null or empty");
  }
  if (ferry::active_backend() == ferry::backend::sim) {
    throw std::invalid_argument("ferry::remote::worker::register_memory: device memory on the sim backend is not "
                                "host-addressable, so UCX cannot reach it: register host memory there");
  }
  // Without a CUDA transport, UCX closes its CUDA memory domain and takes device memory for host memory
  // (and fails on it with no word of why).
  ucp_context_attr_t attributes{};
  attributes.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(core_->context(), &attributes) == UCS_OK &&
      (attributes.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) == 0) {
    const std::string& chosen = core_->options().transports;
    throw std::invalid_argument(
        "ferry::remote::worker::register_memory: device memory, but the worker's transports (" +
        (chosen.empty() ? std::string("UCX's own choice") : "\"" + chosen + "\"") +
        ") reach none: name cuda_copy or cuda_ipc in worker_options::transports");
  }
  return registration(map(core_, address, bytes, memory_kind::device));
}

}  // namespace ferry::remote
