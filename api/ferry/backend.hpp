// Which driver backend this process runs on (FERRY_BACKEND=cuda|sim|auto), for tools and tests.
#pragma once

#include <string_view>

namespace ferry {

enum class backend { cuda, sim };

// Chooses the backend on first use (auto: cuda when a device is present, else sim).
backend active_backend();
std::string_view to_string(backend which) noexcept;

}  // namespace ferry
