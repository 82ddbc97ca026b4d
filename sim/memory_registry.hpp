// Every range of memory the sim knows: device allocations (in the simulated address space, each backed by
// its own host memory), and managed, pinned and registered host ranges. Any interior pointer resolves to
// its allocation, which is how every device-side range is validated and translated to host bytes.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sim/control.hpp"

namespace ferry::sim::detail {

class context;

enum class memory_kind { device, managed, pinned, registered };

struct allocation {
  allocation(memory_kind kind, std::uintptr_t address, std::size_t size, std::byte* host,
             std::size_t host_alignment, context* owner, unsigned flags);
  ~allocation();
  allocation(const allocation&) = delete;
  allocation& operator=(const allocation&) = delete;

  // Device memory, managed memory, and pinned or registered memory mapped with DEVICEMAP.
  bool device_accessible() const noexcept;
  bool contains(std::uintptr_t start, std::size_t bytes) const noexcept {
    return start >= address && bytes <= size && start - address <= size - bytes;
  }

  const memory_kind kind;
  const std::uintptr_t address;  // what the application holds (with UVA, host ranges map 1:1)
  const std::size_t size;
  std::byte* const host;         // where the bytes are
  const std::size_t host_alignment;  // 0 when the bytes are the application's (registered)
  context* const owner;
  const unsigned flags;
  const std::uint64_t id;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: never reused
};

using allocation_ref = std::shared_ptr<const allocation>;

// A validated range: where its bytes are, and its allocation, kept alive until stream work that
// captured it has run (a cuMemFree racing with queued work must not free the bytes under it).
struct resolved {
  std::byte* host = nullptr;
  allocation_ref keep;
};

CUresult allocate_device(context& ctx, std::size_t bytes, CUdeviceptr* out);
CUresult allocate_managed(context& ctx, std::size_t bytes, unsigned flags, CUdeviceptr* out);
CUresult allocate_pinned(context& ctx, std::size_t bytes, unsigned flags, void** out);
CUresult register_host(context& ctx, void* base, std::size_t bytes, unsigned flags);
// cuMemFree (device or managed memory), cuMemFreeHost and cuMemHostUnregister: by base address only.
CUresult free_device(CUdeviceptr base);
CUresult free_pinned(void* base);
CUresult unregister_host(void* base);

// The allocation or host range containing `address`, or nullptr.
allocation_ref find_allocation(std::uintptr_t address);

// A device-side range: inside one device allocation, managed range (unless managed_allowed is false,
// as for stream memory operations) or DEVICEMAP host range; else CUDA_ERROR_INVALID_VALUE.
CUresult resolve_device(std::uintptr_t address, std::size_t bytes, resolved& out, bool managed_allowed = true);
// What a kernel reaches (unified addressing, as on every device the sim models): device and managed
// memory, and page-locked host memory at its host address whatever its flags (the driver maps all of it
// for kernels; DEVICEMAP only decides what cuMemHostGetDevicePointer answers).
CUresult resolve_for_kernel(std::uintptr_t address, std::size_t bytes, resolved& out);
// A host-side range: any host memory, but not null and not the simulated device address space.
CUresult resolve_host(const void* pointer, std::size_t bytes, resolved& out);
// Either, decided by the address (CU_MEMORYTYPE_UNIFIED, cuMemcpyBatchAsync).
CUresult resolve_unified(std::uintptr_t address, std::size_t bytes, resolved& out);

std::size_t device_bytes_in_use(CUdevice device);
// Context teardown: its allocations, pinned memory and registrations go with it, as on the driver.
void release_memory_of(const context* ctx);
void add_memory_usage(ferry::sim::usage& totals);

}  // namespace ferry::sim::detail
