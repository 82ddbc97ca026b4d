// ferry::remote::ucx_category(): UCX statuses as error codes, as ferry::cuda_category() does for CUresult.
#include <ucs/type/status.h>

#include <string>
#include <system_error>

#include "ferry/remote.hpp"

namespace ferry::remote {
namespace {

class ucx_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "ucx"; }
  std::string message(int value) const override {
    return ucs_status_string(static_cast<ucs_status_t>(value)) + std::string(" (ucs_status_t ") +
           std::to_string(value) + ")";
  }
};

}  // namespace

const std::error_category& ucx_category() noexcept {
  static const ucx_category_impl instance;
  return instance;
}

std::error_code make_ucx_error_code(int status) noexcept { return {status, ucx_category()}; }

}  // namespace ferry::remote
