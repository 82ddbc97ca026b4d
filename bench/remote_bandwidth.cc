// ferry::remote against ucx_perftest (shipped with UCX), on the same UCX transports and sizes, in the
// same run, rounds interleaved: put bandwidth from 4 KiB to 256 MiB (ucp_put_bw), get bandwidth at
// 256 MiB (ucp_get), and 4 KiB latency: half a message round trip (ferry's async_send to a peer that
// echoes it, against tag_lat's 50th percentile). ferry's peer is a second process (this binary
// started again); ucx_perftest runs its usual server/client pair, with ferry's peer stopped meanwhile
// (it polls while its receive is posted, which would take a core from ucx_perftest's pair). On the sim
// backend: host memory over loopback TCP (real UCX, no GPU involved); on the cuda backend: device memory
// on both sides (cuda_ipc, cuda_copy). Both sides poll UCX (ucx_perftest always does; ferry's workers use
// progress_mode::polling).
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/program.hpp"
#include "bench/harness/test_data.hpp"
#include "ferry/remote.hpp"
#include "tests/support/remote_peer.hpp"

namespace asio = boost::asio;
using namespace ferry;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t largest = std::size_t{256} << 20;
// Rounds per row, ferry and ucx_perftest interleaved; the median is reported (ucx_perftest's own 256 MiB
// put moved by a fifth between runs on the H200).
constexpr int rounds = 5;

// ucx_perftest: FERRY_UCX_PERFTEST, else beside this binary in the GPU bundle (ucx/bin), else in the
// checkout's .ucx/ (tools/ferry bench runs from the repository's root).
std::filesystem::path find_perftest() {
  if (const char* chosen = std::getenv("FERRY_UCX_PERFTEST")) return chosen;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  for (auto candidate : {self.parent_path().parent_path() / "ucx/bin/ucx_perftest",
                         std::filesystem::current_path() / ".ucx/libucx/bin/ucx_perftest"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  throw std::runtime_error("ucx_perftest not found (set FERRY_UCX_PERFTEST, or run tools/ferry setup)");
}

// One ucx_perftest pair (server in the background, client on 127.0.0.1) on a port of its own; the
// client's "Final:" figure at `column` (2: 50th percentile latency in us; 6: overall bandwidth in MB/s,
// MB = 2^20), or none with the client's output in `output`. The server gives up by itself when no client
// comes (its port taken, or the client's connect before its listen), so a failed pair never hangs.
std::optional<double> perftest_pair(const std::filesystem::path& perftest, const std::string& transports,
                                    const std::string& test, std::size_t bytes, int iterations,
                                    const std::string& memory, int column, std::string& output) {
  static std::mt19937 ports(std::random_device{}());
  const int port = 20000 + static_cast<int>(ports() % 20000);
  const std::string library = (perftest.parent_path().parent_path() / "lib").string();
  std::ostringstream environment, arguments;
  environment << "UCX_TLS=" << transports << " LD_LIBRARY_PATH=" << library
              << "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ";
  arguments << perftest.string() << " -t " << test << " -s " << bytes << " -n " << iterations << " -w "
            << std::max(2, iterations / 10) << " -m " << memory << " -p " << port;
  FILE* server = popen((environment.str() + "timeout 60 " + arguments.str() + " >/dev/null 2>&1").c_str(), "r");
  if (server == nullptr) throw std::runtime_error("cannot start ucx_perftest's server");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  FILE* client = popen((environment.str() + arguments.str() + " 127.0.0.1 2>&1").c_str(), "r");
  if (client == nullptr) throw std::runtime_error("cannot start ucx_perftest's client");
  output.clear();
  std::array<char, 4096> chunk;
  while (std::size_t got = std::fread(chunk.data(), 1, chunk.size(), client)) output.append(chunk.data(), got);
  pclose(client);
  pclose(server);
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("Final:")) continue;
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string word; words >> word;) fields.push_back(word);
    if (static_cast<int>(fields.size()) > column) return std::stod(fields[column]);
  }
  return std::nullopt;
}

// perftest_pair's figure, from the first of three pairs that prints one.
double run_perftest(const std::filesystem::path& perftest, const std::string& transports, const std::string& test,
                    std::size_t bytes, int iterations, const std::string& memory, int column) {
  std::string output;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (auto figure = perftest_pair(perftest, transports, test, bytes, iterations, memory, column, output)) {
      return *figure;
    }
    std::cerr << "  ucx_perftest " << test << " printed no Final line; again on another port\n";
  }
  throw std::runtime_error("ucx_perftest " + test + " printed no Final line in three pairs; the last:\n" + output);
}

// Stops a process (SIGSTOP) for its lifetime, then lets it go on (SIGCONT).
class stopped_process {
 public:
  explicit stopped_process(pid_t pid) : pid_(pid) {
    if (::kill(pid_, SIGSTOP) != 0) {
      throw std::runtime_error(std::string("cannot stop the peer: ") + std::strerror(errno));
    }
    int status = 0;  // stopped once waitpid says so (SIGSTOP is not synchronous)
    if (::waitpid(pid_, &status, WUNTRACED) != pid_ || !WIFSTOPPED(status)) {
      ::kill(pid_, SIGCONT);
      throw std::runtime_error("the peer did not stop (it ended?)");
    }
  }
  ~stopped_process() { ::kill(pid_, SIGCONT); }
  stopped_process(const stopped_process&) = delete;
  stopped_process& operator=(const stopped_process&) = delete;

 private:
  pid_t pid_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// This process's side: a polling worker connected to the peer, the peer's descriptor, local memory.
struct remote_fixture {
  remote_fixture(const std::string& transports, remote::memory_kind kind)
      : kind(kind), worker(io.get_executor(), remote::worker_options{transports, remote::progress_mode::polling}) {
    content = bench::random_bytes(largest, 31);
    if (kind == remote::memory_kind::device) {
      on_device.emplace(device_buffer<std::uint8_t>::allocate(largest));
      poke_array(largest, content.data(), on_device->get());
    }
    unsigned short port = worker.listen("127.0.0.1");
    peer.emplace(port, 32, largest, kind);
    worker.async_accept([&](error_code error, remote::endpoint connected) {
      if (error) throw boost::system::system_error(error, "accept");
      endpoint = std::move(connected);
    });
    run([&] { return endpoint.is_open() || peer->ended().has_value(); });
    if (!endpoint.is_open()) throw std::runtime_error("remote_bandwidth: the peer process ended before it connected");
    std::vector<std::byte> about(4096);
    std::size_t received = 0;
    endpoint.async_receive(about, [&](error_code error, std::size_t bytes) {
      if (error) throw boost::system::system_error(error, "the peer's descriptor");
      received = bytes;
    });
    run([&] { return received > 0; });
    memory = remote::descriptor::deserialize(std::span(about).first(received));
  }

  template <class Done>
  void run(Done done) {
    auto deadline = clock_type::now() + std::chrono::seconds(120);
    while (!done()) {
      if (clock_type::now() > deadline) throw std::runtime_error("remote_bandwidth: no completion in 120 s");
      io.run_one_for(std::chrono::milliseconds(10));
    }
  }

  remote::local_bytes local(std::size_t bytes) {
    if (kind == remote::memory_kind::device) return remote::local_bytes(on_device->get(), bytes);
    return remote::local_bytes(std::as_writable_bytes(std::span(content).first(bytes)));
  }

  // Seconds for `iterations` transfers of `bytes`, up to 16 in flight as ucx_perftest keeps its own, to
  // the slots of `bytes` of the peer's memory in turn (at the largest size, one slot: every transfer in
  // flight moves the same bytes to the same place, as each of ucx_perftest's does).
  double transfers(bool put, std::size_t bytes, int iterations) {
    const int window = 16;
    int started = 0, finished = 0;
    std::optional<error_code> failure;
    auto on_done = [&](error_code error, std::size_t) {
      if (error) failure = error;
      ++finished;
    };
    auto start = clock_type::now();
    while (finished < iterations) {
      while (started < iterations && started - finished < window) {
        // The peer's memory as slots of `bytes`, in turn: every slot ends up holding the same bytes.
        auto target = memory.window((static_cast<std::size_t>(started) % (largest / bytes)) * bytes, bytes);
        if (put) {
          endpoint.async_put(local(bytes), target, on_done);
        } else {
          endpoint.async_get(local(bytes), target, on_done);
        }
        ++started;
      }
      io.run_one();
      if (failure) throw boost::system::system_error(*failure, put ? "async_put" : "async_get");
    }
    return std::chrono::duration<double>(clock_type::now() - start).count();
  }

  // The 50th percentile of half a message round trip of `bytes`, in seconds.
  double latency(std::size_t bytes, int iterations) {
    const std::vector<std::uint8_t> seeded = bench::random_bytes(bytes + 1, 33);
    std::vector<std::byte> message(bytes + 1);
    std::memcpy(message.data(), seeded.data(), message.size());
    message[0] = std::byte{'E'};
    std::vector<std::byte> echo(bytes);
    std::vector<double> halves;
    for (int i = 0; i < iterations + iterations / 10; ++i) {
      bool sent = false, back = false;
      auto start = clock_type::now();
      endpoint.async_send(message, [&](error_code error) {
        if (error) throw boost::system::system_error(error, "async_send");
        sent = true;
      });
      endpoint.async_receive(echo, [&](error_code error, std::size_t) {
        if (error) throw boost::system::system_error(error, "async_receive");
        back = true;
      });
      // One handler at a time: the round trip ends when its last handler has run (io.poll() would go on to
      // the worker's own passes after it, as ucx_perftest's loop does not).
      while (!(sent && back)) io.poll_one();
      if (i >= iterations / 10) halves.push_back(std::chrono::duration<double>(clock_type::now() - start).count() / 2);
    }
    if (!std::equal(echo.begin(), echo.end(), message.begin() + 1)) throw std::runtime_error("echo differs");
    return median(halves);
  }

  // Throws unless the peer's memory holds ours over [0, bytes) (after puts of content there).
  void verify_put(std::size_t bytes) {
    std::vector<std::byte> back(bytes);
    bool done = false;
    endpoint.async_get(remote::local_bytes(std::span(back)), memory.window(0, bytes), [&](error_code error, std::size_t) {
      if (error) throw boost::system::system_error(error, "verifying get");
      done = true;
    });
    run([&] { return done; });
    if (std::memcmp(back.data(), content.data(), bytes) != 0) throw std::runtime_error("put: data differs");
  }

  remote::memory_kind kind;
  asio::io_context io;
  std::vector<std::uint8_t> content;
  std::optional<device_buffer<std::uint8_t>> on_device;
  remote::worker worker;
  std::optional<testing::peer_process> peer;
  remote::endpoint endpoint;
  remote::descriptor memory;
};

// Adds each row's "transport" to the report's JSON (the harness's rows have no such field).
void name_transports(const std::string& report, const std::string& dir, const std::vector<std::string>& transports) {
  const std::filesystem::path path = std::filesystem::path(dir) / (report + ".json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  boost::json::object json = boost::json::parse(text.str()).as_object();
  boost::json::array& rows = json.at("benchmarks").as_array();
  for (std::size_t i = 0; i < rows.size() && i < transports.size(); ++i) rows[i].as_object()["transport"] = transports[i];
  std::ofstream(path) << boost::json::serialize(json) << "\n";
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::comparison_program program(
      argc, argv,
      "ferry::remote against ucx_perftest on the same UCX transports and sizes: put bandwidth 4 KiB ..\n"
      "256 MiB, get bandwidth 256 MiB, 4 KiB message latency, as ratios (above 1 ferry is faster); the\n"
      "report goes to <out>/<machine>-remote.{json,md}. FERRY_REMOTE_TLS overrides the transports.");
  const bool sim = program.backend == "sim";
  const char* chosen = std::getenv("FERRY_REMOTE_TLS");
  const std::string transports = chosen && *chosen ? chosen : sim ? "tcp,self" : "cuda_ipc,cuda_copy,tcp,self";
  // The peer inherits both: the same transports, and polling as ucx_perftest polls.
  setenv("FERRY_REMOTE_TLS", transports.c_str(), 1);
  setenv("FERRY_REMOTE_POLLING", "1", 1);
  // UCX turns cuda_ipc's get off on a GPU without NVLink (a single GPU has none), and a get of device
  // memory then goes over TCP; on, both sides get over cuda_ipc, as the put does. Inherited by the peer
  // and by ucx_perftest; a value already set is kept.
  if (!sim) setenv("UCX_CUDA_IPC_ENABLE_GET_ZCOPY", "y", 0);
  const auto kind = sim ? remote::memory_kind::host : remote::memory_kind::device;
  const std::string memory = sim ? "host" : "cuda";
  const std::filesystem::path perftest = find_perftest();
  std::cerr << "ferry remote_bandwidth on the " << program.backend << " backend: UCX_TLS=" << transports << ", "
            << memory << " memory, " << perftest.string() << "\n";

  remote_fixture fixture(transports, kind);
  std::vector<bench::result> results;
  std::vector<std::string> transport_of;  // each row's, for its "transport" field
  auto bandwidth_row = [&](const std::string& name, bool put, std::size_t bytes, int iterations) {
    std::vector<double> ferry_seconds, raw_seconds;
    for (int round = 0; round < rounds; ++round) {
      ferry_seconds.push_back(fixture.transfers(put, bytes, iterations) / iterations);
      double mb_per_second = 0;
      {
        const stopped_process quiet(fixture.peer->pid());
        mb_per_second =
            run_perftest(perftest, transports, put ? "ucp_put_bw" : "ucp_get", bytes, iterations, memory, 6);
      }
      raw_seconds.push_back(static_cast<double>(bytes) / (mb_per_second * 1048576.0));
      std::cerr << "  " << name << " round " << round + 1 << ": ferry " << bytes / ferry_seconds.back() / 1e9
                << " GB/s, ucx_perftest " << mb_per_second * 1048576.0 / 1e9 << " GB/s\n";
    }
    if (put && kind == remote::memory_kind::host) fixture.verify_put(std::min(bytes, largest));
    results.push_back({name, bytes, median(ferry_seconds), median(raw_seconds), rounds});
    transport_of.push_back(transports + " (" + memory + " memory)");
  };
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                            largest}) {
    const int iterations = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 30) / bytes, 4, 2000));
    bandwidth_row("remote_put_" + bench::size_name(bytes), true, bytes, iterations);
  }
  bandwidth_row("remote_get_256MiB", false, largest, 4);

  std::vector<double> ferry_latency, raw_latency;
  for (int round = 0; round < rounds; ++round) {
    ferry_latency.push_back(fixture.latency(4096, 2000));
    {
      const stopped_process quiet(fixture.peer->pid());
      raw_latency.push_back(run_perftest(perftest, transports, "tag_lat", 4096, 2000, "host", 2) * 1e-6);
    }
    std::cerr << "  remote_latency_4KiB round " << round + 1 << ": ferry " << ferry_latency.back() * 1e6
              << " us, ucx_perftest " << raw_latency.back() * 1e6 << " us\n";
  }
  results.push_back({"remote_latency_4KiB", 0, median(ferry_latency), median(raw_latency), rounds});
  transport_of.push_back(transports + " (host memory, tag messages)");

  program.report(results, "remote",
                 "ferry::remote against ucx_perftest, two processes on one machine, UCX_TLS=" + transports + ", " +
                     memory + " memory" + (sim ? " (real UCX over loopback; the sim backend plays no part)" : ""));
  name_transports(bench::machine_name(program.options, program.backend, program.on.gpu.name()) + "-remote",
                  program.options.out_dir, transport_of);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "remote_bandwidth: " << error.what() << "\n";
  return 1;
}
