// The non-template part of ferry::device_set (implemented in engine/context/peer_mesh.cc): its devices'
// primary contexts, the links between them, the peer access it enabled, and where a copy goes.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string_view>
#include <vector>

#include "ferry/context.hpp"

namespace ferry {

// What the driver says of the link from one device to another (cuDeviceGetP2PAttribute).
struct device_link {
  bool access_supported = false;  // contexts on `from` can reach `to`'s memory directly
  bool access_enabled = false;    // the set's context on `from` has peer access to the one on `to`
  int performance_rank = 0;       // the driver's relative rank of the link: lower is faster
  bool native_atomics = false;    // every CUDA atomic works over the link
};

namespace detail {

class peer_mesh {
 public:
  // Retains the primary context of each listed device and enables peer access between every pair whose
  // link supports it. Throws std::invalid_argument for an empty list, an ordinal outside [0, count) or
  // one listed twice; cuda_error when the driver fails (nothing stays enabled then).
  explicit peer_mesh(std::vector<int> ordinals);
  peer_mesh(const peer_mesh&) = delete;
  peer_mesh& operator=(const peer_mesh&) = delete;
  // Disables the peer access it enabled (not what it found enabled), then releases the contexts.
  ~peer_mesh();

  // Every device present, in order.
  static std::vector<int> every_device();

  const std::vector<int>& ordinals() const noexcept { return ordinals_; }
  // The position of `ordinal` in ordinals(); std::invalid_argument naming `operation` when it is not there.
  std::size_t index_of(std::string_view operation, int ordinal) const;
  // std::invalid_argument when either device is not in the set, or they are the same device.
  device_link link(int from, int to) const;

  // Where a copy between two device allocations runs: the engine (index into ordinals()) of the
  // destination's device, and the contexts that own the two allocations (cuPointerGetAttribute).
  // std::invalid_argument when a pointer is not device memory of a device in the set.
  struct route {
    std::size_t engine;
    CUcontext source_context;
    CUcontext destination_context;
  };
  route route_copy(std::string_view operation, CUdeviceptr source, CUdeviceptr destination) const;

 private:
  void disable_enabled() noexcept;

  std::vector<int> ordinals_;
  std::vector<context> contexts_;
  std::vector<device_link> links_;  // ordinals_.size() squared, row `from`
  // The links (from * size + to) whose access this set enabled, and no_link for those it found enabled.
  static constexpr std::size_t no_link = static_cast<std::size_t>(-1);
  std::vector<std::size_t> enabled_by_us_;
};

}  // namespace detail
}  // namespace ferry
