// Many small copies as one block list (engine::poke_blocks / peek_blocks) against the raw driver's way
// of making them, same process, interleaved: a loop of one cuMemcpyHtoDAsync (or DtoH) per block, then
// a stream sync. 1024 blocks of 4 KiB (or 64 KiB) between consecutive host places and device places in
// a random order, so that neither side is one contiguous copy. Pinned rows read and write page-locked
// memory; pageable rows ordinary heap memory on both sides (the driver stages those copies itself; ferry
// packs 4 KiB blocks into one staging chunk and stages the 64 MiB of 64 KiB blocks chunk by chunk).
// Rows: many_small_{4KiB,64KiB}_{pinned,pageable}_{h2d,d2h} (the engine's automatic choice of path),
// many_small_{4KiB,64KiB}_pinned_{h2d,d2h}_copy_engine and many_small_64KiB_pageable_{h2d,d2h}_copy_engine
// (the lists forced onto cuMemcpyBatchAsync),
// many_small_4KiB_pageable_{h2d,d2h}_staged[_copy_engine] (the 4 KiB pageable lists staged through
// chunks of 1 MiB, by the engine's choice or forced onto the copy engine), and
// list_{8x8MiB,64x1MiB,256x256KiB}_pinned_{h2d,d2h}[_kernel,_copy_engine] (page-locked lists of a few
// large blocks).
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/io_thread.hpp"
#include "bench/harness/program.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/trace/stage_marks.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

using bench::check;

// Host memory of one kind, as the block list's host views name it.
template <class T>
using pinned_view = pinned_span<T>;
template <class T>
using pageable_view = std::span<T>;

// One shape of list (`blocks` blocks of `block_bytes`): the host buffers (page-locked and pageable), the
// device area, where block i lives on the device (a random permutation of the slots), the expected bytes.
struct block_setup {
  explicit block_setup(std::size_t block_bytes, std::size_t blocks = 1024)
      : blocks(blocks),
        block_bytes(block_bytes),
        pinned_source(pinned_buffer<std::uint8_t>::allocate(blocks * block_bytes)),
        pinned_back(pinned_buffer<std::uint8_t>::allocate(blocks * block_bytes)),
        pageable_source(blocks * block_bytes),
        pageable_back(blocks * block_bytes),
        device(device_buffer<std::uint8_t>::allocate(blocks * block_bytes)),
        slot(blocks) {
    std::mt19937_64 generator(11);
    expected.resize(blocks * block_bytes);
    for (auto& byte : expected) byte = static_cast<std::uint8_t>(generator());
    std::memcpy(pinned_source.data(), expected.data(), expected.size());
    std::memcpy(pageable_source.data(), expected.data(), expected.size());
    std::iota(slot.begin(), slot.end(), 0);
    std::shuffle(slot.begin(), slot.end(), generator);
  }

  CUdeviceptr device_place(std::size_t i) const { return device.get().get() + slot[i] * block_bytes; }

  // The device holds block i at its slot: checks every byte, then poisons the area for the next run.
  void verify_device() {
    std::vector<std::uint8_t> there(expected.size());
    check(raw.cuMemcpyDtoH(there.data(), device.get().get(), there.size()), "cuMemcpyDtoH");
    for (std::size_t i = 0; i < blocks; ++i) {
      if (std::memcmp(there.data() + slot[i] * block_bytes, expected.data() + i * block_bytes, block_bytes) != 0) {
        throw std::runtime_error("block " + std::to_string(i) + " differs on the device after the run");
      }
    }
    check(raw.cuMemsetD8(device.get().get(), 0xA5, there.size()), "cuMemsetD8");
  }
  // Peeks: the device holds every block at its slot; `back` must receive them in order.
  void fill_device() {
    for (std::size_t i = 0; i < blocks; ++i) {
      check(raw.cuMemcpyHtoD(device_place(i), expected.data() + i * block_bytes, block_bytes), "cuMemcpyHtoD");
    }
  }
  void verify_back(std::uint8_t* back) {
    if (std::memcmp(back, expected.data(), expected.size()) != 0) throw std::runtime_error("peeked blocks differ");
    std::memset(back, 0xA5, expected.size());
  }

  const detail::driver_table& raw = detail::driver();
  std::size_t blocks;
  std::size_t block_bytes;
  pinned_buffer<std::uint8_t> pinned_source;
  pinned_buffer<std::uint8_t> pinned_back;
  std::vector<std::uint8_t> pageable_source;
  std::vector<std::uint8_t> pageable_back;
  device_buffer<std::uint8_t> device;
  std::vector<std::size_t> slot;
  std::vector<std::uint8_t> expected;
  stream raw_stream = stream::create();
};

template <template <class> class View, class T>
View<T> view_of(T* data, std::size_t size) {
  if constexpr (std::is_same_v<View<T>, pinned_span<T>>) {
    return View<T>(host_ptr<T>(data), size);
  } else {
    return View<T>(data, size);
  }
}

// One row: the list poked (or peeked) by `gpu`, against the raw loop over the same places.
template <template <class> class View>
bench::comparison_spec list_case(block_setup& s, engine& gpu, std::string name, bool peeks, std::uint8_t* source,
                                 std::uint8_t* back, transfer_options per_call) {
  using poke_block = block_pair<View<const std::uint8_t>, std::uint8_t>;
  using peek_block = block_pair<View<std::uint8_t>, const std::uint8_t>;
  auto pokes = std::make_shared<std::vector<poke_block>>();
  auto peeks_list = std::make_shared<std::vector<peek_block>>();
  for (std::size_t i = 0; i < s.blocks; ++i) {
    const CUdeviceptr place = s.device_place(i);
    pokes->push_back({view_of<View>(static_cast<const std::uint8_t*>(source + i * s.block_bytes), s.block_bytes),
                      device_ptr<std::uint8_t>(place)});
    peeks_list->push_back({view_of<View>(back + i * s.block_bytes, s.block_bytes), device_ptr<const std::uint8_t>(place)});
  }
  // The measuring thread spins until the handler has run, as the raw side spins in cuStreamSynchronize
  // (a future would add a parked thread's wake-up to ferry's time); it yields as it spins, so that where
  // cores are few (the sim on a small machine) the threads doing the copy are not starved.
  auto ferry_run = [&gpu, pokes, peeks_list, peeks, per_call] {
    std::atomic<bool> done{false};
    boost::system::error_code failure;
    auto handler = [&done, &failure](boost::system::error_code error, std::size_t) {
      failure = error;
      done.store(true, std::memory_order_release);
    };
    if (peeks) {
      gpu.peek_blocks(*peeks_list, per_call, handler);
    } else {
      gpu.poke_blocks(*pokes, per_call, handler);
    }
    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
    if (failure) throw boost::system::system_error(failure);
  };
  auto raw_run = [&s, peeks, source, back] {
    for (std::size_t i = 0; i < s.blocks; ++i) {
      const CUresult status =
          peeks ? s.raw.cuMemcpyDtoHAsync(back + i * s.block_bytes, s.device_place(i), s.block_bytes, s.raw_stream.get())
                : s.raw.cuMemcpyHtoDAsync(s.device_place(i), source + i * s.block_bytes, s.block_bytes,
                                          s.raw_stream.get());
      check(status, peeks ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync");
    }
    check(s.raw.cuStreamSynchronize(s.raw_stream.get()), "cuStreamSynchronize");
  };
  auto verify = [&s, peeks, back] {
    if (peeks) {
      s.verify_back(back);
    } else {
      s.verify_device();
    }
  };
  return {std::move(name), s.blocks * s.block_bytes, 1, 2, 9, ferry_run, raw_run, verify};
}

// Where a list's time goes: the initiating call (checks, descriptors, enqueue), the GPU's time for the
// list (events on a stream of the caller's around it, so it starts before the call), when the handler
// ran, and when the waiting thread saw it; for pokes and peeks, back to back and after an idle pause as
// long as a bench trial's (the raw side's loop and the verification run between two of ferry's lists).
// The initiating call split by the engine's stage marks (engine/trace/stage_marks.hpp, in a build with
// them: tools/ferry bench --stage-marks block_lists): the way to the checks,
// the checks (which read the caller's list and write the copies where the GPU reads them), the way to
// the stream, the launch's driver call, the completion flag's write, and the op's bookkeeping until the
// call returns. Printed, not a result row.
void print_where_the_time_goes(block_setup& s, engine& gpu, bool peeks, std::chrono::microseconds idle) {
  std::vector<block_pair<pinned_span<const std::uint8_t>, std::uint8_t>> pokes;
  std::vector<block_pair<pinned_span<std::uint8_t>, const std::uint8_t>> peeks_list;
  for (std::size_t i = 0; i < s.blocks; ++i) {
    pokes.push_back({view_of<pinned_view>(static_cast<const std::uint8_t*>(s.pinned_source.data() + i * s.block_bytes),
                                          s.block_bytes),
                     device_ptr<std::uint8_t>(s.device_place(i))});
    peeks_list.push_back({view_of<pinned_view>(s.pinned_back.data() + i * s.block_bytes, s.block_bytes),
                          device_ptr<const std::uint8_t>(s.device_place(i))});
  }
  stream on = stream::create();
  CUevent before = nullptr;
  CUevent after = nullptr;
  check(s.raw.cuEventCreate(&before, CU_EVENT_DEFAULT), "cuEventCreate");
  check(s.raw.cuEventCreate(&after, CU_EVENT_DEFAULT), "cuEventCreate");
  constexpr int rounds = 50;
  using clock = std::chrono::steady_clock;
  const auto micros = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  double initiating = 0;
  double gpu_time = 0;
  double handler = 0;
  double whole = 0;
  using detail::stage_trace::stage;
  // From the call's start: the marks that end each part of the call.
  constexpr std::array<stage, 6> part_ends{stage::prepare_begins, stage::prepare_ends,   stage::enqueue_begins,
                                           stage::copy_enqueued,  stage::flag_enqueued, stage::initiating_call_returns};
  std::array<double, part_ends.size()> parts{};
  int traced = 0;  // rounds that passed every mark (an op may take another way to its stream)
  detail::stage_trace::enabled = true;
  for (int r = 0; r < rounds; ++r) {
    for (auto& at : detail::stage_trace::reached) at.store(0);
    if (idle.count() > 0) std::this_thread::sleep_for(idle);
    std::atomic<bool> done{false};
    clock::time_point handler_ran;
    auto on_done = [&done, &handler_ran](boost::system::error_code error, std::size_t) {
      if (error) throw boost::system::system_error(error);
      handler_ran = clock::now();
      done.store(true, std::memory_order_release);
    };
    check(s.raw.cuEventRecord(before, on.get()), "cuEventRecord");
    const auto start = clock::now();
    if (peeks) {
      gpu.peek_blocks(peeks_list, transfer_options{on}, on_done);
    } else {
      gpu.poke_blocks(pokes, transfer_options{on}, on_done);
    }
    const auto returned = clock::now();
    detail::stage_trace::mark(stage::initiating_call_returns);
    check(s.raw.cuEventRecord(after, on.get()), "cuEventRecord");
    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
    const auto completed = clock::now();
    check(s.raw.cuEventSynchronize(after), "cuEventSynchronize");
    float milliseconds = 0;
    check(s.raw.cuEventElapsedTime(&milliseconds, before, after), "cuEventElapsedTime");
    std::array<std::int64_t, part_ends.size() + 1> marks{start.time_since_epoch().count()};
    for (std::size_t k = 0; k < part_ends.size(); ++k) {
      marks[k + 1] = detail::stage_trace::reached[static_cast<std::size_t>(part_ends[k])].load();
    }
    if (std::is_sorted(marks.begin(), marks.end()) && marks[1] != 0) {
      for (std::size_t k = 0; k < parts.size(); ++k) parts[k] += (marks[k + 1] - marks[k]) / 1000.0;
      ++traced;
    }
    initiating += micros(returned - start);
    handler += micros(handler_ran - start);
    whole += micros(completed - start);
    gpu_time += 1000.0 * milliseconds;
  }
  detail::stage_trace::enabled = false;
  s.raw.cuEventDestroy(before);
  s.raw.cuEventDestroy(after);
  std::cerr << "block_lists: " << (peeks ? "peek" : "poke") << " of " << s.blocks << " blocks of " << s.block_bytes
            << " bytes, " << idle.count() << " us idle before each (mean of " << rounds << "): initiating call "
            << initiating / rounds << " us, on the GPU " << gpu_time / rounds << " us, handler ran at "
            << handler / rounds << " us, seen at " << whole / rounds << " us\n";
  if (traced > 0) {
    const char* names[] = {"to the checks", "checks (the list read, the copies written)", "to the stream", "launch",
                           "flag", "bookkeeping"};
    std::cerr << "block_lists:   the call (mean of " << traced << " traced):";
    for (std::size_t k = 0; k < parts.size(); ++k) {
      std::cerr << (k == 0 ? " " : ", ") << names[k] << " " << parts[k] / traced;
    }
    std::cerr << " us\n";
  }
}

// Every row for the size, and beside them the lists forced onto cuMemcpyBatchAsync: the pinned ones', and
// the staged pageable ones' for 64 KiB blocks.
std::vector<bench::result> lists_of(std::size_t block_bytes) {
  const bool small = block_bytes == 4096;
  asio::io_context io(1);
  const bench::io_thread runs_handlers(io);  // the handlers' executor
  engine gpu{io.get_executor()};
  block_setup s(block_bytes);
  const std::string size = block_bytes == 4096 ? "4KiB" : "64KiB";
  std::vector<bench::comparison_spec> pokes{list_case<pinned_view>(s, gpu, "many_small_" + size + "_pinned_h2d", false,
                                                                   s.pinned_source.data(), nullptr, {})};
  pokes.push_back(list_case<pinned_view>(s, gpu, "many_small_" + size + "_pinned_h2d_copy_engine", false,
                                         s.pinned_source.data(), nullptr, batch_path::copy_engine));
  // 1024 pageable 64 KiB blocks (64 MiB) are more than a staging chunk packs: staged chunk by chunk.
  pokes.push_back(list_case<pageable_view>(s, gpu, "many_small_" + size + "_pageable_h2d", false,
                                           s.pageable_source.data(), nullptr, {}));
  if (!small) {
    pokes.push_back(list_case<pageable_view>(s, gpu, "many_small_" + size + "_pageable_h2d_copy_engine", false,
                                             s.pageable_source.data(), nullptr, batch_path::copy_engine));
  }
  std::vector<bench::result> rows = bench::compare_all(std::move(pokes));
  s.fill_device();
  std::memset(s.pinned_back.data(), 0xA5, s.pinned_back.size());
  std::memset(s.pageable_back.data(), 0xA5, s.pageable_back.size());
  std::vector<bench::comparison_spec> peeks{
      list_case<pinned_view>(s, gpu, "many_small_" + size + "_pinned_d2h", true, nullptr, s.pinned_back.data(), {}),
      list_case<pinned_view>(s, gpu, "many_small_" + size + "_pinned_d2h_copy_engine", true, nullptr,
                             s.pinned_back.data(), batch_path::copy_engine),
      list_case<pageable_view>(s, gpu, "many_small_" + size + "_pageable_d2h", true, nullptr, s.pageable_back.data(),
                               {})};
  if (!small) {
    peeks.push_back(list_case<pageable_view>(s, gpu, "many_small_" + size + "_pageable_d2h_copy_engine", true, nullptr,
                                             s.pageable_back.data(), batch_path::copy_engine));
  }
  for (bench::result& row : bench::compare_all(std::move(peeks))) rows.push_back(std::move(row));
  for (const bool peeks : {false, true}) {
    for (const std::chrono::microseconds idle : {std::chrono::microseconds(0), std::chrono::microseconds(2000)}) {
      print_where_the_time_goes(s, gpu, peeks, idle);
    }
  }
  const plan_counts counted = gpu.plan_counts();
  std::cerr << "block_lists (" << size << " blocks): " << counted.kernel_block_lists << " lists by kernel, "
            << counted.copy_engine_block_lists << " by copy engine, " << counted.staged << " staged chunk by chunk\n";
  return rows;
}

std::vector<bench::result> small_blocks(int&) { return lists_of(4096); }
std::vector<bench::result> large_blocks(int&) { return lists_of(std::size_t{64} << 10); }

// Pageable 4 KiB blocks through staging chunks of 1 MiB: staged chunk by chunk, each chunk's pieces by one
// launch (the engine's choice; about 255 pieces beside their descriptors) or by one cuMemcpyBatchAsync
// (256 pieces).
std::vector<bench::result> staged_small_blocks(int&) {
  asio::io_context io(1);
  const bench::io_thread runs_handlers(io);
  engine_options options;
  options.staging_chunk_bytes = std::size_t{1} << 20;
  engine gpu{io.get_executor(), options};
  block_setup s(4096);
  std::vector<bench::result> rows = bench::compare_all({
      list_case<pageable_view>(s, gpu, "many_small_4KiB_pageable_h2d_staged", false, s.pageable_source.data(),
                               nullptr, {}),
      list_case<pageable_view>(s, gpu, "many_small_4KiB_pageable_h2d_staged_copy_engine", false,
                               s.pageable_source.data(), nullptr, batch_path::copy_engine),
  });
  s.fill_device();
  std::memset(s.pageable_back.data(), 0xA5, s.pageable_back.size());
  for (bench::result& row : bench::compare_all({
           list_case<pageable_view>(s, gpu, "many_small_4KiB_pageable_d2h_staged", true, nullptr,
                                    s.pageable_back.data(), {}),
           list_case<pageable_view>(s, gpu, "many_small_4KiB_pageable_d2h_staged_copy_engine", true, nullptr,
                                    s.pageable_back.data(), batch_path::copy_engine),
       })) {
    rows.push_back(std::move(row));
  }
  const plan_counts counted = gpu.plan_counts();
  std::cerr << "block_lists (4KiB blocks, 1 MiB chunks): " << counted.kernel_block_lists << " lists by kernel, "
            << counted.copy_engine_block_lists << " by copy engine, " << counted.staged << " staged chunk by chunk\n";
  return rows;
}

// Page-locked lists of a few large blocks (8 of 8 MiB, 64 of 1 MiB, 256 of 256 KiB: 64 MiB each way), by
// the engine's automatic choice, forced onto the kernel (one block of threads per listed block) and forced
// onto cuMemcpyBatchAsync.
std::vector<bench::result> large_pinned_blocks(int&) {
  asio::io_context io(1);
  const bench::io_thread runs_handlers(io);
  engine gpu{io.get_executor()};
  std::vector<bench::result> rows;
  for (const auto& [count, kibibytes] : {std::pair<std::size_t, std::size_t>{8, 8192}, {64, 1024}, {256, 256}}) {
    block_setup s(kibibytes << 10, count);
    const std::string size = kibibytes % 1024 == 0 ? std::to_string(kibibytes / 1024) + "MiB"
                                                   : std::to_string(kibibytes) + "KiB";
    const std::string shape = "list_" + std::to_string(count) + "x" + size + "_pinned_";
    for (bench::result& row : bench::compare_all({
             list_case<pinned_view>(s, gpu, shape + "h2d", false, s.pinned_source.data(), nullptr, {}),
             list_case<pinned_view>(s, gpu, shape + "h2d_kernel", false, s.pinned_source.data(), nullptr,
                                    batch_path::kernel),
             list_case<pinned_view>(s, gpu, shape + "h2d_copy_engine", false, s.pinned_source.data(), nullptr,
                                    batch_path::copy_engine),
         })) {
      rows.push_back(std::move(row));
    }
    s.fill_device();
    std::memset(s.pinned_back.data(), 0xA5, s.pinned_back.size());
    for (bench::result& row : bench::compare_all({
             list_case<pinned_view>(s, gpu, shape + "d2h", true, nullptr, s.pinned_back.data(), {}),
             list_case<pinned_view>(s, gpu, shape + "d2h_kernel", true, nullptr, s.pinned_back.data(),
                                    batch_path::kernel),
             list_case<pinned_view>(s, gpu, shape + "d2h_copy_engine", true, nullptr, s.pinned_back.data(),
                                    batch_path::copy_engine),
         })) {
      rows.push_back(std::move(row));
    }
  }
  const plan_counts counted = gpu.plan_counts();
  std::cerr << "block_lists (large pinned blocks): " << counted.kernel_block_lists << " lists by kernel, "
            << counted.copy_engine_block_lists << " by copy engine\n";
  return rows;
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::comparison_program program(argc, argv);
  const std::string device_name = program.on.gpu.name();
  std::cerr << "ferry block_lists on the " << program.backend << " backend: " << device_name << "\n";
  int unused = 0;
  program.report(bench::run_groups(unused, {small_blocks, large_blocks, staged_small_blocks, large_pinned_blocks}),
                 "blocks", device_name);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "block_lists: " << error.what() << "\n";
  return 1;
}
