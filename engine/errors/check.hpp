// The throwing form of a driver call (check), and the helpers that build invalid_argument messages.
// The non-throwing form is the driver table's own call, whose CUresult destructors may ignore.
// For engine code only (users see the errors of api/ferry/error.hpp).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>

namespace ferry::detail {

// Throws the error family `status` belongs to (out_of_memory, sticky_cuda_error, cuda_error).
[[noreturn]] void throw_cuda_error(CUresult status, std::string_view call, std::string_view object,
                                   std::source_location where);

inline void check(CUresult status, std::string_view call, std::string_view object = {},
                  std::source_location where = std::source_location::current()) {
  if (status != CUDA_SUCCESS) throw_cuda_error(status, call, object, where);
}

// The driver's name of `status` ("CUDA_ERROR_ILLEGAL_ADDRESS"), or its number where the driver has none:
// what on_failure messages name a status by.
std::string status_name(CUresult status);

// "0x7f12a0000000"
std::string hex(std::uintptr_t address);
inline std::string hex(const void* address) { return hex(reinterpret_cast<std::uintptr_t>(address)); }

// Throws std::invalid_argument("<operation>: <what>").
[[noreturn]] void throw_invalid_argument(std::string_view operation, const std::string& what);

// count * element_size, or invalid_argument naming the argument when the product overflows size_t.
std::size_t byte_size(std::string_view operation, std::string_view argument, std::size_t count,
                      std::size_t element_size);

}  // namespace ferry::detail
