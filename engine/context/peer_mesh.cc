#include "ferry/detail/peer_mesh.hpp"

#include <algorithm>
#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"

namespace ferry::detail {
namespace {

std::string device_name(int ordinal) { return "device " + std::to_string(ordinal); }

int p2p_attribute(CUdevice_P2PAttribute attribute, const context& from, const context& to, const char* what) {
  int value = 0;
  check(driver().cuDeviceGetP2PAttribute(&value, attribute, from.device().handle(), to.device().handle()),
        "cuDeviceGetP2PAttribute",
        std::string(what) + " of " + device_name(from.device().ordinal()) + " -> " + device_name(to.device().ordinal()));
  return value;
}

}  // namespace

std::vector<int> peer_mesh::every_device() {
  std::vector<int> ordinals(static_cast<std::size_t>(device::count()));
  for (std::size_t i = 0; i < ordinals.size(); ++i) ordinals[i] = static_cast<int>(i);
  return ordinals;
}

peer_mesh::peer_mesh(std::vector<int> ordinals) : ordinals_(std::move(ordinals)) {
  if (ordinals_.empty()) throw_invalid_argument("device_set", "the list of devices is empty");
  for (std::size_t i = 0; i < ordinals_.size(); ++i) {
    if (std::find(ordinals_.begin(), ordinals_.begin() + static_cast<std::ptrdiff_t>(i), ordinals_[i]) !=
        ordinals_.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw_invalid_argument("device_set", device_name(ordinals_[i]) + " is listed twice");
    }
  }
  const int present = device::count();
  for (int ordinal : ordinals_) {
    if (ordinal < 0 || ordinal >= present) {
      throw_invalid_argument("device_set", device_name(ordinal) + " is not in [0, " + std::to_string(present) +
                                               "): " + std::to_string(present) + " device(s) present");
    }
  }
  for (int ordinal : ordinals_) contexts_.push_back(context::primary(device::get(ordinal)));
  const std::size_t n = ordinals_.size();
  links_.resize(n * n);
  try {
    for (std::size_t from = 0; from < n; ++from) {
      for (std::size_t to = 0; to < n; ++to) {
        if (from == to) continue;
        device_link& link = links_[from * n + to];
        link.access_supported = p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, contexts_[from], contexts_[to],
                                              "access support") != 0;
        link.performance_rank =
            p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, contexts_[from], contexts_[to], "performance rank");
        link.native_atomics = p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, contexts_[from],
                                            contexts_[to], "native atomics") != 0;
        if (!link.access_supported) continue;
        context_guard in_from(contexts_[from]);
        const CUresult status = driver().cuCtxEnablePeerAccess(contexts_[to].get(), 0);
        if (status != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
          check(status, "cuCtxEnablePeerAccess",
                device_name(ordinals_[from]) + "'s primary context to " + device_name(ordinals_[to]) + "'s");
        }
        link.access_enabled = true;
        // Only what this set turned on is turned off again with it.
        enabled_by_us_.push_back(status == CUDA_SUCCESS ? from * n + to : no_link);
      }
    }
  } catch (...) {
    disable_enabled();
    throw;
  }
}

peer_mesh::~peer_mesh() { disable_enabled(); }

void peer_mesh::disable_enabled() noexcept {
  const std::size_t n = ordinals_.size();
  for (std::size_t index : enabled_by_us_) {
    if (index == no_link) continue;
    CUcontext popped = nullptr;
    if (driver().cuCtxPushCurrent(contexts_[index / n].get()) != CUDA_SUCCESS) continue;
    driver().cuCtxDisablePeerAccess(contexts_[index % n].get());
    driver().cuCtxPopCurrent(&popped);
  }
  enabled_by_us_.clear();
}

std::size_t peer_mesh::index_of(std::string_view operation, int ordinal) const {
  const auto found = std::find(ordinals_.begin(), ordinals_.end(), ordinal);
  if (found == ordinals_.end()) {
    std::string held;
    for (int o : ordinals_) held += (held.empty() ? "" : ", ") + std::to_string(o);
    throw_invalid_argument(operation, device_name(ordinal) + " is not in the set (devices " + held + ")");
  }
  return static_cast<std::size_t>(found - ordinals_.begin());
}

device_link peer_mesh::link(int from, int to) const {
  const std::size_t a = index_of("device_set::link", from);
  const std::size_t b = index_of("device_set::link", to);
  if (a == b) {
    throw_invalid_argument("device_set::link", "from and to are both " + device_name(from) +
                                                   "; a link joins two different devices");
  }
  return links_[a * ordinals_.size() + b];
}

peer_mesh::route peer_mesh::route_copy(std::string_view operation, CUdeviceptr source, CUdeviceptr destination) const {
  const auto owner = [&](CUdeviceptr pointer, const char* side, CUcontext& context_of) {
    CUcontext owner_context = nullptr;
    int ordinal = -1;
    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* values[] = {&owner_context, &ordinal};
    const CUresult status = driver().cuPointerGetAttributes(2, attributes, values, pointer);
    if (status != CUDA_SUCCESS || owner_context == nullptr || ordinal < 0) {
      throw_invalid_argument(operation, std::string(side) + " " + hex(pointer) +
                                            " is not device memory the driver knows (allocate it on a device of the set)");
    }
    context_of = owner_context;
    return index_of(operation, ordinal);
  };
  route chosen{};
  owner(source, "source", chosen.source_context);
  chosen.engine = owner(destination, "destination", chosen.destination_context);
  return chosen;
}

}  // namespace ferry::detail
