#include "ferry/backend.hpp"

#include "engine/driver/driver_table.hpp"

namespace ferry {

backend active_backend() {
  return detail::active_backend() == detail::backend_kind::cuda ? backend::cuda : backend::sim;
}

void select_backend(backend which) {
  detail::select_backend(which == backend::cuda ? detail::backend_kind::cuda : detail::backend_kind::sim);
}

std::string_view to_string(backend which) noexcept { return which == backend::cuda ? "cuda" : "sim"; }

}  // namespace ferry
