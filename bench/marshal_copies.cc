// marshal_roundtrip's cases that move data: the 1-D and 2-D copies (blocking and on a stream), copies to
// another context, and memset. Where a case poisons its destination, both sides do so inside the timed run.
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/marshal_fixture.hpp"

namespace ferry::bench {

std::vector<result> linear_copies(marshal_fixture& f) {
  const device_ptr<const std::uint32_t> a(f.device_a.get());
  return compare_all({
      marshal_fixture::moving(
          "poke_array_64MiB", [&] { f.poison_device(f.b); poke_array(words, f.pageable_in.data(), f.device_b.get()); },
          [&] { f.poison_device(f.b); check(f.raw.cuMemcpyHtoD(f.b, f.pageable_in.data(), transfer_bytes), "cuMemcpyHtoD"); },
          f.verify_device(f.b, "poke_array")),
      marshal_fixture::moving(
          "peek_array_64MiB", [&] { f.poison_host(f.pageable_out.data()); peek_array(words, f.device_a.get(), f.pageable_out.data()); },
          [&] {
            f.poison_host(f.pageable_out.data());
            check(f.raw.cuMemcpyDtoH(f.pageable_out.data(), f.a, transfer_bytes), "cuMemcpyDtoH");
          },
          f.verify_host(f.pageable_out.data(), "peek_array")),
      marshal_fixture::moving(
          "poke_array_async_64MiB",
          [&] {
            poke_array_async(words, host_ptr<const std::uint32_t>(f.pinned_in.get()), f.device_b.get(), f.s);
            f.s.synchronize();
          },
          [&] {
            check(f.raw.cuMemcpyHtoDAsync(f.b, f.pinned_in.data(), transfer_bytes, f.s.get()), "cuMemcpyHtoDAsync");
            f.synchronize();
          },
          f.verify_device(f.b, "poke_array_async")),
      marshal_fixture::moving(
          "peek_array_async_64MiB",
          [&] {
            f.poison_host(f.pinned_out.data());
            peek_array_async(words, a, f.pinned_out.get(), f.s);
            f.s.synchronize();
          },
          [&] {
            f.poison_host(f.pinned_out.data());
            check(f.raw.cuMemcpyDtoHAsync(f.pinned_out.data(), f.a, transfer_bytes, f.s.get()), "cuMemcpyDtoHAsync");
            f.synchronize();
          },
          f.verify_host(f.pinned_out.data(), "peek_array_async")),
      marshal_fixture::moving(
          "copy_array_64MiB", [&] { copy_array(words, a, f.device_b.get()); f.synchronize_context(); },
          [&] { check(f.raw.cuMemcpyDtoD(f.b, f.a, transfer_bytes), "cuMemcpyDtoD"); f.synchronize_context(); },
          f.verify_device(f.b, "copy_array")),
      marshal_fixture::moving(
          "copy_array_async_64MiB", [&] { copy_array_async(words, a, f.device_b.get(), f.s); f.s.synchronize(); },
          [&] { check(f.raw.cuMemcpyDtoDAsync(f.b, f.a, transfer_bytes, f.s.get()), "cuMemcpyDtoDAsync"); f.synchronize(); },
          f.verify_device(f.b, "copy_array_async")),
  });
}

namespace {

// The whole 64 MiB as 4096 rows of 16 KiB in a 16 KiB pitch on both sides (so the data check is the
// same), through the 2-D path.
constexpr std::size_t row_words = 4096, rows = words / row_words;

// One end of a raw 2-D copy.
struct side {
  CUmemorytype type;
  void* host;
  CUdeviceptr device;
};

// The raw 2-D copy of the whole region. On a stream: synchronized; without: blocking, but a
// device-to-device cuMemcpy2D returns before the copy is done.
void raw_2d(const marshal_fixture& f, side from, side to, CUstream on) {
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = from.type;
  copy.srcHost = from.host;
  copy.srcDevice = from.device;
  copy.srcPitch = row_words * 4;
  copy.dstMemoryType = to.type;
  copy.dstHost = to.host;
  copy.dstDevice = to.device;
  copy.dstPitch = row_words * 4;
  copy.WidthInBytes = row_words * 4;
  copy.Height = rows;
  if (on) {
    check(f.raw.cuMemcpy2DAsync(&copy, on), "cuMemcpy2DAsync");
    check(f.raw.cuStreamSynchronize(on), "cuStreamSynchronize");
  } else {
    check(f.raw.cuMemcpy2D(&copy), "cuMemcpy2D");
    if (from.type == CU_MEMORYTYPE_DEVICE && to.type == CU_MEMORYTYPE_DEVICE) f.synchronize_context();
  }
}

}  // namespace

std::vector<result> pitched_copies(marshal_fixture& f) {
  const side a{CU_MEMORYTYPE_DEVICE, nullptr, f.a}, b{CU_MEMORYTYPE_DEVICE, nullptr, f.b};
  const side pageable_in{CU_MEMORYTYPE_HOST, f.pageable_in.data(), 0}, pinned_in{CU_MEMORYTYPE_HOST, f.pinned_in.data(), 0};
  const side pageable_out{CU_MEMORYTYPE_HOST, f.pageable_out.data(), 0}, pinned_out{CU_MEMORYTYPE_HOST, f.pinned_out.data(), 0};
  std::uint32_t* const host_out = f.pageable_out.data();
  std::uint32_t* const pinned_host_out = f.pinned_out.data();
  return compare_all({
      marshal_fixture::moving(
          "poke_array_2d_64MiB",
          [&] { f.poison_device(f.b); poke_array_2d(row_words, rows, f.pageable_in.data(), row_words, 0, 0, f.device_b.get(), row_words, 0, 0); },
          [&] { f.poison_device(f.b); raw_2d(f, pageable_in, b, nullptr); }, f.verify_device(f.b, "poke_array_2d")),
      marshal_fixture::moving(
          "peek_array_2d_64MiB",
          [&] { f.poison_host(host_out); peek_array_2d(row_words, rows, f.device_a.get(), row_words, 0, 0, host_out, row_words, 0, 0); },
          [&] { f.poison_host(host_out); raw_2d(f, a, pageable_out, nullptr); }, f.verify_host(host_out, "peek_array_2d")),
      marshal_fixture::moving(
          "poke_array_2d_async_64MiB",
          [&] {
            f.poison_device(f.b);
            poke_array_2d_async(row_words, rows, host_ptr<const std::uint32_t>(f.pinned_in.get()), row_words, 0, 0,
                                f.device_b.get(), row_words, 0, 0, f.s);
            f.s.synchronize();
          },
          [&] { f.poison_device(f.b); raw_2d(f, pinned_in, b, f.s.get()); }, f.verify_device(f.b, "poke_array_2d_async")),
      marshal_fixture::moving(
          "peek_array_2d_async_64MiB",
          [&] {
            f.poison_host(pinned_host_out);
            peek_array_2d_async(row_words, rows, f.device_a.get(), row_words, 0, 0, f.pinned_out.get(), row_words, 0, 0, f.s);
            f.s.synchronize();
          },
          [&] { f.poison_host(pinned_host_out); raw_2d(f, a, pinned_out, f.s.get()); },
          f.verify_host(pinned_host_out, "peek_array_2d_async")),
      marshal_fixture::moving(
          "copy_array_2d_64MiB",
          [&] {
            f.poison_device(f.b);
            copy_array_2d(row_words, rows, f.device_a.get(), row_words, 0, 0, f.device_b.get(), row_words, 0, 0);
            f.synchronize_context();
          },
          [&] { f.poison_device(f.b); raw_2d(f, a, b, nullptr); }, f.verify_device(f.b, "copy_array_2d")),
      marshal_fixture::moving(
          "copy_array_2d_async_64MiB",
          [&] {
            f.poison_device(f.b);
            copy_array_2d_async(row_words, rows, f.device_a.get(), row_words, 0, 0, f.device_b.get(), row_words, 0, 0, f.s);
            f.s.synchronize();
          },
          [&] { f.poison_device(f.b); raw_2d(f, a, b, f.s.get()); }, f.verify_device(f.b, "copy_array_2d_async")),
  });
}

// From the primary context to memory of a second context on the same device.
std::vector<result> peer_copies(marshal_fixture& f) {
  context& second = f.second.emplace(context::create(f.gpu));
  CUdeviceptr c = 0;
  {
    context_guard in_second(second);
    check(f.raw.cuMemAlloc(&c, transfer_bytes), "cuMemAlloc");
  }
  auto poison_second = [&] {
    context_guard in_second(second);
    f.poison_device(c);
  };
  auto verify_second = [&, verify = f.verify_device(c, "copy_array_peer")] {
    context_guard in_second(second);
    verify();
  };
  const device_ptr<const std::uint32_t> a(f.device_a.get());
  const device_ptr<std::uint32_t> destination(c);
  std::vector<result> results = compare_all({
      marshal_fixture::moving(
          "copy_array_peer_64MiB", [&] { poison_second(); copy_array_peer(words, a, f.primary, destination, second); },
          [&] {
            poison_second();
            check(f.raw.cuMemcpyPeer(c, second.get(), f.a, f.primary.get(), transfer_bytes), "cuMemcpyPeer");
          },
          verify_second),
      marshal_fixture::moving(
          "copy_array_peer_async_64MiB",
          [&] {
            poison_second();
            copy_array_peer_async(words, a, f.primary, destination, second, f.s);
            f.s.synchronize();
          },
          [&] {
            poison_second();
            check(f.raw.cuMemcpyPeerAsync(c, second.get(), f.a, f.primary.get(), transfer_bytes, f.s.get()),
                  "cuMemcpyPeerAsync");
            f.synchronize();
          },
          verify_second),
  });
  context_guard in_second(second);
  check(f.raw.cuMemFree(c), "cuMemFree");
  return results;
}

// A random 32-bit value over 64 MiB, checked word by word.
std::vector<result> memsets(marshal_fixture& f) {
  const std::uint32_t fill_value = f.source_values[7];
  auto verify_fill = [&] {
    check(f.raw.cuMemcpyDtoH(f.pageable_out.data(), f.b, transfer_bytes), "cuMemcpyDtoH");
    for (std::size_t i = 0; i < words; ++i) {
      if (f.pageable_out[i] != fill_value) throw std::runtime_error("memset: word " + std::to_string(i) + " differs");
    }
  };
  return compare_all({
      marshal_fixture::moving(
          "memset_32_64MiB", [&] { f.poison_device(f.b); memset(f.device_b.get(), words, fill_value); f.synchronize_context(); },
          [&] {
            f.poison_device(f.b);
            check(f.raw.cuMemsetD32(f.b, fill_value, words), "cuMemsetD32");
            f.synchronize_context();
          },
          verify_fill),
      marshal_fixture::moving(
          "memset_async_32_64MiB", [&] { f.poison_device(f.b); memset_async(f.device_b.get(), words, fill_value, f.s); f.s.synchronize(); },
          [&] {
            f.poison_device(f.b);
            check(f.raw.cuMemsetD32Async(f.b, fill_value, words, f.s.get()), "cuMemsetD32Async");
            f.synchronize();
          },
          verify_fill),
  });
}

}  // namespace ferry::bench
