// Byte-level allocation and pointer queries behind marshal.hpp and buffers.hpp. Implemented in
// engine/memory. `operation` names the public function for error messages.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "ferry/flags.hpp"

namespace ferry::detail {

void* malloc_host(std::string_view operation, std::size_t count, std::size_t element_size, alloc_flags flags);
void free_host(std::string_view operation, void* pointer);
void free_host_nothrow(void* pointer) noexcept;

void* register_host(std::string_view operation, void* pointer, std::size_t count, std::size_t element_size,
                    register_flags flags);
void unregister_host(std::string_view operation, void* pointer);
void unregister_host_nothrow(void* pointer) noexcept;

CUdeviceptr malloc_device(std::string_view operation, std::size_t count, std::size_t element_size);
CUdeviceptr malloc_managed(std::string_view operation, std::size_t count, std::size_t element_size,
                           attach_flag flag);
void free_device(std::string_view operation, CUdeviceptr pointer);
void free_device_nothrow(CUdeviceptr pointer) noexcept;

CUdeviceptr mapped_device_pointer(std::string_view operation, alloc_flags flags, const void* host);
// The allocation holding `pointer`: its base and size in bytes.
std::pair<CUdeviceptr, std::size_t> allocation_of(std::string_view operation, CUdeviceptr pointer);

}  // namespace ferry::detail
