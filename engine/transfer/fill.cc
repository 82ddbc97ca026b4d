#include <array>
#include <cstddef>
#include <cstring>
#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/launch.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {
namespace {

// "4 elements of 8 bytes at 0x..": a fill in messages.
std::string describe_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size) {
  return std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes at " + hex(destination);
}

}  // namespace

std::size_t plan_fill(std::string_view operation, CUdeviceptr destination, std::size_t count, std::size_t element_size) {
  if (element_size != 1 && element_size != 2 && element_size != 4 && element_size != 8 && element_size != 16) {
    throw_invalid_argument(operation, "element size " + std::to_string(element_size) +
                                          " bytes is not supported (memset sets elements of 1, 2, 4, 8 or 16 bytes)");
  }
  const std::size_t bytes = byte_size(operation, "count", count, element_size);
  if (destination % element_size != 0) {
    throw_invalid_argument(operation, "destination " + hex(destination) + " is not aligned to its element size of " +
                                          std::to_string(element_size) + " bytes");
  }
  const std::optional<known_range> range = check_side(operation, device_side("destination", destination), 0, bytes);
  // Elements of 8 and 16 bytes are set by ferry's fill kernel, launched in the current context (the
  // engine's, or the caller's for the synchronous form): it would fault on another device's memory.
  if (element_size > 4 && range && !on_current_device(*range)) {
    throw_invalid_argument(operation, "destination " + hex(destination) + " is memory of device " +
                                          std::to_string(range->device) + ", not of the device the fill kernel " +
                                          "runs on; elements of " + std::to_string(element_size) +
                                          " bytes are set by a kernel: set them there (that device's engine)");
  }
  return bytes;
}

CUresult enqueue_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size, const void* pattern,
                      stream_choice stream, const char*& call) {
  const auto& driver = detail::driver();
  std::uint32_t small = 0;
  if (element_size <= sizeof(small)) std::memcpy(&small, pattern, element_size);
  switch (element_size) {
    case 1:
      call = stream ? "cuMemsetD8Async" : "cuMemsetD8";
      return stream ? driver.cuMemsetD8Async(destination, static_cast<unsigned char>(small), count, *stream)
                    : driver.cuMemsetD8(destination, static_cast<unsigned char>(small), count);
    case 2:
      call = stream ? "cuMemsetD16Async" : "cuMemsetD16";
      return stream ? driver.cuMemsetD16Async(destination, static_cast<unsigned short>(small), count, *stream)
                    : driver.cuMemsetD16(destination, static_cast<unsigned short>(small), count);
    case 4:
      call = stream ? "cuMemsetD32Async" : "cuMemsetD32";
      return stream ? driver.cuMemsetD32Async(destination, small, count, *stream)
                    : driver.cuMemsetD32(destination, small, count);
    default: {
      // The driver has no memset wider than 32 bits: ferry's fill kernel. The synchronous form runs it on
      // the legacy stream, as cuMemsetD32 does, and waits for it.
      call = "the fill kernel (cuLaunchKernel)";
      const CUstream on = stream ? *stream : nullptr;
      CUresult status = launch_fill(destination, count, element_size, pattern, on);
      if (status == CUDA_SUCCESS && !stream) {
        call = "cuStreamSynchronize after the fill kernel";
        status = driver.cuStreamSynchronize(nullptr);
      }
      return status;
    }
  }
}

prepared_transfer prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                               std::size_t element_size, const void* pattern) {
  const std::size_t bytes = plan_fill(operation, destination, count, element_size);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("destination", destination);
  transfer.extra = describe_fill(destination, count, element_size);
  std::array<std::byte, 16> kept{};  // the op may start after the caller's value is gone
  std::memcpy(kept.data(), pattern, element_size);
  transfer.enqueue = [destination, count, element_size, kept](const prepared_transfer&, CUstream stream) {
    const char* call = nullptr;
    return enqueue_fill(destination, count, element_size, kept.data(), stream, call);
  };
  return transfer;
}

void fill(std::string_view operation, CUdeviceptr destination, std::size_t count, std::size_t element_size,
          const void* pattern, stream_choice stream) {
  const std::size_t bytes = plan_fill(operation, destination, count, element_size);
  if (bytes == 0) return;
  const char* call = nullptr;
  if (CUresult status = enqueue_fill(destination, count, element_size, pattern, stream, call); status != CUDA_SUCCESS) {
    throw_cuda_error(status, call,
                     std::string(operation) + ": " + describe_fill(destination, count, element_size) + " " +
                         describe_stream(stream),
                     std::source_location::current());
  }
}

}  // namespace ferry::detail
