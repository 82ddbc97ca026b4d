// Device addresses as pointers into global memory, for the kernels (device code only).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::detail::kernels {

// Device addresses arrive as integers (the parameter structs are shared with the host). Converting
// through the global-to-generic intrinsic tells the compiler that they are global memory, so it emits
// ld.global / st.global rather than generic accesses that must first find the window of the address.
template <class T>
__device__ __forceinline__ T* global(std::uint64_t address) {
  return static_cast<T*>(__cvta_global_to_generic(static_cast<std::size_t>(address)));
}

}  // namespace ferry::detail::kernels
