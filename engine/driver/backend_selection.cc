// FERRY_BACKEND=cuda|sim|auto: which table driver() returns. Decided once per process.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {
namespace {

struct selection {
  const driver_table* table;
  backend_kind kind;
};

// cuInit plus at least one device: what "a device is present" means for auto.
bool usable(const driver_table& table, std::string& why_not) {
  if (CUresult status = table.cuInit(0); status != CUDA_SUCCESS) {
    const char* name = nullptr;
    table.cuGetErrorName(status, &name);
    why_not = std::string("cuInit failed with ") + (name ? name : "an unknown status");
    return false;
  }
  int count = 0;
  if (table.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    why_not = "the driver reports no CUDA device";
    return false;
  }
  return true;
}

selection choose() {
  const char* requested_env = std::getenv("FERRY_BACKEND");
  std::string requested = requested_env && *requested_env ? requested_env : "auto";
  if (requested != "cuda" && requested != "sim" && requested != "auto") {
    throw std::runtime_error("FERRY_BACKEND=" + requested + " names no backend (expected cuda, sim or auto)");
  }
  if (requested != "sim") {
    std::string why_not;
    const driver_table* cuda = cuda_table(&why_not);
    if (cuda != nullptr && usable(*cuda, why_not)) return {cuda, backend_kind::cuda};
    if (requested == "cuda") throw std::runtime_error("FERRY_BACKEND=cuda, but " + why_not);
  }
  const driver_table& sim = sim_table();
  sim.cuInit(0);
  return {&sim, backend_kind::sim};
}

const selection& chosen() {
  static const selection instance = choose();
  return instance;
}

}  // namespace

std::string_view to_string(backend_kind kind) noexcept {
  return kind == backend_kind::cuda ? "cuda" : "sim";
}

const driver_table& driver() { return *chosen().table; }

backend_kind active_backend() { return chosen().kind; }

}  // namespace ferry::detail
