// A timed round trip of every Marshal operation against the raw driver call that does the same work.
// Each run is complete when it returns (asynchronous forms include their stream synchronisation).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/ferry.hpp"

using namespace ferry;

namespace {

constexpr std::size_t transfer_bytes = std::size_t{64} << 20;
constexpr std::size_t words = transfer_bytes / sizeof(std::uint32_t);
constexpr std::size_t query_calls = 1000;

using bench::check;

std::vector<std::uint32_t> random_words(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint32_t> values(n);
  std::mt19937_64 generator(seed);
  for (auto& v : values) v = static_cast<std::uint32_t>(generator());
  return values;
}

void require_equal(const void* a, const void* b, std::size_t bytes, const std::string& what) {
  if (std::memcmp(a, b, bytes) != 0) throw std::runtime_error(what + ": data differs after the run");
}

std::string machine_name(const std::string& device_name, backend which) {
  if (which == backend::sim) return "sim";
  if (device_name.find("H200") != std::string::npos) return "h200";
  std::string name;
  for (char c : device_name) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return name;
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::options options = bench::parse_options(argc, argv);
  const auto& raw = detail::driver();
  const device gpu = device::get(0);
  context primary = context::primary(gpu);
  context_guard guard(primary);
  const std::string backend_name(to_string(active_backend()));
  const mem_info memory = get_mem_info();
  int driver_version = 0;
  raw.cuDriverGetVersion(&driver_version);
  const std::string description = gpu.name() + ", " + std::to_string(gpu.total_memory() >> 20) + " MiB, driver API " +
                                  std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10) +
                                  ", compute " + std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) +
                                  "." + std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)) +
                                  ", " + std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)) +
                                  " copy engines";
  std::cerr << "ferry bench on the " << backend_name << " backend: " << description << ", free "
            << (memory.free >> 20) << " MiB\n";

  const auto source_values = random_words(words, 1);
  std::vector<std::uint32_t> pageable_in = source_values;
  std::vector<std::uint32_t> pageable_out(words);
  pinned_buffer<std::uint32_t> pinned_in = pinned_buffer<std::uint32_t>::allocate(words);
  pinned_buffer<std::uint32_t> pinned_out = pinned_buffer<std::uint32_t>::allocate(words);
  std::memcpy(pinned_in.data(), source_values.data(), transfer_bytes);
  device_buffer<std::uint32_t> device_a = device_buffer<std::uint32_t>::allocate(words);
  device_buffer<std::uint32_t> device_b = device_buffer<std::uint32_t>::allocate(words);
  stream s = stream::create();
  const CUdeviceptr a = device_a.get().get(), b = device_b.get().get();
  poke_array(words, source_values.data(), device_a.get());

  // Verification reads back what the run wrote and compares it with the random source.
  auto verify_device = [&](CUdeviceptr where, const std::string& what) {
    return [&, where, what] {
      std::memset(pageable_out.data(), 0xA5, transfer_bytes);
      check(raw.cuMemcpyDtoH(pageable_out.data(), where, transfer_bytes), "cuMemcpyDtoH");
      require_equal(pageable_out.data(), source_values.data(), transfer_bytes, what);
    };
  };
  auto verify_host = [&](const std::uint32_t* where, const std::string& what) {
    return [&, where, what] { require_equal(where, source_values.data(), transfer_bytes, what); };
  };
  auto poison_host = [&](std::uint32_t* where) { std::memset(where, 0xA5, transfer_bytes); };
  auto poison_device = [&](CUdeviceptr where) { check(raw.cuMemsetD8(where, 0xA5, transfer_bytes), "cuMemsetD8"); };

  std::vector<bench::result> results;
  auto run = [&](bench::comparison_spec spec) { results.push_back(bench::compare(spec)); };

  run({"poke_array_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_device(b); poke_array(words, pageable_in.data(), device_b.get()); },
       [&] { poison_device(b); check(raw.cuMemcpyHtoD(b, pageable_in.data(), transfer_bytes), "cuMemcpyHtoD"); },
       verify_device(b, "poke_array")});
  run({"peek_array_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_host(pageable_out.data()); peek_array(words, device_a.get(), pageable_out.data()); },
       [&] { poison_host(pageable_out.data()); check(raw.cuMemcpyDtoH(pageable_out.data(), a, transfer_bytes), "cuMemcpyDtoH"); },
       verify_host(pageable_out.data(), "peek_array")});
  run({"poke_array_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poke_array_async(words, host_ptr<const std::uint32_t>(pinned_in.get()), device_b.get(), s);
         s.synchronize();
       },
       [&] {
         check(raw.cuMemcpyHtoDAsync(b, pinned_in.data(), transfer_bytes, s.get()), "cuMemcpyHtoDAsync");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       verify_device(b, "poke_array_async")});
  run({"peek_array_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_host(pinned_out.data());
         peek_array_async(words, device_ptr<const std::uint32_t>(device_a.get()), pinned_out.get(), s);
         s.synchronize();
       },
       [&] {
         poison_host(pinned_out.data());
         check(raw.cuMemcpyDtoHAsync(pinned_out.data(), a, transfer_bytes, s.get()), "cuMemcpyDtoHAsync");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       verify_host(pinned_out.data(), "peek_array_async")});
  run({"copy_array_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         copy_array(words, device_ptr<const std::uint32_t>(device_a.get()), device_b.get());
         check(raw.cuCtxSynchronize(), "cuCtxSynchronize");
       },
       [&] {
         check(raw.cuMemcpyDtoD(b, a, transfer_bytes), "cuMemcpyDtoD");
         check(raw.cuCtxSynchronize(), "cuCtxSynchronize");
       },
       verify_device(b, "copy_array")});
  run({"copy_array_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         copy_array_async(words, device_ptr<const std::uint32_t>(device_a.get()), device_b.get(), s);
         s.synchronize();
       },
       [&] {
         check(raw.cuMemcpyDtoDAsync(b, a, transfer_bytes, s.get()), "cuMemcpyDtoDAsync");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       verify_device(b, "copy_array_async")});

  // 2-D: the whole 64 MiB as 4096 rows of 16 KiB in a 16 KiB pitch on both sides (so the data check
  // is the same), through the 2-D path.
  const std::size_t row_words = 4096, rows = words / row_words;
  auto raw_2d = [&](CUmemorytype src_type, const void* src_host, CUdeviceptr src_device, CUmemorytype dst_type,
                    void* dst_host, CUdeviceptr dst_device, CUstream on) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = src_type;
    copy.srcHost = src_host;
    copy.srcDevice = src_device;
    copy.srcPitch = row_words * 4;
    copy.dstMemoryType = dst_type;
    copy.dstHost = dst_host;
    copy.dstDevice = dst_device;
    copy.dstPitch = row_words * 4;
    copy.WidthInBytes = row_words * 4;
    copy.Height = rows;
    if (on) {
      check(raw.cuMemcpy2DAsync(&copy, on), "cuMemcpy2DAsync");
      check(raw.cuStreamSynchronize(on), "cuStreamSynchronize");
    } else {
      check(raw.cuMemcpy2D(&copy), "cuMemcpy2D");
      // A device-to-device cuMemcpy2D returns before the copy is done.
      if (src_type == CU_MEMORYTYPE_DEVICE && dst_type == CU_MEMORYTYPE_DEVICE) check(raw.cuCtxSynchronize(), "cuCtxSynchronize");
    }
  };
  run({"poke_array_2d_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_device(b); poke_array_2d(row_words, rows, pageable_in.data(), row_words, 0, 0, device_b.get(), row_words, 0, 0); },
       [&] { poison_device(b); raw_2d(CU_MEMORYTYPE_HOST, pageable_in.data(), 0, CU_MEMORYTYPE_DEVICE, nullptr, b, nullptr); },
       verify_device(b, "poke_array_2d")});
  run({"peek_array_2d_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_host(pageable_out.data()); peek_array_2d(row_words, rows, device_a.get(), row_words, 0, 0, pageable_out.data(), row_words, 0, 0); },
       [&] { poison_host(pageable_out.data()); raw_2d(CU_MEMORYTYPE_DEVICE, nullptr, a, CU_MEMORYTYPE_HOST, pageable_out.data(), 0, nullptr); },
       verify_host(pageable_out.data(), "peek_array_2d")});
  run({"poke_array_2d_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_device(b);
         poke_array_2d_async(row_words, rows, host_ptr<const std::uint32_t>(pinned_in.get()), row_words, 0, 0, device_b.get(), row_words, 0, 0, s);
         s.synchronize();
       },
       [&] { poison_device(b); raw_2d(CU_MEMORYTYPE_HOST, pinned_in.data(), 0, CU_MEMORYTYPE_DEVICE, nullptr, b, s.get()); },
       verify_device(b, "poke_array_2d_async")});
  run({"peek_array_2d_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_host(pinned_out.data());
         peek_array_2d_async(row_words, rows, device_a.get(), row_words, 0, 0, pinned_out.get(), row_words, 0, 0, s);
         s.synchronize();
       },
       [&] { poison_host(pinned_out.data()); raw_2d(CU_MEMORYTYPE_DEVICE, nullptr, a, CU_MEMORYTYPE_HOST, pinned_out.data(), 0, s.get()); },
       verify_host(pinned_out.data(), "peek_array_2d_async")});
  run({"copy_array_2d_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_device(b);
         copy_array_2d(row_words, rows, device_a.get(), row_words, 0, 0, device_b.get(), row_words, 0, 0);
         check(raw.cuCtxSynchronize(), "cuCtxSynchronize");
       },
       [&] { poison_device(b); raw_2d(CU_MEMORYTYPE_DEVICE, nullptr, a, CU_MEMORYTYPE_DEVICE, nullptr, b, nullptr); },
       verify_device(b, "copy_array_2d")});
  run({"copy_array_2d_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_device(b);
         copy_array_2d_async(row_words, rows, device_a.get(), row_words, 0, 0, device_b.get(), row_words, 0, 0, s);
         s.synchronize();
       },
       [&] { poison_device(b); raw_2d(CU_MEMORYTYPE_DEVICE, nullptr, a, CU_MEMORYTYPE_DEVICE, nullptr, b, s.get()); },
       verify_device(b, "copy_array_2d_async")});

  // Peer: from the primary context to memory of a second context on the same device.
  context second = context::create(gpu);
  CUdeviceptr c = 0;
  {
    context_guard in_second(second);
    check(raw.cuMemAlloc(&c, transfer_bytes), "cuMemAlloc");
  }
  auto poison_second = [&] {
    context_guard in_second(second);
    check(raw.cuMemsetD8(c, 0xA5, transfer_bytes), "cuMemsetD8");
  };
  auto verify_second = [&] {
    context_guard in_second(second);
    verify_device(c, "copy_array_peer")();
  };
  const device_ptr<std::uint32_t> peer_destination(c);
  run({"copy_array_peer_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_second(); copy_array_peer(words, device_ptr<const std::uint32_t>(device_a.get()), primary, peer_destination, second); },
       [&] { poison_second(); check(raw.cuMemcpyPeer(c, second.get(), a, primary.get(), transfer_bytes), "cuMemcpyPeer"); },
       verify_second});
  run({"copy_array_peer_async_64MiB", transfer_bytes, 1, 2, 7,
       [&] {
         poison_second();
         copy_array_peer_async(words, device_ptr<const std::uint32_t>(device_a.get()), primary, peer_destination, second, s);
         s.synchronize();
       },
       [&] {
         poison_second();
         check(raw.cuMemcpyPeerAsync(c, second.get(), a, primary.get(), transfer_bytes, s.get()), "cuMemcpyPeerAsync");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       verify_second});
  {
    context_guard in_second(second);
    check(raw.cuMemFree(c), "cuMemFree");
  }

  // memset: a random 32-bit value over 64 MiB, checked word by word.
  const std::uint32_t fill_value = source_values[7];
  auto verify_fill = [&] {
    check(raw.cuMemcpyDtoH(pageable_out.data(), b, transfer_bytes), "cuMemcpyDtoH");
    for (std::size_t i = 0; i < words; ++i) {
      if (pageable_out[i] != fill_value) throw std::runtime_error("memset: word " + std::to_string(i) + " differs");
    }
  };
  run({"memset_32_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_device(b); memset(device_b.get(), words, fill_value); check(raw.cuCtxSynchronize(), "cuCtxSynchronize"); },
       [&] { poison_device(b); check(raw.cuMemsetD32(b, fill_value, words), "cuMemsetD32"); check(raw.cuCtxSynchronize(), "cuCtxSynchronize"); },
       verify_fill});
  run({"memset_async_32_64MiB", transfer_bytes, 1, 2, 7,
       [&] { poison_device(b); memset_async(device_b.get(), words, fill_value, s); s.synchronize(); },
       [&] {
         poison_device(b);
         check(raw.cuMemsetD32Async(b, fill_value, words, s.get()), "cuMemsetD32Async");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       verify_fill});

  // Allocation round trips (allocate then free), 1 MiB; their "bytes" are 0: times per call.
  const std::size_t small_words = (1 << 20) / 4;
  auto nothing_to_verify = [] {};
  run({"malloc_array_free_1MiB", 0, 20, 2, 7,
       [&] { for (int i = 0; i < 20; ++i) free(malloc_array<std::uint32_t>(small_words)); },
       [&] {
         for (int i = 0; i < 20; ++i) {
           CUdeviceptr p = 0;
           check(raw.cuMemAlloc(&p, small_words * 4), "cuMemAlloc");
           check(raw.cuMemFree(p), "cuMemFree");
         }
       },
       nothing_to_verify});
  run({"malloc_host_array_free_host_1MiB", 0, 5, 1, 5,
       [&] { for (int i = 0; i < 5; ++i) free_host(malloc_host_array<std::uint32_t>(alloc_flags::none, small_words)); },
       [&] {
         for (int i = 0; i < 5; ++i) {
           void* p = nullptr;
           check(raw.cuMemHostAlloc(&p, small_words * 4, 0), "cuMemHostAlloc");
           check(raw.cuMemFreeHost(p), "cuMemFreeHost");
         }
       },
       nothing_to_verify});
  run({"malloc_managed_array_free_1MiB", 0, 20, 2, 7,
       [&] { for (int i = 0; i < 20; ++i) free(malloc_managed_array<std::uint32_t>(attach_flag::global, small_words)); },
       [&] {
         for (int i = 0; i < 20; ++i) {
           CUdeviceptr p = 0;
           check(raw.cuMemAllocManaged(&p, small_words * 4, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
           check(raw.cuMemFree(p), "cuMemFree");
         }
       },
       nothing_to_verify});
  run({"register_unregister_array_64MiB", 0, 5, 1, 5,
       [&] { for (int i = 0; i < 5; ++i) unregister_array(register_array(register_flags::none, words, pageable_in.data())); },
       [&] {
         for (int i = 0; i < 5; ++i) {
           check(raw.cuMemHostRegister(pageable_in.data(), transfer_bytes, 0), "cuMemHostRegister");
           check(raw.cuMemHostUnregister(pageable_in.data()), "cuMemHostUnregister");
         }
       },
       nothing_to_verify});

  // Queries: many calls per run, time per call.
  CUdeviceptr interior = a + 4096;
  run({"get_base_ptr", 0, query_calls, 2, 7,
       [&] { for (std::size_t i = 0; i < query_calls; ++i) if (get_base_ptr(device_ptr<std::uint32_t>(interior)).first.get() != a) throw std::runtime_error("get_base_ptr"); },
       [&] {
         for (std::size_t i = 0; i < query_calls; ++i) {
           CUdeviceptr base = 0;
           std::size_t size = 0;
           check(raw.cuMemGetAddressRange(&base, &size, interior), "cuMemGetAddressRange");
           if (base != a) throw std::runtime_error("cuMemGetAddressRange");
         }
       },
       nothing_to_verify});
  run({"get_mem_info", 0, query_calls, 2, 7,
       [&] { for (std::size_t i = 0; i < query_calls; ++i) (void)get_mem_info(); },
       [&] {
         for (std::size_t i = 0; i < query_calls; ++i) {
           std::size_t free_bytes = 0, total = 0;
           check(raw.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
         }
       },
       nothing_to_verify});
  pinned_buffer<std::uint32_t> mapped = pinned_buffer<std::uint32_t>::allocate(16, alloc_flags::device_mapped);
  run({"get_device_ptr", 0, query_calls, 2, 7,
       [&] { for (std::size_t i = 0; i < query_calls; ++i) (void)get_device_ptr(alloc_flags::none, mapped.get()); },
       [&] {
         for (std::size_t i = 0; i < query_calls; ++i) {
           CUdeviceptr p = 0;
           check(raw.cuMemHostGetDevicePointer(&p, mapped.data(), 0), "cuMemHostGetDevicePointer");
         }
       },
       nothing_to_verify});

  // Managed prefetch: 64 MiB to the device and back to the host per run.
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(words);
  std::memcpy(managed.host_span().data(), source_values.data(), transfer_bytes);
  const CUdeviceptr m = managed.get().get();
  auto device_location = memory_location::on(gpu).to_driver();
  auto host_location = memory_location::host().to_driver();
  run({"prefetch_array_async_roundtrip_64MiB", 2 * transfer_bytes, 1, 2, 7,
       [&] {
         prefetch_array_async(managed.get(), words, memory_location::on(gpu), s);
         prefetch_array_async(managed.get(), words, memory_location::host(), s);
         s.synchronize();
       },
       [&] {
         check(raw.cuMemPrefetchAsync(m, transfer_bytes, device_location, 0, s.get()), "cuMemPrefetchAsync");
         check(raw.cuMemPrefetchAsync(m, transfer_bytes, host_location, 0, s.get()), "cuMemPrefetchAsync");
         check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
       },
       [&] { require_equal(managed.host_span().data(), source_values.data(), transfer_bytes, "prefetch_array_async"); }});

  const std::string machine = options.machine.empty() ? machine_name(gpu.name(), active_backend()) : options.machine;
  bench::write_report(results, options.out_dir, machine + "-marshal", description, backend_name);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "marshal_roundtrip: " << error.what() << "\n";
  return 1;
}
