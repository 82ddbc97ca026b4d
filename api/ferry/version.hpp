// The version of ferry. tools/ferry install reads these three numbers for the CMake package and the
// pkg-config file, and the benchmarks write ferry::version() into every results file, so this header
// is the one place the version is stated. CHANGELOG.md lists what each version changed for users.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <string_view>

#define FERRY_VERSION_MAJOR 0
#define FERRY_VERSION_MINOR 1
#define FERRY_VERSION_PATCH 0

namespace ferry {

namespace detail {
#define FERRY_DETAIL_STRINGIZE(x) #x
#define FERRY_DETAIL_VERSION_TEXT(major, minor, patch) \
  FERRY_DETAIL_STRINGIZE(major) "." FERRY_DETAIL_STRINGIZE(minor) "." FERRY_DETAIL_STRINGIZE(patch)
inline constexpr std::string_view version_text =
    FERRY_DETAIL_VERSION_TEXT(FERRY_VERSION_MAJOR, FERRY_VERSION_MINOR, FERRY_VERSION_PATCH);
#undef FERRY_DETAIL_VERSION_TEXT
#undef FERRY_DETAIL_STRINGIZE
}  // namespace detail

// "MAJOR.MINOR.PATCH" of the headers in use. Until 1.0, a change of MINOR may break source compatibility
// (CHANGELOG.md says how); PATCH changes never do.
constexpr std::string_view version() noexcept { return detail::version_text; }

}  // namespace ferry
