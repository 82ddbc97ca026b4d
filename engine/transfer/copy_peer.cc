#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {
namespace {

// What a peer transfer's messages add to those of a copy: " (context 0x.. to context 0x..)".
std::string describe_contexts(CUcontext source_context, CUcontext destination_context) {
  return " (context " + hex(source_context) + " to context " + hex(destination_context) + ")";
}

}  // namespace

std::size_t plan_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size, CUdeviceptr source,
                           CUcontext source_context, CUdeviceptr destination, CUcontext destination_context) {
  const std::size_t bytes = byte_size(operation, "count", count, element_size);
  if (source_context == nullptr) throw_invalid_argument(operation, "source_context is a null context");
  if (destination_context == nullptr) throw_invalid_argument(operation, "destination_context is a null context");
  check_side(operation, device_side("source", source), 0, bytes);
  check_side(operation, device_side("destination", destination), 0, bytes);
  check_disjoint(operation, source, destination, bytes);
  return bytes;
}

prepared_transfer prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                    CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                    CUcontext destination_context) {
  const std::size_t bytes =
      plan_copy_peer(operation, count, element_size, source, source_context, destination, destination_context);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.source = device_side("source", source);
  transfer.destination = device_side("destination", destination);
  transfer.extra = describe_contexts(source_context, destination_context);
  const auto& driver = detail::driver();
  transfer.enqueue = [&driver, source, source_context, destination, destination_context, bytes](const prepared_transfer&,
                                                                                                CUstream stream) {
    return driver.cuMemcpyPeerAsync(destination, destination_context, source, source_context, bytes, stream);
  };
  return transfer;
}

void copy_peer(std::string_view operation, std::size_t count, std::size_t element_size, CUdeviceptr source,
               CUcontext source_context, CUdeviceptr destination, CUcontext destination_context,
               stream_choice stream) {
  const std::size_t bytes =
      plan_copy_peer(operation, count, element_size, source, source_context, destination, destination_context);
  if (bytes == 0) return;
  const auto& driver = detail::driver();
  CUresult status = stream ? driver.cuMemcpyPeerAsync(destination, destination_context, source, source_context, bytes,
                                                      *stream)
                           : driver.cuMemcpyPeer(destination, destination_context, source, source_context, bytes);
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, stream ? "cuMemcpyPeerAsync" : "cuMemcpyPeer",
                     describe_transfer(operation, bytes, source, destination, stream) +
                         describe_contexts(source_context, destination_context),
                     std::source_location::current());
  }
}

}  // namespace ferry::detail
