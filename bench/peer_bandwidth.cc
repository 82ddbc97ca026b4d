// Bandwidth of copies between two GPUs: ferry's cross-device copy (a device_set of the two, which runs
// each copy on the destination's engine) against cuMemcpyPeerAsync, same process, interleaved, the data
// verified after every trial. peer_<size> is device 0 -> device 1; peer_bidir_<size> is both directions
// at once (bytes counted in both). Those two rows take ferry's automatic peer_path; the rows
// peer_<size>_<path> and peer_bidir_<size>_<path> take each path (copy_engine, split, and kernel where
// the devices are peers) against the same raw call. Each row's GB/s is also printed as a fraction of an
// H200 NVLink's ~450 GB/s per direction. Peer access is enabled both ways where the devices allow it
// (else the driver copies through the host, and the description says so). With fewer than two devices
// nothing is measured and nothing written.
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/io_thread.hpp"
#include "bench/harness/options.hpp"
#include "bench/harness/test_data.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/device_set.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

using bench::check;
using bench::random_bytes;

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

std::string machine_name(const bench::options& options, bool sim, const std::string& first, const std::string& second) {
  if (!options.machine.empty()) return options.machine;
  if (sim) return "sim";
  const bool both_h200 = first.find("H200") != std::string::npos && second.find("H200") != std::string::npos;
  return both_h200 ? "h200x2" : "gpux2";
}

// What an H200's NVLink (18 links of NVLink 4) carries per direction, for the fraction each row prints.
constexpr double link_gb_per_s = 450.0;

// The memory of the two devices' primary contexts, the device set and two raw streams.
struct peer_fixture {
  peer_fixture(context_ref first, context_ref second, std::size_t bytes)
      : bytes(bytes), on_first(first, bytes, 11), on_second(second, bytes, 12) {}

  void ferry_copy(const device_side& from, const device_side& to, peer_path path, pending_completions& done) {
    gpus.copy_peer(device_ptr<const std::uint8_t>(from.source.get()), to.destination.get(), bytes, path,
                   done.handler());
  }
  void raw_copy(const device_side& from, const device_side& to, const stream& on) const {
    check(raw.cuMemcpyPeerAsync(to.destination.get().get(), to.owner.get(), from.source.get().get(), from.owner.get(),
                                bytes, on.get()),
          "cuMemcpyPeerAsync");
  }
  void synchronize(const stream& on) const { check(raw.cuStreamSynchronize(on.get()), "cuStreamSynchronize"); }
  void verify_forward() const { on_second.verify_destination(on_first.content, "peer (0 -> 1)"); }
  void verify_backward() const { on_first.verify_destination(on_second.content, "peer (1 -> 0)"); }

  const detail::driver_table& raw = detail::driver();
  std::size_t bytes;
  device_side on_first, on_second;
  asio::io_context io;
  bench::io_thread completions{io};
  device_set gpus{io.get_executor(), {0, 1}};
  stream raw_stream = stream::create();
  stream raw_stream_2 = stream::create();
};

// peer_<size>[_<path>]: device 0 -> device 1; peer_bidir_<size>[_<path>]: both at once, each direction on
// its destination's engine against two raw streams. No suffix: ferry's automatic path.
std::vector<bench::comparison_spec> path_cases(peer_fixture& f, peer_path path) {
  const std::string suffix = path == peer_path::automatic ? "" : "_" + std::string(to_string(path));
  const std::string tag = bench::size_name(f.bytes) + suffix;
  return {
      {"peer_" + tag, f.bytes, 1, 2, 7,
       [&f, path] {
         pending_completions done(1);
         f.ferry_copy(f.on_first, f.on_second, path, done);
         done.wait();
       },
       [&f] {
         f.raw_copy(f.on_first, f.on_second, f.raw_stream);
         f.synchronize(f.raw_stream);
       },
       [&f] { f.verify_forward(); }},
      {"peer_bidir_" + tag, 2 * f.bytes, 1, 2, 7,
       [&f, path] {
         pending_completions done(2);
         f.ferry_copy(f.on_first, f.on_second, path, done);
         f.ferry_copy(f.on_second, f.on_first, path, done);
         done.wait();
       },
       [&f] {
         f.raw_copy(f.on_first, f.on_second, f.raw_stream);
         f.raw_copy(f.on_second, f.on_first, f.raw_stream_2);
         f.synchronize(f.raw_stream);
         f.synchronize(f.raw_stream_2);
       },
       [&f] {
         f.verify_forward();
         f.verify_backward();
       }},
  };
}

std::vector<bench::result> peer_cases(peer_fixture& f, bool peers) {
  std::vector<bench::comparison_spec> table;
  for (peer_path path : {peer_path::automatic, peer_path::copy_engine, peer_path::split, peer_path::kernel}) {
    if (path == peer_path::kernel && !peers) continue;  // the kernel reaches the other device only as its peer
    for (bench::comparison_spec& spec : path_cases(f, path)) table.push_back(std::move(spec));
  }
  return bench::compare_all(table);
}

// Each row's GB/s beside the link's: a bidirectional row moves its bytes over both directions of it.
void print_link_fractions(const std::vector<bench::result>& results) {
  std::cout << "\nfraction of the NVLink's ~" << link_gb_per_s << " GB/s per direction:\n";
  for (const bench::result& r : results) {
    const double link = r.name.starts_with("peer_bidir_") ? 2 * link_gb_per_s : link_gb_per_s;
    std::cout << "  " << std::left << std::setw(32) << r.name << std::right << std::fixed << std::setprecision(1)
              << std::setw(8) << r.ferry_figure() << " GB/s ferry (" << std::setprecision(2)
              << r.ferry_figure() / link << " of the link), " << std::setprecision(1) << std::setw(8)
              << r.raw_figure() << " GB/s cuMemcpyPeerAsync (" << std::setprecision(2) << r.raw_figure() / link
              << ")\n";
  }
  std::cout << std::defaultfloat;
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::options options = bench::parse_options(
      argc, argv,
      "Bandwidth of copies between two GPUs: a device_set's copy_peer (automatic, then each peer_path)\n"
      "against cuMemcpyPeerAsync (needs two devices; the report goes to <out>/<machine>-peer.{json,md}).");
  const int devices = device::count();
  if (devices < 2) {
    std::cout << "peer_bandwidth: needs two devices, found " << devices << "; nothing measured\n";
    return 0;
  }
  const bool sim = active_backend() == backend::sim;
  context first = context::primary(device::get(0));
  context second = context::primary(device::get(1));
  context_guard guard(first);
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
  peer_fixture fixture(first, second, sim ? std::size_t{16} << 20 : std::size_t{256} << 20);
  const std::vector<bench::result> results = peer_cases(fixture, peers);

  const std::string machine = machine_name(options, sim, device::get(0).name(), device::get(1).name());
  bench::write_report(results, options.out_dir, machine + "-peer", description, std::string(to_string(active_backend())));
  print_link_fractions(results);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "peer_bandwidth: " << error.what() << "\n";
  return 1;
}
