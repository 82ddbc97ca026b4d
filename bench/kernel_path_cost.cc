// What the engine's kernel path for batched small copies costs a compute kernel running beside it, and
// the copy-engine path for comparison: a compute kernel (bench/kernels/compute_spin.cu, FMA-bound, many
// waves of blocks over every SM) is timed with CUDA events alone and while rounds of 1024 concurrent
// 4 KiB pokes from page-locked memory are batched and moved during it. ferry = the compute kernel's time
// with the copies beside it, raw = its time alone (same run, interleaved trials), so the ratio is the
// fraction of the compute kernel's speed the copies leave it (1 = they cost it nothing). The copies'
// throughput during the kernel, and with no kernel running, is printed to stderr for each path.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/program.hpp"
#include "bench/harness/statistics.hpp"
#include "bench/harness/test_data.hpp"
#include "bench/kernels/compute_spin.hpp"
#include "bench/kernels/fatbin.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kernel_module.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t poke_bytes = 4096;
constexpr int concurrent_ops = 1024;
constexpr int warmups = 2;
constexpr int trials = 7;
// On a GPU the chains' length is calibrated so that the kernel alone takes about this long: long enough
// for several rounds of copies to run beside it, short enough for many trials.
constexpr double target_kernel_seconds = 10e-3;
// Waves of blocks (one wave: every SM full): many short blocks, so that the block scheduler can give an
// SM that a block leaves to the copy kernel, as it would beside a real workload.
constexpr std::uint64_t gpu_waves = 16;
// The sim's twin runs every thread on one host core: one wave of a few iterations keeps a run short.
constexpr std::uint64_t sim_iterations = 4;

using bench::check;
using bench::kernels::spin_block_threads;

constexpr const char* kernel_names[] = {"ferry_bench_compute_spin"};

// Never deleted, as kernel_module asks: the driver unloads the modules of live contexts at exit.
kernel_module& spin_module() {
  static kernel_module* const instance = new kernel_module(bench::kernels::fatbin(), kernel_names);
  return *instance;
}

struct fixture {
  const detail::driver_table& raw = detail::driver();
  const bool simulated = detail::active_backend() == detail::backend_kind::sim;
  stream compute = stream::create();
  CUevent start = event();
  CUevent end = event();
  unsigned blocks = 0;
  std::uint64_t iterations = sim_iterations;
  device_buffer<std::uint32_t> output;
  std::vector<float> lane_results;  // each lane's chains on the host: what every thread must write
  pinned_buffer<std::uint8_t> source = pinned_buffer<std::uint8_t>::allocate(poke_bytes * concurrent_ops);
  device_buffer<std::uint8_t> destination = device_buffer<std::uint8_t>::allocate(poke_bytes * concurrent_ops);
  std::vector<std::uint8_t> expected = bench::random_bytes(poke_bytes * concurrent_ops, 11);

  fixture();
  fixture(const fixture&) = delete;
  fixture& operator=(const fixture&) = delete;
  ~fixture() {
    raw.cuEventDestroy(start);
    raw.cuEventDestroy(end);
  }
  std::uint64_t threads() const { return std::uint64_t{blocks} * spin_block_threads; }

  // Timing-enabled: the compute kernel is timed between two of these on its stream.
  CUevent event() const {
    CUevent made = nullptr;
    check(raw.cuEventCreate(&made, CU_EVENT_DEFAULT), "cuEventCreate");
    return made;
  }
};

// Clears the output (and the copies' destination) in stream order, then waits, so that a trial's check
// sees only what its run wrote and the copies never race the clearing.
void clear(fixture& s, bool destination) {
  check(s.raw.cuMemsetD32Async(s.output.get().get(), 0, s.threads(), s.compute.get()), "cuMemsetD32Async");
  if (destination) {
    check(s.raw.cuMemsetD8Async(s.destination.get().get(), 0xA5, poke_bytes * concurrent_ops, s.compute.get()),
          "cuMemsetD8Async");
  }
  check(s.raw.cuStreamSynchronize(s.compute.get()), "cuStreamSynchronize");
}

// The compute kernel on its stream between the two events; returns at once.
void launch_between_events(fixture& s) {
  bench::kernels::compute_spin_parameters p{s.output.get().get(), s.threads(), s.iterations};
  void* params[] = {&p};
  check(s.raw.cuEventRecord(s.start, s.compute.get()), "cuEventRecord");
  spin_module().launch(0, launch_shape{{s.blocks}, {spin_block_threads}}, params, s.compute);
  check(s.raw.cuEventRecord(s.end, s.compute.get()), "cuEventRecord");
}

double kernel_seconds(fixture& s) {
  check(s.raw.cuEventSynchronize(s.end), "cuEventSynchronize");
  float milliseconds = 0;
  check(s.raw.cuEventElapsedTime(&milliseconds, s.start, s.end), "cuEventElapsedTime");
  return milliseconds * 1e-3;
}

// The compute kernel alone: its event time.
double time_alone(fixture& s) {
  clear(s, false);
  launch_between_events(s);
  return kernel_seconds(s);
}

// Grid: whole waves of blocks, a wave being the threads the device keeps resident (SMs x threads per SM),
// so that every SM is full. Chains: on a GPU, scaled from a probe so the kernel takes about
// target_kernel_seconds (the time is linear in them: the kernel is bound by FMA throughput).
fixture::fixture() {
  const std::uint64_t wave = spin_module().resident_threads() / spin_block_threads;
  blocks = static_cast<unsigned>(wave * (simulated ? 1 : gpu_waves));
  output = device_buffer<std::uint32_t>::allocate(threads());
  std::memcpy(source.data(), expected.data(), expected.size());
  if (!simulated) {
    iterations = 1024;
    time_alone(*this);  // loads the module and warms the GPU's clocks before the probe
    const double probe = time_alone(*this);
    iterations = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(iterations * target_kernel_seconds / probe));
  }
  for (std::uint64_t lane = 0; lane < 32; ++lane) lane_results.push_back(bench::kernels::spin_lane(lane, iterations));
}

// Every output word is its thread's result; with `copies`, every destination byte is the source's.
void verify(fixture& s, bool copies) {
  std::vector<std::uint32_t> words(s.threads());
  check(s.raw.cuMemcpyDtoH(words.data(), s.output.get().get(), words.size() * sizeof(std::uint32_t)), "cuMemcpyDtoH");
  for (std::uint64_t thread = 0; thread < words.size(); ++thread) {
    if (words[thread] != bench::kernels::spin_word(s.lane_results[thread % 32], thread)) {
      throw std::runtime_error("compute kernel: output word " + std::to_string(thread) + " differs");
    }
  }
  if (!copies) return;
  std::vector<std::uint8_t> back(s.expected.size(), 0);
  check(s.raw.cuMemcpyDtoH(back.data(), s.destination.get().get(), back.size()), "cuMemcpyDtoH");
  bench::require_equal(back.data(), s.expected.data(), back.size(), "copies beside the compute kernel");
}

// What the copies achieved while the compute kernel ran, over every run with copies beside it.
struct copy_tally {
  std::uint64_t rounds = 0;
  std::uint64_t runs = 0;
  double seconds = 0;
};

// One round: 1024 concurrent 4 KiB pokes from coroutines, given no stream so that the engine batches
// them, run until every one has completed.
void poke_round(fixture& s, engine& gpu, asio::io_context& io) {
  int done = 0;
  for (int i = 0; i < concurrent_ops; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      co_await gpu.poke(pinned_span(host_ptr<const std::uint8_t>(s.source.get() + i * poke_bytes), poke_bytes),
                        s.destination.get() + i * poke_bytes, asio::use_awaitable);
      ++done;
    }, asio::detached);
  }
  io.restart();
  io.run();
  if (done != concurrent_ops) throw std::runtime_error("poke round: not every poke completed");
}

// The compute kernel with rounds of copies started right after its launch and repeated until its end
// event has completed: its event time.
double time_beside_copies(fixture& s, engine& gpu, asio::io_context& io, copy_tally& tally) {
  clear(s, true);
  launch_between_events(s);
  const auto copies_start = clock_type::now();
  CUresult status = CUDA_ERROR_NOT_READY;
  do {
    poke_round(s, gpu, io);
    ++tally.rounds;
  } while ((status = s.raw.cuEventQuery(s.end)) == CUDA_ERROR_NOT_READY);
  check(status, "cuEventQuery");
  tally.seconds += std::chrono::duration<double>(clock_type::now() - copies_start).count();
  ++tally.runs;
  return kernel_seconds(s);
}

// The trials' event times: compare() runs each side warmups + trials times, the warm-ups first.
double median_of_trials(const std::vector<double>& times) {
  return bench::median(std::vector<double>(times.end() - trials, times.end()));
}

// The same rounds with no compute kernel running: what the copies reach when they have the GPU to
// themselves, which the throughput beside the kernel is read against.
double copies_alone_gbps(fixture& s, engine& gpu, asio::io_context& io) {
  constexpr int rounds = 5;
  const auto start = clock_type::now();
  for (int i = 0; i < rounds; ++i) poke_round(s, gpu, io);
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return static_cast<double>(rounds) * concurrent_ops * poke_bytes / seconds / 1e9;
}

void print_copies(const char* path, const copy_tally& tally, double alone_gbps) {
  const double bytes = static_cast<double>(tally.rounds) * concurrent_ops * poke_bytes;
  std::fprintf(stderr,
               "  copies beside the compute kernel (%s batches): %.3f GB/s (%.3f GB/s with no kernel running), "
               "%.1f rounds of %d x 4 KiB per run\n",
               path, bytes / tally.seconds / 1e9, alone_gbps, static_cast<double>(tally.rounds) / tally.runs,
               concurrent_ops);
}

// The compute kernel with copies beside it, batched by one engine taking `path`, against it alone.
std::vector<bench::result> compute_beside(fixture& s, batch_path path, const std::string& row) {
  asio::io_context io(1);
  engine_options options;
  options.batching = path;
  engine gpu{io.get_executor(), options};
  std::vector<double> beside, alone;
  copy_tally tally;
  bench::result result = bench::compare({row, 0, 1, warmups, trials,
                                         [&] { beside.push_back(time_beside_copies(s, gpu, io, tally)); },
                                         [&] { alone.push_back(time_alone(s)); }, [&] { verify(s, true); }, nullptr,
                                         [&] { verify(s, false); }});
  // The harness timed each run on the host clock, copies' drain included: the row reports the kernel's
  // own event times instead.
  result.ferry_seconds = median_of_trials(beside);
  result.raw_seconds = median_of_trials(alone);
  const plan_counts counts = gpu.plan_counts();
  const std::size_t path_batches = path == batch_path::kernel ? counts.kernel_batches : counts.copy_engine_batches;
  if (path_batches == 0) throw std::runtime_error(row + ": no batch took the path under test");
  print_copies(std::string(to_string(path)).c_str(), tally, copies_alone_gbps(s, gpu, io));
  return {result};
}

std::vector<bench::result> beside_kernel_batches(fixture& s) {
  return compute_beside(s, batch_path::kernel, "kernel_path_compute_slowdown");
}

std::vector<bench::result> beside_copy_engine_batches(fixture& s) {
  return compute_beside(s, batch_path::copy_engine, "copy_engine_path_compute_slowdown");
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::comparison_program program(
      argc, argv,
      "what batched small copies cost a compute kernel beside them, per batch path (kernel, copy engine):\n"
      "the kernel's time alone against its time with the copies; the report goes to\n"
      "<out>/<machine>-kernel-path.{json,md}");
  const std::string device_name = program.on.gpu.name();
  std::cerr << "ferry kernel_path_cost on the " << program.backend << " backend: " << device_name << "\n";
  fixture s;
  std::fprintf(stderr, "  compute kernel: %u blocks of %u threads, %llu FMAs per thread\n", s.blocks, spin_block_threads,
               static_cast<unsigned long long>(s.iterations * bench::kernels::spin_chains));
  program.report(bench::run_groups(s, {beside_kernel_batches, beside_copy_engine_batches}), "kernel-path", device_name);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "kernel_path_cost: " << error.what() << "\n";
  return 1;
}
