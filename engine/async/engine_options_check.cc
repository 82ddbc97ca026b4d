#include "engine/async/engine_options_check.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "engine/errors/check.hpp"

namespace ferry::detail {

namespace {

// The most slots engine_options::small_staging_slots may ask for.
constexpr std::size_t max_small_staging_slots = 65536;

void check_device(const engine_options& options, const driver_table& driver) {
  int count = 0;
  check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (options.device < 0 || options.device >= count) {
    throw_invalid_argument("engine", "device " + std::to_string(options.device) + " is not in [0, " +
                                         std::to_string(count) + ")");
  }
}

void check_pool_streams(const engine_options& options) {
  if (options.pool_streams == 0) throw_invalid_argument("engine", "pool_streams is 0; the engine needs at least one");
  if (options.pool_streams > pool_streams_limit) {
    throw_invalid_argument("engine", "pool_streams " + std::to_string(options.pool_streams) + " is more than " +
                                         std::to_string(pool_streams_limit));
  }
}

void check_staging(const engine_options& options) {
  if (options.staging_chunk_bytes == 0 || options.staging_chunks == 0) {
    throw_invalid_argument("engine", "staging_chunk_bytes and staging_chunks must be positive");
  }
  if (options.small_staging_slots > max_small_staging_slots) {
    throw_invalid_argument("engine", "small_staging_slots " + std::to_string(options.small_staging_slots) +
                                         " is more than " + std::to_string(max_small_staging_slots));
  }
  if (options.small_staging_slots != 0 &&
      options.small_staged_max_bytes > std::numeric_limits<std::size_t>::max() / options.small_staging_slots) {
    throw_invalid_argument("engine", std::to_string(options.small_staging_slots) + " small_staging_slots of " +
                                         "small_staged_max_bytes " + std::to_string(options.small_staged_max_bytes) +
                                         " bytes are more bytes than a size_t counts");
  }
}

void check_spin_windows(const engine_options& options, unsigned cores) {
  const spin_windows spins = resolved_spin_windows(options, cores);
  if (spins.most < spins.least) {
    throw_invalid_argument("engine", "max_spin_window " + std::to_string(spins.most.count()) +
                                         " us is less than spin_window " + std::to_string(spins.least.count()) +
                                         " us");
  }
}

void check_batching(const engine_options& options, const driver_table& driver, CUdevice device) {
  const batch_path path = options.batching;
  if (path != batch_path::automatic && path != batch_path::copy_engine && path != batch_path::kernel) {
    throw_invalid_argument("engine", "batching " + std::to_string(static_cast<int>(path)) + " is not a batch_path");
  }
  if (options.batch_window.count() > 0 && options.batch_most_copies == 0) {
    throw_invalid_argument("engine", "batch_most_copies is 0 with a batch_window of " +
                                         std::to_string(options.batch_window.count()) +
                                         " us; a batch holds at least one copy (a zero window turns batching off)");
  }
  if (options.batch_most_copies > batch_most_copies_limit) {
    throw_invalid_argument("engine", "batch_most_copies is " + std::to_string(options.batch_most_copies) +
                                         "; a batch holds at most " + std::to_string(batch_most_copies_limit) +
                                         " copies (the engine keeps room for a full batch)");
  }
  if (path == batch_path::kernel && !kernel_reaches_host_memory(driver, device)) {
    throw_invalid_argument("engine", "batching is kernel, but device " + std::to_string(options.device) +
                                         " cannot reach page-locked host memory at its host address (no unified "
                                         "addressing, or CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0): choose "
                                         "automatic or copy_engine");
  }
}

void check_marks(const engine_options& options) {
  if (options.marks != completion_mark::by_submitter && options.marks != completion_mark::by_poller) {
    throw_invalid_argument("engine", "marks " + std::to_string(static_cast<int>(options.marks)) +
                                         " is not a completion_mark");
  }
}

void check_resident(const engine_options& options, const driver_table& driver, CUdevice device) {
  if (!options.resident_copies) return;
  // A wait's deadline is now + resident_idle_stop in nanoseconds: far larger values would overflow it.
  if (options.resident_idle_stop.count() <= 0 || options.resident_idle_stop > resident_idle_stop_limit) {
    throw_invalid_argument("engine", "resident_idle_stop is " + std::to_string(options.resident_idle_stop.count()) +
                                         " us; the resident copier stops after an idle time of more than zero and "
                                         "at most " + std::to_string(resident_idle_stop_limit.count()) + " us");
  }
  if (options.policy != completion_policy::poll) {
    throw_invalid_argument("engine", "resident_copies needs completion_policy::poll (the kernel writes each copy's "
                                     "completion flag, which only the poll policy reads); policy is " +
                                         std::to_string(static_cast<int>(options.policy)));
  }
  if (!kernel_reaches_host_memory(driver, device)) {
    throw_invalid_argument("engine", "resident_copies is on, but device " + std::to_string(options.device) +
                                         " cannot reach page-locked host memory at its host address (no unified "
                                         "addressing, or CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0)");
  }
}

}  // namespace

bool kernel_reaches_host_memory(const driver_table& driver, CUdevice device) {
  int unified = 0;
  int registered = 0;
  return driver.cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device) == CUDA_SUCCESS &&
         driver.cuDeviceGetAttribute(&registered, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
                                     device) == CUDA_SUCCESS &&
         unified == 1 && registered == 1;
}

// The poller spins longer after activity where cores are to spare; its growth is bounded by spin_window
// from below.
spin_windows resolved_spin_windows(const engine_options& options, unsigned cores) {
  const std::chrono::microseconds least =
      options.spin_window ? *options.spin_window
                          : cores >= 4 ? std::chrono::microseconds(1000) : std::chrono::microseconds(200);
  const std::chrono::microseconds most =
      options.max_spin_window ? *options.max_spin_window
                              : cores >= 4 ? std::max(least, std::chrono::microseconds(5000)) : least;
  return {least, most};
}

CUdevice check_engine_options(const engine_options& options, unsigned cores, const driver_table& driver) {
  check_device(options, driver);
  check_pool_streams(options);
  check_staging(options);
  check_spin_windows(options, cores);
  CUdevice device = 0;
  check(driver.cuDeviceGet(&device, options.device), "cuDeviceGet");
  check_batching(options, driver, device);
  check_marks(options);
  check_resident(options, driver, device);
  return device;
}

}  // namespace ferry::detail
