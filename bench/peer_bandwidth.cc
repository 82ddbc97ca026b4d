// Bandwidth of copies between two GPUs: the engine's cross-device copy (engine::copy_peer) against
// cuMemcpyPeerAsync, same process, interleaved, the data verified after every trial. peer_<size> is
// device 0 -> device 1; peer_bidir_<size> is both directions at once (bytes counted in both). Peer
// access is enabled both ways where the devices allow it (else the driver copies through the host,
// and the description says so). With fewer than two devices nothing is measured and nothing written.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

using bench::check;

std::vector<std::uint8_t> random_bytes(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> out(bytes);
  std::mt19937_64 generator(seed);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(out.data() + i, &word, 8);
  }
  return out;
}

// The engine's completions of one run: handlers (on the engine's io thread) count down, and the
// measuring thread spins until all have arrived, as the raw side spins in cuStreamSynchronize (a
// future would add a thread hop to ferry's time). It yields as it spins: where cores are few (the
// sim on a small machine) a bare spin starves the threads doing the copy.
class pending_completions {
 public:
  explicit pending_completions(int count) : left_(count) {}
  auto handler() {
    return [this](boost::system::error_code error, std::size_t) {
      if (error) failure_ = error;
      left_.fetch_sub(1, std::memory_order_release);
    };
  }
  void wait() {
    while (left_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    if (failure_) throw boost::system::system_error(failure_);
  }

 private:
  std::atomic<int> left_;
  boost::system::error_code failure_;
};

// Device memory of one context: a source holding random bytes and a destination the runs write.
struct device_side {
  device_side(context_ref owner, std::size_t bytes, std::uint64_t seed)
      : owner(owner), content(random_bytes(bytes, seed)), source(allocate(bytes)), destination(allocate(bytes)) {
    context_guard in_owner(owner);
    poke_array(bytes, content.data(), source.get());
  }
  device_buffer<std::uint8_t> allocate(std::size_t bytes) const {
    context_guard in_owner(owner);
    return device_buffer<std::uint8_t>::allocate(bytes);
  }
  // Throws unless the destination holds `expected`, then poisons it for the next run.
  void verify_destination(const std::vector<std::uint8_t>& expected, const std::string& what) const {
    context_guard in_owner(owner);
    std::vector<std::uint8_t> back(expected.size(), 0xA5);
    peek_array(back.size(), device_ptr<const std::uint8_t>(destination.get()), back.data());
    if (back != expected) throw std::runtime_error(what + ": data differs after the run");
    memset(destination.get(), back.size(), std::uint8_t{0xA5});
  }

  context_ref owner;
  std::vector<std::uint8_t> content;
  device_buffer<std::uint8_t> source, destination;
};

std::string size_name(std::size_t bytes) { return std::to_string(bytes >> 20) + "MiB"; }

std::string machine_name(const bench::options& options, bool sim, const std::string& first, const std::string& second) {
  if (!options.machine.empty()) return options.machine;
  if (sim) return "sim";
  const bool both_h200 = first.find("H200") != std::string::npos && second.find("H200") != std::string::npos;
  return both_h200 ? "h200x2" : "gpux2";
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::options options = bench::parse_options(argc, argv);
  const int devices = device::count();
  if (devices < 2) {
    std::cout << "peer_bandwidth: needs two devices, found " << devices << "; nothing measured\n";
    return 0;
  }
  const bool sim = active_backend() == backend::sim;
  context first = context::primary(device::get(0));
  context second = context::primary(device::get(1));
  context_guard guard(first);
  const auto& raw = detail::driver();
  const std::string names = device::get(0).name() + " -> " + device::get(1).name();
  std::cerr << "ferry peer_bandwidth on the " << to_string(active_backend()) << " backend: " << names << "\n";

  // Peer access both ways where the devices are peers: the copies then go straight over the link.
  const bool peers = can_access_peer(device::get(0), device::get(1)) && can_access_peer(device::get(1), device::get(0));
  if (peers) {
    enable_peer_access(second);
    context_guard in_second(second);
    enable_peer_access(first);
  }
  const std::string description =
      names + (peers ? ", peer access enabled both ways" : ", not peers: copies go through the host");
  std::cerr << "  " << description << "\n";

  // The simulation copies with memcpy on two cores: the same runs, smaller.
  const std::size_t bytes = sim ? std::size_t{16} << 20 : std::size_t{256} << 20;
  device_side on_first(first, bytes, 11), on_second(second, bytes, 12);

  // The engine's completions run on one io thread, stopped and joined on any exit.
  asio::io_context io;
  struct io_thread {
    asio::io_context& io;
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
    std::thread runner{[this] { io.run(); }};
    ~io_thread() {
      work.reset();
      runner.join();
    }
  } completions_thread{io};
  engine gpu{io.get_executor()};
  stream raw_stream = stream::create();
  stream raw_stream_2 = stream::create();

  auto ferry_forward = [&](pending_completions& done) {
    gpu.copy_peer(device_ptr<const std::uint8_t>(on_first.source.get()), first, on_second.destination.get(), second,
                  bytes, done.handler());
  };
  auto ferry_backward = [&](pending_completions& done) {
    gpu.copy_peer(device_ptr<const std::uint8_t>(on_second.source.get()), second, on_first.destination.get(), first,
                  bytes, done.handler());
  };
  auto raw_forward = [&](CUstream s) {
    check(raw.cuMemcpyPeerAsync(on_second.destination.get().get(), second.get(), on_first.source.get().get(),
                                first.get(), bytes, s),
          "cuMemcpyPeerAsync");
  };
  auto raw_backward = [&](CUstream s) {
    check(raw.cuMemcpyPeerAsync(on_first.destination.get().get(), first.get(), on_second.source.get().get(),
                                second.get(), bytes, s),
          "cuMemcpyPeerAsync");
  };
  auto verify_forward = [&] { on_second.verify_destination(on_first.content, "peer (0 -> 1)"); };
  auto verify_backward = [&] { on_first.verify_destination(on_second.content, "peer (1 -> 0)"); };

  std::vector<bench::result> results;
  const std::string tag = size_name(bytes);
  results.push_back(bench::compare({"peer_" + tag, bytes, 1, 2, 7,
                                    [&] {
                                      pending_completions done(1);
                                      ferry_forward(done);
                                      done.wait();
                                    },
                                    [&] {
                                      raw_forward(raw_stream.get());
                                      check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
                                    },
                                    verify_forward}));
  // Both directions at once: two copies on the engine's pool streams against two raw streams.
  results.push_back(bench::compare({"peer_bidir_" + tag, 2 * bytes, 1, 2, 7,
                                    [&] {
                                      pending_completions done(2);
                                      ferry_forward(done);
                                      ferry_backward(done);
                                      done.wait();
                                    },
                                    [&] {
                                      raw_forward(raw_stream.get());
                                      raw_backward(raw_stream_2.get());
                                      check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
                                      check(raw.cuStreamSynchronize(raw_stream_2.get()), "cuStreamSynchronize");
                                    },
                                    [&] {
                                      verify_forward();
                                      verify_backward();
                                    }}));

  const std::string machine = machine_name(options, sim, device::get(0).name(), device::get(1).name());
  bench::write_report(results, options.out_dir, machine + "-peer", description, std::string(to_string(active_backend())));
  return 0;
} catch (const std::exception& error) {
  std::cerr << "peer_bandwidth: " << error.what() << "\n";
  return 1;
}
