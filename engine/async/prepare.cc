// The argument checks of each engine operation (std::invalid_argument before anything is enqueued),
// made in the engine's context, and what each operation will ask of the driver.
#include "engine/async/engine_core_impl.hpp"

#include <array>
#include <cstring>
#include <string>

#include "engine/errors/check.hpp"
#include "ferry/error.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "ferry/detail/stage_trace.hpp"

namespace ferry::detail {

std::string prepared_transfer::label() const {
  if (source.address == 0) return std::string(operation) + ": " + extra;  // fill, prefetch: one side
  return std::string(operation) + ": " + std::to_string(bytes) + " bytes [" + hex(source.address) + " -> " +
         hex(destination.address) + ")" + extra;
}

prepared_transfer engine_core::prepare_copy(std::string_view operation, std::size_t count, std::size_t element_size,
                                            endpoint source, endpoint destination) {
  stage_trace::mark(stage_trace::stage::prepare_begins);
  caller_context in_engine(impl_->driver, impl_->context);
  const plan_1d plan = plan_copy_1d(operation, count, element_size, source, destination);
  // A pageable side may be staged: the engine's threads then read or write it on the host, which
  // device memory passed as a host span would not survive (the fuzzer met it as a crash).
  for (const endpoint* side : {&source, &destination}) {
    if (side->kind == memory_kind::pageable_host && plan.bytes > 0 && is_device_only_memory(side->address)) {
      throw_invalid_argument(operation, std::string(side->argument) + " " + hex(side->address) +
                                            " is device memory, not host memory (pass it as a device_ptr)");
    }
  }
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = plan.bytes;
  transfer.source = source;
  transfer.destination = destination;
  transfer.pageable = source.kind == memory_kind::pageable_host || destination.kind == memory_kind::pageable_host;
  transfer.batchable = true;
  // The direct form; a pageable transfer uses it once its memory is page-locked (registered).
  transfer.enqueue = [plan](const prepared_transfer& self, CUstream stream) {
    const char* call = nullptr;
    return enqueue_copy_1d(plan, self.source, self.destination, stream, call);
  };
  stage_trace::mark(stage_trace::stage::prepare_ends);
  return transfer;
}

void engine_core::check_device_range(std::string_view operation, std::size_t count, std::size_t element_size,
                                     endpoint side) {
  caller_context in_engine(impl_->driver, impl_->context);
  detail::check_device_range(operation, count, element_size, side);
}

prepared_transfer engine_core::prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                               std::size_t element_size, endpoint source, plane source_plane,
                                               endpoint destination, plane destination_plane) {
  caller_context in_engine(impl_->driver, impl_->context);
  const CUDA_MEMCPY2D copy =
      plan_copy_2d(operation, width, height, element_size, source, source_plane, destination, destination_plane);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = copy.WidthInBytes * copy.Height;
  transfer.source = source;
  transfer.destination = destination;
  transfer.extra = " (" + std::to_string(width) + " x " + std::to_string(height) + " elements)";
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, copy](const prepared_transfer&, CUstream stream) {
    return driver.cuMemcpy2DAsync(&copy, stream);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                                 CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                                 CUcontext destination_context) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes =
      plan_copy_peer(operation, count, element_size, source, source_context, destination, destination_context);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.source = device_side("source", source);
  transfer.destination = device_side("destination", destination);
  transfer.extra = " (context " + hex(source_context) + " to context " + hex(destination_context) + ")";
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, source, source_context, destination, destination_context, bytes](const prepared_transfer&,
                                                                                                CUstream stream) {
    return driver.cuMemcpyPeerAsync(destination, destination_context, source, source_context, bytes, stream);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                                            std::size_t element_size, const void* value) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes = plan_fill(operation, destination, count, element_size);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("destination", destination);
  transfer.extra = std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes at " +
                   hex(destination);
  std::array<std::byte, 16> pattern{};  // the op may start after the caller's value is gone
  std::memcpy(pattern.data(), value, element_size);
  transfer.enqueue = [destination, count, element_size, pattern](const prepared_transfer&, CUstream stream) {
    const char* call = nullptr;
    return enqueue_fill(destination, count, element_size, pattern.data(), stream, call);
  };
  return transfer;
}

prepared_transfer engine_core::prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                                std::size_t element_size, CUmemLocation location) {
  caller_context in_engine(impl_->driver, impl_->context);
  const std::size_t bytes = plan_prefetch(operation, pointer, count, element_size, location);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("pointer", pointer);
  transfer.extra = std::to_string(bytes) + " bytes at " + hex(pointer) + " to " +
                   (location.type == CU_MEM_LOCATION_TYPE_HOST ? std::string("the host")
                                                               : "device " + std::to_string(location.id));
  const auto& driver = impl_->driver;
  transfer.enqueue = [&driver, pointer, bytes, location](const prepared_transfer&, CUstream stream) {
    return driver.cuMemPrefetchAsync(pointer, bytes, location, 0, stream);
  };
  return transfer;
}

}  // namespace ferry::detail
