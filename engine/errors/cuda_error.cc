#include "ferry/error.hpp"

#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"

namespace ferry {
namespace {

// "CUDA_ERROR_INVALID_VALUE (invalid argument)": the driver's own name and text.
std::string describe(CUresult status) {
  const char* name = nullptr;
  const char* text = nullptr;
  const auto& driver = detail::driver();
  driver.cuGetErrorName(status, &name);
  driver.cuGetErrorString(status, &text);
  std::string result = name ? name : "CUresult " + std::to_string(static_cast<int>(status));
  if (text) result += std::string(" (") + text + ")";
  return result;
}

std::string message_of(std::string_view call, std::string_view object, std::string_view outcome,
                       const std::source_location& where) {
  std::string message(call);
  message += " failed with ";
  message += outcome;
  if (!object.empty()) {
    message += " for ";
    message += object;
  }
  message += " [";
  message += where.file_name();
  message += ":" + std::to_string(where.line()) + "]";
  return message;
}

class cuda_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda"; }
  std::string message(int value) const override { return describe(static_cast<CUresult>(value)); }
};

}  // namespace

const std::error_category& cuda_category() noexcept {
  static const cuda_category_impl instance;
  return instance;
}

std::error_code make_error_code(CUresult status) noexcept {
  return {static_cast<int>(status), cuda_category()};
}

bool is_sticky(CUresult status) noexcept {
  switch (status) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return true;
    default:
      return false;
  }
}

cuda_error::cuda_error(CUresult status, std::string_view call, std::string_view object, std::source_location where)
    : std::runtime_error(message_of(call, object, describe(status), where)),
      status_(status),
      call_(call),
      object_(object),
      where_(where) {}

out_of_memory::out_of_memory(std::string_view call, std::string_view object, std::source_location where)
    : message_(message_of(call, object, describe(CUDA_ERROR_OUT_OF_MEMORY), where)) {}

namespace detail {

void throw_cuda_error(CUresult status, std::string_view call, std::string_view object, std::source_location where) {
  if (status == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(call, object, where);
  if (is_sticky(status)) throw sticky_cuda_error(status, call, object, where);
  throw cuda_error(status, call, object, where);
}

}  // namespace detail
}  // namespace ferry

namespace ferry::detail {

std::string status_name(CUresult status) {
  const char* name = nullptr;
  driver().cuGetErrorName(status, &name);
  return name ? name : std::to_string(static_cast<int>(status));
}

}  // namespace ferry::detail
