#include "tests/fuzz/fuzz_world.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <boost/system/system_error.hpp>

#include "engine/driver/driver_table.hpp"
#include "ferry/blocks.hpp"
#include "sim/control.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace ferry::fuzz {
namespace {

engine_options small_engine() {
  engine_options options;
  options.pool_streams = 2;
  options.staging_chunk_bytes = staging_chunk_bytes;
  options.staging_chunks = 2;
  options.copy_threads = 1;
  return options;
}

// Driver calls that put work on a stream or take memory: a rejected call may make none of them.
bool enqueues_or_allocates(const std::string& call) {
  static const char* const forbidden[] = {
      "cuMemcpy", "cuMemset", "cuLaunch", "cuMemAlloc", "cuMemHostAlloc", "cuMemHostRegister", "cuMemPrefetchAsync",
      "cuMemAdvise", "cuStreamAttachMemAsync", "cuEventRecord", "cuStreamWaitEvent", "cuStreamWaitValue32",
      "cuStreamWriteValue32", "cuStreamCreate", "cuEventCreate", "cuModuleLoadData"};
  for (const char* prefix : forbidden) {
    if (call.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

[[noreturn]] void fail(const char* operation, const std::string& what, const std::string& arguments) {
  std::fprintf(stderr, "\nferry fuzz: %s: %s\n  arguments: %s\n", operation, what.c_str(), arguments.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

fuzz_world::fuzz_world()
    : primary(context::primary(device::get(0))),
      current(primary),
      second(context::primary(device::get(1))),
      device_a(device_buffer<std::byte>::allocate(arena_bytes)),
      device_b(device_buffer<std::byte>::allocate(arena_bytes)),
      managed(managed_buffer<std::byte>::allocate(arena_bytes)),
      mapped(pinned_buffer<std::byte>::allocate(arena_bytes, alloc_flags::device_mapped)),
      pinned(pinned_buffer<std::byte>::allocate(arena_bytes)),
      pageable_a(arena_bytes),
      pageable_b(arena_bytes),
      queue(stream::create()),
      gpu(io.get_executor(), small_engine()) {
  auto address = [](auto pointer) { return reinterpret_cast<std::uintptr_t>(pointer); };
  map.add({device_a.get().get(), arena_bytes, memory::device});
  map.add({device_b.get().get(), arena_bytes, memory::device});
  map.add({managed.get().get(), arena_bytes, memory::managed});
  map.add({address(mapped.data()), arena_bytes, memory::mapped_pinned});
  map.add({address(pinned.data()), arena_bytes, memory::pinned});
  map.add({address(pageable_a.data()), arena_bytes, memory::pageable});
  map.add({address(pageable_b.data()), arena_bytes, memory::pageable});
  // One staged transfer allocates the engine's staging chunks, one small pageable poke its small staging
  // slots: from then on, what the world holds between inputs is fixed.
  auto warm_up = [&](const char* failed, auto start) {
    bool done = false;
    start([&](boost::system::error_code error, std::size_t) { done = !error; });
    io.restart();
    io.run();
    if (!done) fail("setup", failed, "");
  };
  warm_up("the warm-up poke failed", [&](auto handler) {
    gpu.poke(std::span<const std::byte>(pageable_a), device_a.get(), transfer_plan::staged, handler);
  });
  warm_up("the small warm-up poke failed",
          [&](auto handler) { gpu.poke(std::span<const std::byte>(pageable_a).first(16), device_a.get(), handler); });
  // One block list moved by the kernel allocates the engine's page-locked descriptor slab for such lists.
  warm_up("the warm-up block list failed", [&](auto handler) {
    const std::vector<block_pair<pinned_span<const std::byte>, std::byte>> blocks{
        {pinned_span(host_ptr<const std::byte>(pinned.data()), 16), device_a.get()}};
    gpu.poke_blocks(blocks, batch_path::kernel, handler);
  });
  // And one fill of 8-byte elements loads the kernels' module, which stays for the context's life.
  ferry::memset(device_a.get().cast<std::uint64_t>(), 1, std::uint64_t{1});
  baseline = sim::current_usage();
  if (std::getenv("FERRY_FUZZ_TRACE") != nullptr) {
    for (const region& r : map.regions()) {
      std::fprintf(stderr, "ferry fuzz: region %#zx + %zu, kind %d\n", static_cast<std::size_t>(r.base), r.size,
                   static_cast<int>(r.kind));
    }
  }
}

void fuzz_world::scramble(std::uint64_t seed) {
  std::mt19937_64 generator(seed | 1);
  for (const region& r : map.regions()) {
    std::byte* bytes = bytes_at(r.base, r.size);
    for (std::size_t i = 0; i < r.size; i += 8) {
      const std::uint64_t word = generator() | 0x0101010101010101;  // no zero byte
      std::memcpy(bytes + i, &word, 8);
    }
  }
}

std::byte* fuzz_world::bytes_at(std::uintptr_t address, std::size_t bytes) const {
  const region* r = map.find(address, false);
  if (r != nullptr && (r->kind == memory::device || r->kind == memory::managed)) {
    return static_cast<std::byte*>(sim::host_address(address, bytes));
  }
  return reinterpret_cast<std::byte*>(address);
}

std::uintptr_t fuzz_world::pick_address(fuzz_input& in, std::size_t element_size) const {
  const unsigned choice = in.choose(11);
  std::uintptr_t address = 0;
  if (choice < map.regions().size()) {
    address = map.regions()[choice].base + pick_offset(in, element_size, arena_bytes);
  } else if (choice == 8) {
    address = in.u64();
  } else if (choice == 9) {
    address = static_cast<std::uintptr_t>(-1) - in.byte();
  } else if (choice == 10) {
    address = std::uintptr_t{in.byte()} * 8;
  }
  // libFuzzer learns the values the sim compares addresses with, and so finds memory the fuzzer does not
  // own (the engine's staging chunks), which the model cannot judge: such an address becomes one that
  // nothing owns, at the top of the address space.
  CUdeviceptr base = 0;
  std::size_t size = 0;
  const auto& table = detail::driver();
  const bool known = table.cuMemGetAddressRange(&base, &size, address) == CUDA_SUCCESS ||
                     table.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) == CUDA_SUCCESS;
  if (known && map.find(address, false) == nullptr) return static_cast<std::uintptr_t>(-1) - (address & 0xff);
  return address;
}

void fuzz_world::finish_engine_op(const std::optional<boost::system::error_code>& result,
                                  const std::string& arguments) {
  io.restart();
  io.run();  // returns once the op's handler ran: the op tracks the executor's work until then
  // Registrations the planner made of the pageable arenas must not outlive the op: the model says the
  // driver does not know them.
  gpu.forget_host_memory(std::span(pageable_a));
  gpu.forget_host_memory(std::span(pageable_b));
  if (!result) fail("engine", "the handler never ran", arguments);
  if (*result) throw boost::system::system_error(*result);
}

void fuzz_world::check_nothing_left_behind() const {
  const sim::usage now = sim::current_usage();
  sim::usage compared = now;
  compared.events = baseline.events;  // the engine's event pool grows on demand and keeps its events
  if (!(compared == baseline) || now.events > baseline.events + 16) {
    fail("input", "the world holds more than before: device allocations " + std::to_string(baseline.device_allocations) +
                      " -> " + std::to_string(now.device_allocations) + ", pinned " +
                      std::to_string(baseline.pinned_allocations) + " -> " + std::to_string(now.pinned_allocations) +
                      ", managed " + std::to_string(baseline.managed_allocations) + " -> " +
                      std::to_string(now.managed_allocations) + ", registered " +
                      std::to_string(baseline.registered_ranges) + " -> " + std::to_string(now.registered_ranges) +
                      ", streams " + std::to_string(baseline.streams) + " -> " + std::to_string(now.streams) +
                      ", events " + std::to_string(baseline.events) + " -> " + std::to_string(now.events) + ", modules " + std::to_string(baseline.modules) + " -> " +
                      std::to_string(now.modules) + ", contexts " + std::to_string(baseline.contexts) + " -> " +
                      std::to_string(now.contexts),
         "");
  }
}

void require(bool ok, const char* operation, const std::string& what, const std::string& arguments) {
  if (!ok) fail(operation, what, arguments);
}

ending judge(const char* operation, verdict expected, const std::function<void()>& call,
             const std::function<void()>& check_bytes, const std::string& arguments) {
  static const bool trace = std::getenv("FERRY_FUZZ_TRACE") != nullptr;  // to read what a crashing input did
  if (trace) std::fprintf(stderr, "ferry fuzz: %s verdict %d: %s\n", operation, static_cast<int>(expected), arguments.c_str());
  if (expected == verdict::unsafe) return ending::rejected;
  const std::map<std::string, std::size_t> before = sim::call_counts();
  try {
    call();
  } catch (const std::invalid_argument& error) {
    if (expected != verdict::invalid && expected != verdict::driver_decides) {
      fail(operation, std::string("valid arguments were rejected: ") + error.what(), arguments);
    }
    const std::string message = error.what();
    if (message.find(": ") == std::string::npos) {
      fail(operation, "the message does not name the operation (\"operation: what\"): " + message, arguments);
    }
    // (Where the driver decides, its refusal is the rejection: the call was made and did nothing.)
    for (const auto& [call_name, count] : expected == verdict::invalid ? sim::call_counts() : before) {
      auto was = before.find(call_name);
      if (enqueues_or_allocates(call_name) && count != (was == before.end() ? 0 : was->second)) {
        fail(operation, "rejected (" + message + ") after calling " + call_name, arguments);
      }
    }
    return ending::rejected;
  } catch (const std::exception& error) {  // cuda_error, out_of_memory, system_error from use_future...
    if (expected == verdict::invalid) {
      fail(operation, std::string("invalid arguments reached the driver: ") + error.what(), arguments);
    }
    if (expected == verdict::valid) fail(operation, std::string("valid arguments failed: ") + error.what(), arguments);
    return ending::driver_error;
  }
  if (expected == verdict::invalid) fail(operation, "invalid arguments were accepted", arguments);
  if (expected == verdict::valid) check_bytes();
  return ending::accepted;
}

}  // namespace ferry::fuzz
