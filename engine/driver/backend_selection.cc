// FERRY_BACKEND=cuda|sim, or select_backend: which table driver() returns. Decided once per process.
// The real driver is the default; the sim runs only when chosen, and only where it is linked.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {
namespace {

std::atomic<const driver_table& (*)()> sim_backend{nullptr};

// The reason the chosen backend is unusable, and the status every entry point then answers.
struct unusable {
  CUresult status = CUDA_SUCCESS;
  std::string why;
};
unusable& failure() {
  static unusable instance;
  return instance;
}

// A table whose entry points all fail with failure().status; cuGetErrorName and cuGetErrorString name
// that status and tell why, so that a cuda_error built from it carries the reason.
template <class Function>
struct refuse;
template <class... Args>
struct refuse<CUresult (*)(Args...)> {
  static CUresult call(Args...) noexcept { return failure().status; }
};

CUresult name_of_failure(CUresult status, const char** name) noexcept {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (status != failure().status) {
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (status) {
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

CUresult text_of_failure(CUresult status, const char** text) noexcept {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (status != failure().status) {
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *text = failure().why.c_str();
  return CUDA_SUCCESS;
}

const driver_table& refusing_table(CUresult status, std::string why) {
  failure() = {status, std::move(why)};
  static const driver_table table = [] {
    driver_table t;
#define FERRY_REFUSE_ENTRY(name, version) t.name = &refuse<decltype(&::name)>::call;
    FERRY_DRIVER_ENTRY_POINTS(FERRY_REFUSE_ENTRY)
#undef FERRY_REFUSE_ENTRY
    t.cuGetErrorName = &name_of_failure;
    t.cuGetErrorString = &text_of_failure;
    return t;
  }();
  return table;
}

struct selection {
  const driver_table* table;
  backend_kind kind;
};

std::mutex& choice_mutex() {
  static std::mutex instance;
  return instance;
}
std::optional<backend_kind>& chosen_in_code() {
  static std::optional<backend_kind> instance;
  return instance;
}

selection open_cuda() {
  std::string why_not;
  const driver_table* cuda = cuda_table(&why_not);
  if (cuda == nullptr) {
    return {&refusing_table(CUDA_ERROR_NOT_INITIALIZED,
                            "no usable CUDA driver: " + why_not +
                                " (ferry runs on the real driver; FERRY_BACKEND=sim selects the host simulation, "
                                "for tests)"),
            backend_kind::cuda};
  }
  if (CUresult status = cuda->cuInit(0); status != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuda->cuGetErrorName(status, &name);
    return {&refusing_table(status, std::string("cuInit failed with ") + (name ? name : "an unknown status") +
                                        ": the CUDA driver cannot be used"),
            backend_kind::cuda};
  }
  int count = 0;
  if (cuda->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    return {&refusing_table(CUDA_ERROR_NO_DEVICE, "the CUDA driver reports no device"), backend_kind::cuda};
  }
  return {cuda, backend_kind::cuda};
}

selection open_sim(const std::string& chosen_by) {
  const auto table = sim_backend.load();
  if (table == nullptr) {
    return {&refusing_table(CUDA_ERROR_NOT_INITIALIZED,
                            chosen_by + " chose the sim backend, but this program does not link it "
                                        "(the Bazel target //sim)"),
            backend_kind::sim};
  }
  const driver_table& sim = table();
  sim.cuInit(0);
  return {&sim, backend_kind::sim};
}

selection choose() {
  if (const auto& in_code = chosen_in_code()) {
    return *in_code == backend_kind::sim ? open_sim("select_backend") : open_cuda();
  }
  const char* requested_env = std::getenv("FERRY_BACKEND");
  const std::string requested = requested_env && *requested_env ? requested_env : "cuda";
  if (requested == "cuda") return open_cuda();
  if (requested == "sim") return open_sim("FERRY_BACKEND=sim");
  return {&refusing_table(CUDA_ERROR_INVALID_VALUE,
                          "FERRY_BACKEND=" + requested + " names no backend (expected cuda or sim)"),
          backend_kind::cuda};
}

std::optional<selection>& current() {
  static std::optional<selection> instance;
  return instance;
}

// Chosen once, under the mutex select_backend takes too, so that a choice in code is seen or refused.
const selection& chosen() {
  static const selection& instance = [] () -> const selection& {
    std::lock_guard lock(choice_mutex());
    current() = choose();
    return *current();
  }();
  return instance;
}

}  // namespace

std::string_view to_string(backend_kind kind) noexcept { return kind == backend_kind::cuda ? "cuda" : "sim"; }

const driver_table& driver() { return *chosen().table; }

backend_kind active_backend() { return chosen().kind; }

void select_backend(backend_kind kind) {
  {
    std::lock_guard lock(choice_mutex());
    if (!current()) {
      chosen_in_code() = kind;
      return;
    }
  }
  if (current()->kind != kind) {
    throw std::logic_error("select_backend(" + std::string(to_string(kind)) + "): the " +
                           std::string(to_string(current()->kind)) +
                           " backend is in use already (the backend is chosen once per process, before the first "
                           "driver call)");
  }
}

void register_sim_backend(const driver_table& (*table)()) noexcept { sim_backend.store(table); }

}  // namespace ferry::detail
