#include "sim/memory_registry.hpp"

#include <atomic>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "sim/address_space.hpp"
#include "sim/contexts.hpp"
#include "sim/faults.hpp"
#include "sim/runtime.hpp"

namespace ferry::sim::detail {
namespace {

constexpr std::size_t page = 4096;

using range_map = std::map<std::uintptr_t, std::shared_ptr<allocation>>;

struct registry {
  std::mutex mutex;
  range_map device;  // by device address, inside the address space
  range_map host;    // managed, pinned and registered: disjoint host ranges
  std::vector<std::size_t> device_bytes;
  ferry::sim::usage counts;
};

// Leaked: stream workers may still resolve ranges while static destructors run at exit.
registry& state() {
  static registry* const instance = new registry();
  return *instance;
}

std::atomic<std::uint64_t> next_id{1};

std::byte* new_bytes(std::size_t bytes, std::size_t alignment) {
  return static_cast<std::byte*>(::operator new(bytes, std::align_val_t{alignment}, std::nothrow));
}

std::size_t to_pages(std::size_t bytes) { return (bytes + page - 1) / page * page; }

std::shared_ptr<allocation> containing(const range_map& ranges, std::uintptr_t address) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return nullptr;
  --it;
  return address - it->first < it->second->size ? it->second : nullptr;
}

// Caller holds the registry lock.
void account(registry& r, const allocation& a, bool added) {
  auto step = [added](std::size_t& counter, std::size_t amount) {
    counter = added ? counter + amount : counter - amount;
  };
  switch (a.kind) {
    case memory_kind::device:
      step(r.counts.device_allocations, 1);
      step(r.counts.device_bytes, a.size);
      step(r.device_bytes.at(static_cast<std::size_t>(a.owner->device())), a.size);
      break;
    case memory_kind::managed: step(r.counts.managed_allocations, 1); break;
    case memory_kind::pinned:
      step(r.counts.pinned_allocations, 1);
      step(r.counts.pinned_bytes, a.size);
      break;
    case memory_kind::registered: step(r.counts.registered_ranges, 1); break;
  }
}

// Caller holds the registry lock.
void per_device_totals(registry& r) {
  if (r.device_bytes.size() < static_cast<std::size_t>(device_count())) {
    r.device_bytes.resize(static_cast<std::size_t>(device_count()), 0);
  }
}

// Managed and pinned memory: page-aligned host memory of ours.
CUresult allocate_host_range(context& ctx, memory_kind kind, std::size_t bytes, unsigned flags,
                             std::uintptr_t& out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!charge_allocation(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  std::byte* host = new_bytes(to_pages(bytes), page);
  if (host == nullptr) {
    refund_allocation(bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto a = std::make_shared<allocation>(kind, reinterpret_cast<std::uintptr_t>(host), bytes, host, page,
                                        &ctx, flags);
  registry& r = state();
  std::lock_guard lock(r.mutex);
  per_device_totals(r);
  r.host.emplace(a->address, a);
  account(r, *a, true);
  out = a->address;
  return CUDA_SUCCESS;
}

// Removes the host range starting exactly at `base` if it is of `kind`; the bytes go when the last
// stream operation holding the allocation has run.
CUresult erase_host_range(void* base, memory_kind kind, CUresult not_found) {
  std::shared_ptr<allocation> released;
  registry& r = state();
  std::lock_guard lock(r.mutex);
  auto it = r.host.find(reinterpret_cast<std::uintptr_t>(base));
  if (base == nullptr || it == r.host.end() || it->second->kind != kind) return not_found;
  released = std::move(it->second);
  r.host.erase(it);
  account(r, *released, false);
  return CUDA_SUCCESS;
}

}  // namespace

allocation::allocation(memory_kind kind, std::uintptr_t address, std::size_t size, std::byte* host,
                       std::size_t host_alignment, context* owner, unsigned flags)
    : kind(kind),
      address(address),
      size(size),
      host(host),
      host_alignment(host_alignment),
      owner(owner),
      flags(flags),
      id(next_id.fetch_add(1, std::memory_order_relaxed)) {}

allocation::~allocation() {
  if (host_alignment != 0) ::operator delete(host, std::align_val_t{host_alignment});
}

bool allocation::device_accessible() const noexcept {
  switch (kind) {
    case memory_kind::device:
    case memory_kind::managed: return true;
    case memory_kind::pinned: return (flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0;
    case memory_kind::registered: return (flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0;
  }
  return false;
}

CUresult allocate_device(context& ctx, std::size_t bytes, CUdeviceptr* out) {
  if (out == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  registry& r = state();
  std::lock_guard lock(r.mutex);
  per_device_totals(r);
  const std::size_t used = r.device_bytes.at(static_cast<std::size_t>(ctx.device()));
  if (bytes > ferry::sim::default_device_memory - used) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!charge_allocation(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  address_space& space = address_space::instance();
  std::optional<std::uintptr_t> address = space.take(bytes);
  std::byte* host = address ? new_bytes(bytes, address_space::alignment) : nullptr;
  if (host == nullptr) {
    if (address) space.give_back(*address, bytes);
    refund_allocation(bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto a = std::make_shared<allocation>(memory_kind::device, *address, bytes, host, address_space::alignment,
                                        &ctx, 0u);
  r.device.emplace(*address, a);
  account(r, *a, true);
  *out = *address;
  return CUDA_SUCCESS;
}

CUresult allocate_managed(context& ctx, std::size_t bytes, unsigned flags, CUdeviceptr* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t address = 0;
  if (CUresult status = allocate_host_range(ctx, memory_kind::managed, bytes, flags, address);
      status != CUDA_SUCCESS) {
    return status;
  }
  *out = address;
  return CUDA_SUCCESS;
}

CUresult allocate_pinned(context& ctx, std::size_t bytes, unsigned flags, void** out) {
  constexpr unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (out == nullptr || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t address = 0;
  if (CUresult status = allocate_host_range(ctx, memory_kind::pinned, bytes, flags, address);
      status != CUDA_SUCCESS) {
    return status;
  }
  *out = reinterpret_cast<void*>(address);
  return CUDA_SUCCESS;
}

CUresult register_host(context& ctx, void* base, std::size_t bytes, unsigned flags) {
  constexpr unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  const auto start = reinterpret_cast<std::uintptr_t>(base);
  if (base == nullptr || bytes == 0 || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (start + bytes < start) return CUDA_ERROR_INVALID_VALUE;
  address_space& space = address_space::instance();
  if (space.contains(start) || space.contains(start + bytes - 1)) return CUDA_ERROR_INVALID_VALUE;
  registry& r = state();
  std::lock_guard lock(r.mutex);
  per_device_totals(r);
  // Host ranges are disjoint, so only the last one starting before our end can overlap us.
  auto after = r.host.lower_bound(start + bytes);
  if (after != r.host.begin() && std::prev(after)->second->address + std::prev(after)->second->size > start) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  if (!charge_allocation(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto a = std::make_shared<allocation>(memory_kind::registered, start, bytes, static_cast<std::byte*>(base), 0,
                                        &ctx, flags);
  r.host.emplace(start, a);
  account(r, *a, true);
  return CUDA_SUCCESS;
}

CUresult free_device(CUdeviceptr base) {
  if (!address_space::instance().contains(base)) {
    return erase_host_range(reinterpret_cast<void*>(base), memory_kind::managed, CUDA_ERROR_INVALID_VALUE);
  }
  std::shared_ptr<allocation> released;
  registry& r = state();
  std::lock_guard lock(r.mutex);
  auto it = r.device.find(base);
  if (it == r.device.end()) return CUDA_ERROR_INVALID_VALUE;
  released = std::move(it->second);
  r.device.erase(it);
  account(r, *released, false);
  address_space::instance().give_back(released->address, released->size);
  return CUDA_SUCCESS;
}

CUresult free_pinned(void* base) {
  return erase_host_range(base, memory_kind::pinned, CUDA_ERROR_INVALID_VALUE);
}

CUresult unregister_host(void* base) {
  if (base == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return erase_host_range(base, memory_kind::registered, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

allocation_ref find_allocation(std::uintptr_t address) {
  registry& r = state();
  std::lock_guard lock(r.mutex);
  if (address_space::instance().contains(address)) return containing(r.device, address);
  return containing(r.host, address);
}

CUresult resolve_device(std::uintptr_t address, std::size_t bytes, resolved& out, bool managed_allowed) {
  allocation_ref a = find_allocation(address);
  if (a == nullptr || !a->contains(address, bytes) || !a->device_accessible()) return CUDA_ERROR_INVALID_VALUE;
  if (!managed_allowed && a->kind == memory_kind::managed) return CUDA_ERROR_INVALID_VALUE;
  out.host = a->host + (address - a->address);
  out.keep = std::move(a);
  return CUDA_SUCCESS;
}

CUresult resolve_for_kernel(std::uintptr_t address, std::size_t bytes, resolved& out) {
  allocation_ref a = find_allocation(address);
  if (a == nullptr || !a->contains(address, bytes)) return CUDA_ERROR_INVALID_VALUE;
  out.host = a->host + (address - a->address);
  out.keep = std::move(a);
  return CUDA_SUCCESS;
}

CUresult resolve_host(const void* pointer, std::size_t bytes, resolved& out) {
  const auto start = reinterpret_cast<std::uintptr_t>(pointer);
  if (pointer == nullptr || start + bytes < start) return CUDA_ERROR_INVALID_VALUE;
  address_space& space = address_space::instance();
  if (space.contains(start) || (bytes != 0 && space.contains(start + bytes - 1))) return CUDA_ERROR_INVALID_VALUE;
  out.host = static_cast<std::byte*>(const_cast<void*>(pointer));
  allocation_ref a = find_allocation(start);
  if (a != nullptr && a->contains(start, bytes)) out.keep = std::move(a);
  return CUDA_SUCCESS;
}

CUresult resolve_unified(std::uintptr_t address, std::size_t bytes, resolved& out) {
  if (address_space::instance().contains(address)) return resolve_device(address, bytes, out);
  return resolve_host(reinterpret_cast<const void*>(address), bytes, out);
}

std::size_t device_bytes_in_use(CUdevice device) {
  registry& r = state();
  std::lock_guard lock(r.mutex);
  per_device_totals(r);
  return r.device_bytes.at(static_cast<std::size_t>(device));
}

void release_memory_of(const context* ctx) {
  std::vector<std::shared_ptr<allocation>> released;
  registry& r = state();
  std::lock_guard lock(r.mutex);
  for (range_map* ranges : {&r.device, &r.host}) {
    for (auto it = ranges->begin(); it != ranges->end();) {
      if (it->second->owner != ctx) {
        ++it;
        continue;
      }
      account(r, *it->second, false);
      if (it->second->kind == memory_kind::device) {
        address_space::instance().give_back(it->second->address, it->second->size);
      }
      released.push_back(std::move(it->second));
      it = ranges->erase(it);
    }
  }
}

void add_memory_usage(ferry::sim::usage& totals) {
  registry& r = state();
  std::lock_guard lock(r.mutex);
  totals.device_allocations += r.counts.device_allocations;
  totals.device_bytes += r.counts.device_bytes;
  totals.pinned_allocations += r.counts.pinned_allocations;
  totals.pinned_bytes += r.counts.pinned_bytes;
  totals.managed_allocations += r.counts.managed_allocations;
  totals.registered_ranges += r.counts.registered_ranges;
}

}  // namespace ferry::sim::detail
