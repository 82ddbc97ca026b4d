// submit_path_costs's rows of the engine's core without Asio (the interface engine.hpp's templates call):
// argument checks alone, then checks, submission and bridge, on the caller's stream and on a pool
// stream; then the raw calls they wrap and the allocations an op's bookkeeping makes, timed the same way.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "bench/submit_path_fixture.hpp"
#include "ferry/detail/op_blocks.hpp"

namespace ferry::bench {
namespace {

struct no_handler final : detail::completion {
  void complete(boost::system::error_code, std::size_t) override {}
};

// Starts `transfer` on `core` with a completion that raises `finished` (lowered first).
void start_raising(detail::engine_core& core, std::atomic<bool>& finished, detail::transfer_request transfer,
                   std::optional<CUstream> on) {
  finished = false;
  core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished)), std::move(transfer), on);
}

// About an op with a coroutine's handler.
struct op_sized {
  std::array<std::byte, 320> state;
};

// The way an op's block goes when a thread that runs no io_context starts ops (the size sweep's way, a
// use_future caller): made by `allocator` on this thread, handed to another thread that frees it, one at
// a time. The median of the allocations with their hand-overs (a store each), in microseconds.
template <class Allocator>
double made_here_freed_there_us(Allocator allocator) {
  std::shared_ptr<op_sized> handed;  // this thread's while `full` is false, the freeing thread's while true
  std::atomic<bool> full{false};
  std::atomic<bool> stop{false};
  std::thread freer([&] {
    while (!stop.load(std::memory_order_acquire)) {
      if (full.load(std::memory_order_acquire)) {
        handed.reset();
        full.store(false, std::memory_order_release);
      }
    }
  });
  const double us = isolated_us([&](int) {
    handed = std::allocate_shared<op_sized>(allocator);
    handed->state[0] = std::byte{1};
    full.store(true, std::memory_order_release);
  }, [&] {
    while (full.load(std::memory_order_acquire)) {
    }
  });
  stop.store(true, std::memory_order_release);
  freer.join();
  return us;
}

// A coroutine's way: made and freed by the thread that runs the io_context. The median of an allocation
// and its free, in microseconds.
template <class Allocator>
double made_and_freed_on_an_io_thread_us(Allocator allocator) {
  boost::asio::io_context io(1);
  double us = 0;
  boost::asio::post(io, [&] {
    us = isolated_us([&](int) {
      auto op = std::allocate_shared<op_sized>(allocator);
      op->state[0] = std::byte{1};
      asm volatile("" : : "r"(op.get()) : "memory");
    }, [] {});
  });
  io.run();
  return us;
}

std::vector<row> raw_call_rows(submit_fixture& f) {
  const auto settle = [&] { f.spin_on(f.events[0]); };
  return measure_all({
      {"cuEventRecord, alone (median of single calls)",
       [&] { return isolated_us([&](int) { f.raw.cuEventRecord(f.events[0], f.s.get()); }, settle); }},
      {"cuMemcpyHtoDAsync + cuEventRecord, alone (median of single calls)", [&] {
         return isolated_us([&](int i) {
           f.copy(i);
           f.raw.cuEventRecord(f.events[0], f.s.get());
         }, settle);
       }},
      {"steady_clock::now", [&] { return per_call([&](int) { (void)std::chrono::steady_clock::now(); }, [] {}); }},
      {"an op's block made here, freed on another thread: Asio's recycling allocator (the global one off an "
       "io thread)",
       [] { return made_here_freed_there_us(boost::asio::recycling_allocator<void>()); }},
      {"an op's block made here, freed on another thread: ferry's op blocks",
       [] { return made_here_freed_there_us(detail::op_blocks::allocator<void>()); }},
      {"an op's block made and freed on an io thread: Asio's recycling allocator (its thread's cache)",
       [] { return made_and_freed_on_an_io_thread_us(boost::asio::recycling_allocator<void>()); }},
      {"an op's block made and freed on an io thread: ferry's op blocks",
       [] { return made_and_freed_on_an_io_thread_us(detail::op_blocks::allocator<void>()); }},
  });
}

}  // namespace

std::vector<row> engine_core_rows(submit_fixture& f) {
  detail::engine_core core{engine_options{}};
  auto prepare = [&](int i) {
    return core.prepare_copy("engine::poke", small_bytes, 1, detail::pinned_side("source", f.source.data() + i * small_bytes),
                             detail::device_side("destination", f.device_base + i * small_bytes));
  };
  // An engine that never batches: its pool-stream copies go to the copy engine one by one.
  engine_options unbatched_options;
  unbatched_options.batch_window = std::chrono::microseconds(0);
  detail::engine_core unbatched{unbatched_options};
  auto not_batched = [&](int i) {
    return unbatched.prepare_copy("engine::poke", small_bytes, 1,
                                  detail::pinned_side("source", f.source.data() + i * small_bytes),
                                  detail::device_side("destination", f.device_base + i * small_bytes));
  };
  auto drain = [&] {
    f.synchronize();
    std::promise<void> all_done;
    core.wait_all(std::make_shared<detail::operation>(std::make_unique<set_on_complete>(all_done)));
    all_done.get_future().wait();
  };
  std::atomic<bool> finished{false};
  const auto settle = [&] { spin_until(finished); };
  // Rounds whose stream waits on a word of host memory until the round is over: nothing completes while
  // they are timed, so the engine's threads touch none of the lines the submissions write. Beside the
  // ungated loop, the difference is what completions running beside the submissions cost them. Rounds
  // are short: work queued behind the wait fills the stream's command queue, and a full queue would
  // block the submitting thread, which is the one that opens the gate.
  constexpr int gated_calls = 64;
  void* gate_word = nullptr;
  CUdeviceptr gate_device = 0;
  // The gate's word, and a line further on, a word for the raw rows' flag writes.
  check(f.raw.cuMemHostAlloc(&gate_word, 128, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
        "cuMemHostAlloc");
  check(f.raw.cuMemHostGetDevicePointer(&gate_device, gate_word, 0), "cuMemHostGetDevicePointer");
  auto* gate = static_cast<volatile std::uint32_t*>(gate_word);
  *gate = 0;
  auto gated = [&](std::function<void(int)> body) {
    return per_call_us(gated_calls, 9, 2, [&](int i) {
      if (i == 0) {
        check(f.raw.cuStreamWaitValue32(f.s.get(), gate_device, 1, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
      }
      body(i);
    }, [&] {
      *gate = 1;
      drain();
      *gate = 0;
    });
  };
  const CUdeviceptr flag_device = gate_device + 64;
  auto raw_copy_and_flag = [&](int i) {
    f.copy(i);
    f.raw.cuStreamWriteValue32(f.s.get(), flag_device, static_cast<cuuint32_t>(i + 1), 0);
  };
  auto start_no_handler = [&](detail::transfer_request transfer) {
    core.start(std::make_shared<detail::operation>(std::make_unique<no_handler>()), std::move(transfer), f.s.get());
  };
  std::vector<row> rows = measure_all({
      {"engine core: prepare_copy (argument checks)", [&] { return per_call([&](int i) { (void)prepare(i); }, [] {}); }},
      {"engine core: prepare_copy + start", [&] {
         return per_call([&](int i) {
           core.start(std::make_shared<detail::operation>(std::make_unique<no_handler>()), prepare(i), f.s.get());
         }, drain);
       }},
      {"engine core: prepare_copy + start, 64 a round, stream held until the round ends (nothing completes)",
       [&] { return gated([&](int i) { start_no_handler(prepare(i)); }); }},
      {"engine core: prepare_copy + start, 64 a round, stream free", [&] {
         return per_call_us(gated_calls, 9, 2, [&](int i) { start_no_handler(prepare(i)); }, drain);
       }},
      {"cuMemcpyHtoDAsync + cuStreamWriteValue32, 64 a round, stream held", [&] { return gated(raw_copy_and_flag); }},
      {"cuMemcpyHtoDAsync + cuStreamWriteValue32, 64 a round, stream free",
       [&] { return per_call_us(gated_calls, 9, 2, raw_copy_and_flag, drain); }},
      {"engine core: prepare_copy + start, alone (median of single calls)",
       [&] { return isolated_us([&](int i) { start_raising(core, finished, prepare(i), f.s.get()); }, settle); }},
      {"engine core: prepare_copy + start, pool stream, alone (median of single calls)",
       [&] { return isolated_us([&](int i) { start_raising(core, finished, prepare(i), std::nullopt); }, settle); }},
      {"engine core: prepare_copy + start, pool stream, not batched, alone (median of single calls)",
       [&] { return isolated_us([&](int i) { start_raising(unbatched, finished, not_batched(i), std::nullopt); }, settle); }},
      {"operation + completion allocation, alone (median of single calls)", [&] {
         return isolated_us([&](int) {
           auto op = std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished));
           asm volatile("" : : "r"(op.get()) : "memory");
         }, [] {});
       }},
  });
  f.raw.cuMemFreeHost(gate_word);
  // The raw calls and allocations run beside this core, as the engine's own do.
  const std::vector<row> pieces = raw_call_rows(f);
  rows.insert(rows.end(), pieces.begin(), pieces.end());
  return rows;
}

}  // namespace ferry::bench
