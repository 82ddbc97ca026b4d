#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {

plan_1d plan_copy_1d(std::string_view operation, std::size_t count, std::size_t element_size, const endpoint& source,
                     const endpoint& destination) {
  const std::size_t bytes = byte_size(operation, "count", count, element_size);
  const std::optional<known_range> source_range = check_side(operation, source, 0, bytes);
  const std::optional<known_range> destination_range = check_side(operation, destination, 0, bytes);
  if (source.kind != memory_kind::device && destination.kind != memory_kind::device) {
    throw_invalid_argument(operation, "source and destination are both host memory; ferry copies to or from a device");
  }
  // Whatever the kinds: a host pointer may name mapped or managed memory that the device side names too.
  check_disjoint(operation, source.address, destination.address, bytes);
  // A copy of no bytes touches nothing: any path takes it.
  const auto reached = [bytes](const endpoint& side, const std::optional<known_range>& range) {
    return side.kind != memory_kind::device || bytes == 0 || (range && on_current_device(*range));
  };
  const auto device_of = [bytes](const endpoint& side, const std::optional<known_range>& range) {
    return side.kind == memory_kind::device && bytes != 0 && range ? range->device : -1;
  };
  return {bytes, copy_direction(source, destination),
          reached(source, source_range) && reached(destination, destination_range), device_of(source, source_range),
          device_of(destination, destination_range)};
}

void check_device_range(std::string_view operation, std::size_t count, std::size_t element_size, endpoint side) {
  check_side(operation, side, 0, byte_size(operation, "count", count, element_size));
}

CUresult enqueue_copy_1d(const plan_1d& plan, const endpoint& source, const endpoint& destination,
                         stream_choice stream, const char*& call) {
  const auto& driver = detail::driver();
  switch (plan.way) {
    case direction::host_to_device:
      call = stream ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD";
      return stream ? driver.cuMemcpyHtoDAsync(destination.address, reinterpret_cast<const void*>(source.address),
                                               plan.bytes, *stream)
                    : driver.cuMemcpyHtoD(destination.address, reinterpret_cast<const void*>(source.address), plan.bytes);
    case direction::device_to_host:
      call = stream ? "cuMemcpyDtoHAsync" : "cuMemcpyDtoH";
      return stream ? driver.cuMemcpyDtoHAsync(reinterpret_cast<void*>(destination.address), source.address,
                                               plan.bytes, *stream)
                    : driver.cuMemcpyDtoH(reinterpret_cast<void*>(destination.address), source.address, plan.bytes);
    case direction::device_to_device:
      call = stream ? "cuMemcpyDtoDAsync" : "cuMemcpyDtoD";
      return stream ? driver.cuMemcpyDtoDAsync(destination.address, source.address, plan.bytes, *stream)
                    : driver.cuMemcpyDtoD(destination.address, source.address, plan.bytes);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

prepared_transfer prepare_copy_1d(std::string_view operation, std::size_t count, std::size_t element_size,
                                  const endpoint& source, const endpoint& destination) {
  const plan_1d plan = plan_copy_1d(operation, count, element_size, source, destination);
  prepared_transfer transfer;
  // A pageable side may be staged: the engine's threads then read or write it on the host, which
  // device memory passed as a host span would not survive (a host thread that touches it crashes). The same
  // driver call tells the planner whether the driver knows the side as page-locked. (One side at most
  // is host memory: plan_copy_1d refuses two.)
  for (const endpoint* side : {&source, &destination}) {
    if (side->kind != memory_kind::pageable_host || plan.bytes == 0) continue;
    const host_memory_facts facts = ask_driver_about_host_memory(side->address);
    if (facts.device_only) {
      throw_invalid_argument(operation, std::string(side->argument) + " " + hex(side->address) +
                                            " is device memory, not host memory (pass it as a device_ptr)");
    }
    transfer.host_range_asked = true;
    transfer.host_range_end = facts.range ? facts.range->base + facts.range->size : 0;
  }
  transfer.operation = operation;
  transfer.bytes = plan.bytes;
  transfer.source = source;
  transfer.destination = destination;
  transfer.pageable = source.kind == memory_kind::pageable_host || destination.kind == memory_kind::pageable_host;
  transfer.batchable = true;
  transfer.kernels_reach = plan.kernels_reach;
  transfer.source_device = plan.source_device;
  transfer.destination_device = plan.destination_device;
  // The direct form; a pageable transfer uses it once its memory is page-locked (registered). It keeps
  // only what the copy call takes, which std::function holds without an allocation (the whole plan
  // would not fit).
  transfer.enqueue = [bytes = plan.bytes, way = plan.way](const prepared_transfer& self, CUstream stream) {
    const char* call = nullptr;
    return enqueue_copy_1d(plan_1d{bytes, way}, self.source, self.destination, stream, call);
  };
  return transfer;
}

void copy_1d(std::string_view operation, std::size_t count, std::size_t element_size, endpoint source,
             endpoint destination, stream_choice stream) {
  const plan_1d plan = plan_copy_1d(operation, count, element_size, source, destination);
  if (plan.bytes == 0) return;
  const char* call = nullptr;
  if (CUresult status = enqueue_copy_1d(plan, source, destination, stream, call); status != CUDA_SUCCESS) {
    throw_cuda_error(status, call, describe_transfer(operation, plan.bytes, source.address, destination.address, stream),
                     std::source_location::current());
  }
}

}  // namespace ferry::detail
