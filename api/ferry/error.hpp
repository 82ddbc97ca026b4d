// ferry's three error families (never mixed): std::invalid_argument for bad input, checked at the API
// boundary before anything is enqueued; ferry::out_of_memory (a std::bad_alloc) when an allocation
// fails; ferry::cuda_error (with the sticky subtype) for any other driver failure. Async operations
// report driver statuses as std::error_code values of ferry::cuda_category().
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <new>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace ferry {

// The category of CUresult values: name() is "cuda", message() is the driver's name and text
// ("CUDA_ERROR_INVALID_VALUE: invalid argument").
const std::error_category& cuda_category() noexcept;

std::error_code make_error_code(CUresult status) noexcept;

// True for the statuses after which the driver refuses all further work in the context
// (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, ...).
bool is_sticky(CUresult status) noexcept;

// A failed driver call: the status, its name and text, the call, the object involved and the caller's
// source location, all in what().
class cuda_error : public std::runtime_error {
 public:
  cuda_error(CUresult status, std::string_view call, std::string_view object,
             std::source_location where = std::source_location::current());

  CUresult status() const noexcept { return status_; }
  std::error_code code() const noexcept { return make_error_code(status_); }
  const std::string& call() const noexcept { return call_; }
  const std::string& object() const noexcept { return object_; }
  const std::source_location& where() const noexcept { return where_; }

 private:
  CUresult status_;
  std::string call_;
  std::string object_;
  std::source_location where_;
};

// The context is dead (the status is sticky): every later operation in it fails the same way.
class sticky_cuda_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
};

// An allocation the driver refused for lack of memory (CUDA_ERROR_OUT_OF_MEMORY).
class out_of_memory : public std::bad_alloc {
 public:
  out_of_memory(std::string_view call, std::string_view object,
                std::source_location where = std::source_location::current());
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace ferry
