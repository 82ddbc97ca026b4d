// The cuda backend: libcuda.so.1 (or $FERRY_CUDA_LIBRARY) is opened at run time and every entry point is
// resolved through cuGetProcAddress, so ferry binaries start on machines without a driver and say why
// when the first driver call is made (backend_selection.cc).
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdlib>

#include <string>
#include <type_traits>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {
namespace {

// The version each entry point is resolved at must give the ABI the table declares.
#define FERRY_CHECK_ABI(name, version)                                          \
  static_assert(std::is_same_v<decltype(&::name), PFN_##name##_v##version>,     \
                #name ": its version in entry_points.hpp does not match cuda.h");
FERRY_DRIVER_ENTRY_POINTS(FERRY_CHECK_ABI)
#undef FERRY_CHECK_ABI

using get_proc_address_fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult*);

// Fills `table` or says which step failed. The library handle is never closed: the table lives for the
// whole process, and unloading the driver at exit would race with other static destructors.
bool load(driver_table& table, std::string& why_not) {
  const char* named = std::getenv("FERRY_CUDA_LIBRARY");
  const std::string library_name = named && *named ? named : "libcuda.so.1";
  void* library = ::dlopen(library_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    why_not = "cannot load " + library_name + ": " + (error ? error : "unknown dlopen error");
    return false;
  }
  auto get_proc_address =
      reinterpret_cast<get_proc_address_fn>(::dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc_address == nullptr) {
    why_not = library_name + " has no cuGetProcAddress_v2 (the driver is older than CUDA 12.0)";
    return false;
  }
  bool complete = true;
  auto resolve = [&](const char* symbol, int version, void** slot) {
    CUdriverProcAddressQueryResult found{};
    CUresult status = get_proc_address(symbol, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (status != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || *slot == nullptr) {
      if (complete) {
        why_not = std::string("the driver lacks ") + symbol + " (as of CUDA " + std::to_string(version / 1000) +
                  "." + std::to_string(version % 1000 / 10) + "): update the NVIDIA driver";
      }
      complete = false;
    }
  };
#define FERRY_RESOLVE_ENTRY(name, version) resolve(#name, version, reinterpret_cast<void**>(&table.name));
  FERRY_DRIVER_ENTRY_POINTS(FERRY_RESOLVE_ENTRY)
#undef FERRY_RESOLVE_ENTRY
  return complete;
}

}  // namespace

const driver_table* cuda_table(std::string* why_not) {
  struct loaded {
    driver_table table;
    std::string why_not;
    bool ok = false;
  };
  static const loaded instance = [] {
    loaded result;
    result.ok = load(result.table, result.why_not);
    return result;
  }();
  if (!instance.ok && why_not != nullptr) *why_not = instance.why_not;
  return instance.ok ? &instance.table : nullptr;
}

}  // namespace ferry::detail
