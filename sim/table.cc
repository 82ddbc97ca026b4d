// ferry::detail::sim_table(): every entry point of FERRY_DRIVER_ENTRY_POINTS, filled with the sim's
// implementation of the same name and type. Each call first consults fail_call, then (for all but the
// calls the driver answers before cuInit) refuses to run before cuInit. Linking this file registers the
// table with the backend selection: the sim is usable only in programs that link it.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

#include "sim/table.hpp"

#include "engine/driver/driver_table.hpp"
#include "sim/api.hpp"
#include "sim/control.hpp"
#include "sim/faults.hpp"
#include "sim/kernel_twins.hpp"
#include "sim/runtime.hpp"

namespace ferry::sim::detail {
namespace {

// An entry point's unversioned name as a template argument.
template <std::size_t N>
struct entry_name {
  constexpr entry_name(const char (&text)[N]) { std::copy_n(text, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  char chars[N]{};
};

constexpr bool answers_before_init(std::string_view name) {
  return name == "cuInit" || name == "cuDriverGetVersion" || name == "cuGetErrorName" || name == "cuGetErrorString";
}

template <entry_name Name, auto Implementation>
struct guarded;

// Every entry point's call counter, by name (for ferry::sim::call_counts).
std::vector<std::pair<std::string_view, std::atomic<std::size_t>*>>& counters() {
  static auto* const instance = new std::vector<std::pair<std::string_view, std::atomic<std::size_t>*>>();
  return *instance;
}

template <entry_name Name, class... Args, CUresult (*Implementation)(Args...)>
struct guarded<Name, Implementation> {
  static inline std::atomic<std::size_t> calls{0};
  static CUresult call(Args... args) {
    calls.fetch_add(1, std::memory_order_relaxed);
    if (torn_down_at_exit()) {
      // The real driver answers CUDA_ERROR_DEINITIALIZED here (or crashes): say so, once per entry point,
      // so that tests of shutdown can see it.
      static std::atomic<bool> reported{false};
      if (!reported.exchange(true)) {
        std::fprintf(stderr, "ferry sim: %s called after the driver was torn down at exit\n", Name.chars);
      }
      return CUDA_ERROR_DEINITIALIZED;
    }
    if (std::optional<CUresult> injected = injected_failure(Name.view())) return *injected;
    if constexpr (!answers_before_init(Name.view())) {
      if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    }
    return Implementation(args...);
  }
};

ferry::detail::driver_table make_table() {
  ferry::detail::driver_table table;
#define FERRY_SIM_FILL_ENTRY(name, version)                    \
  table.name = &guarded<#name, &ferry::sim::api::name>::call; \
  counters().emplace_back(#name, &guarded<#name, &ferry::sim::api::name>::calls);
  FERRY_DRIVER_ENTRY_POINTS(FERRY_SIM_FILL_ENTRY)
#undef FERRY_SIM_FILL_ENTRY
  return table;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::detail {

const driver_table& sim_table() {
  static const driver_table table = [] {
    ferry::sim::detail::register_kernel_twins();  // the library's kernels run as their host forms
    return ferry::sim::detail::make_table();
  }();
  return table;
}

namespace {

// At static initialization (the library is always linked whole: BUILD's alwayslink).
[[maybe_unused]] const bool registered = (register_sim_backend(&sim_table), true);

}  // namespace

}  // namespace ferry::detail

namespace ferry::sim {

std::map<std::string, std::size_t> call_counts() {
  ferry::detail::sim_table();  // the counters are registered with the table
  std::map<std::string, std::size_t> counts;
  for (const auto& [name, count] : detail::counters()) counts[std::string(name)] = count->load();
  return counts;
}

}  // namespace ferry::sim
