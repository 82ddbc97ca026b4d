// Named flag types (never bare bools or unsigned): host allocation, host registration and managed
// attachment. Each combines with | and is tested with has().
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <string>
#include <type_traits>

namespace ferry {

// The seed's AllocFlag: options of malloc_host_array.
enum class alloc_flags : unsigned {
  none = 0,
  portable = CU_MEMHOSTALLOC_PORTABLE,          // pinned for every context, not only the current one
  device_mapped = CU_MEMHOSTALLOC_DEVICEMAP,    // mapped into the device's address space (get_device_ptr)
  write_combined = CU_MEMHOSTALLOC_WRITECOMBINED,  // fast for the device to read, slow for the host to read
};

// Options of register_array (cuMemHostRegister).
enum class register_flags : unsigned {
  none = 0,
  portable = CU_MEMHOSTREGISTER_PORTABLE,
  device_map = CU_MEMHOSTREGISTER_DEVICEMAP,
  io_memory = CU_MEMHOSTREGISTER_IOMEMORY,
  read_only = CU_MEMHOSTREGISTER_READ_ONLY,
};

// The seed's AttachFlag: how managed memory is attached (malloc_managed_array, attach_array_async).
enum class attach_flag : unsigned {
  global = CU_MEM_ATTACH_GLOBAL,  // any stream of any device may access it
  host = CU_MEM_ATTACH_HOST,      // only the host, until attached elsewhere
  single = CU_MEM_ATTACH_SINGLE,  // only the stream it is attached to (attach_array_async only)
};

template <class E>
concept flag_set = std::is_same_v<E, alloc_flags> || std::is_same_v<E, register_flags>;

template <flag_set E>
constexpr E operator|(E a, E b) noexcept {
  return static_cast<E>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

template <flag_set E>
constexpr bool has(E set, E flag) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) == static_cast<unsigned>(flag);
}

template <flag_set E>
constexpr unsigned to_driver(E set) noexcept { return static_cast<unsigned>(set); }
constexpr unsigned to_driver(attach_flag flag) noexcept { return static_cast<unsigned>(flag); }

// "device_mapped|write_combined", "none"; unknown bits as a hexadecimal rest.
std::string to_string(alloc_flags flags);
std::string to_string(register_flags flags);
std::string to_string(attach_flag flag);

}  // namespace ferry
