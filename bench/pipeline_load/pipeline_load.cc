// pipeline_load: the pipeline server under load, ferry against the thread-pool baseline, same process,
// same load: the ferry server runs and is driven for the duration, then the baseline server (the same
// server code with the GPU step of thread_pool_stage.hpp). Every reply is checked. Writes
// <out>/<machine>-pipeline.json in the harness's format: throughput (GB/s, payload in plus result out),
// time per request across the server (us; the inverse of requests/s) and latency p50/p99/p999 (us), the
// ratio being ferry's speed over the baseline's (above 1 ferry is better).
//
// Defaults are the H200 configuration (64 connections, 4 KiB to 64 MiB, 45 s per server: about 100 s in
// all with the setup); on sim they shrink (8 connections, 4 KiB to 1 MiB, 5 s) so a CI machine can run it.
// `pipeline_load --connect HOST:PORT` drives a pipeline_server that is already running instead.
// `pipeline_load --stage-to-stage` runs two ferry servers in a row instead, the second in a process of
// its own (the first forwards every payload, transformed, to the second over ferry::remote; the second
// checksums it), against one server answering transform, and writes <out>/<machine>-stage-to-stage.json:
// payload GB/s and latency end to end, the ratio being the two stages' speed over the single server's.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/options.hpp"
#include "bench/pipeline_load/load_generator.hpp"
#include "bench/pipeline_load/next_stage_process.hpp"
#include "bench/pipeline_load/thread_pool_stage.hpp"
#include "examples/pipeline_server/ferry_stage.hpp"
#include "examples/pipeline_server/server.hpp"
#include "ferry/backend.hpp"
#include "ferry/context.hpp"
#include "tools/command_line/command_line.hpp"

using namespace ferry;
using namespace ferry::pipeline;

namespace {

struct settings {
  bench::options output;
  std::string connect;  // HOST:PORT of a server already running; empty: both servers run here
  load_options load = [] {
    load_options o;
    o.threads = 6;  // the client checks every word of every reply: it must not be what limits the run
    return o;
  }();
  std::size_t server_io_threads = 4;
  std::size_t baseline_threads = 8;  // as many workers as a thread-pool server would give its GPU calls
  // Every server started here, ferry's and the baseline's alike.
  std::size_t large_payload_bytes = server_options{}.large_payload_bytes;
  std::size_t large_payloads_at_once = server_options{}.large_payloads_at_once;
  bool stage_to_stage = false;
  bool serve_as_next_stage = false;  // the second stage's process of --stage-to-stage
};

constexpr const char* summary =
    "The pipeline server under load, ferry against a thread-pool baseline, same process, same load\n"
    "(report: <out>/<machine>-pipeline.{json,md}). With --connect it drives a server that is already\n"
    "running instead, alone: no baseline, no report; it exits 1 when any reply was wrong.";

settings parse(int argc, char** argv, bool on_sim) {
  settings s;
  if (on_sim) {
    s.load.connections = 8;
    s.load.max_bytes = std::size_t{1} << 20;
    s.load.duration = std::chrono::seconds(5);
    s.server_io_threads = 2;
    s.baseline_threads = 2;
    s.load.threads = 2;
  }
  tools::command_line command(bench::program_name(argv[0]), summary);
  bench::add_report_flags(command, s.output);
  command.text("connect", s.connect, "HOST:PORT of a pipeline_server to drive instead of starting servers here")
      .duration<std::chrono::seconds>("seconds", s.load.duration, "how long each server is driven")
      .number("connections", s.load.connections, "client connections, each sending one request at a time")
      .number("requests-per-connection", s.load.requests_per_connection, "requests per connection (0: for --seconds)")
      .number("min-bytes", s.load.min_bytes, "smallest payload")
      .number("max-bytes", s.load.max_bytes, "largest payload (sizes spread log-uniformly in between)")
      .number("client-threads", s.load.threads, "client io threads (they also check every reply)")
      .number("server-threads", s.server_io_threads, "io threads of each server started here")
      .number("baseline-threads", s.baseline_threads, "workers of the thread-pool baseline's GPU step")
      .number("large-payload", s.large_payload_bytes, "the servers' large payloads: at least this many bytes")
      .number("large-payloads-at-once", s.large_payloads_at_once,
              "large payloads past their prefix at a time in each server (0: no limit)")
      .switch_flag("stage-to-stage", s.stage_to_stage,
                   "two ferry servers in a row (forward) against one (transform) instead of ferry against the "
                   "baseline (report: <out>/<machine>-stage-to-stage.{json,md}); the second stage runs in a "
                   "process of its own")
      .switch_flag("serve-as-next-stage", s.serve_as_next_stage,
                   "run as the second stage of --stage-to-stage: serve on an ephemeral stage port, print "
                   "\"stage-port N\", stop when standard input closes");
  command.parse_or_exit(argc, argv, std::cout);
  if (!s.connect.empty() && s.connect.rfind(':') == std::string::npos) {
    command.exit_with_usage_error("--connect: '" + s.connect + "' is not HOST:PORT");
  }
  if (!s.connect.empty() && s.stage_to_stage) {
    command.exit_with_usage_error("--connect and --stage-to-stage: the stages are started here, not connected to");
  }
  return s;
}

// HOST:PORT (HOST a name or an address; [v6] in brackets) as an endpoint, through the resolver.
boost::asio::ip::tcp::endpoint endpoint_of(const std::string& host_port) {
  const std::size_t colon = host_port.rfind(':');
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code error;
  const auto found = resolver.resolve(host, host_port.substr(colon + 1), error);
  if (error || found.empty()) {
    throw std::runtime_error("--connect " + host_port + ": cannot resolve: " + error.message());
  }
  return found.begin()->endpoint();
}

void print_report(const std::string& label, const load_report& report) {
  std::cout << label << ": " << report.requests << " requests in " << report.seconds << " s, "
            << report.gigabytes_per_second() << " GB/s, " << report.requests_per_second() << " requests/s, latency p50 "
            << report.latency_percentile(0.5) * 1e6 << " us, p99 " << report.latency_percentile(0.99) * 1e6
            << " us, p999 " << report.latency_percentile(0.999) * 1e6 << " us; failures " << report.failures << "\n";
  for (const std::string& message : report.failure_messages) std::cout << "  " << message << "\n";
}

void require_clean(const std::string& label, const load_report& report) {
  if (report.failures > 0 || report.requests == 0) {
    throw std::runtime_error(label + ": " + std::to_string(report.failures) + " failed requests, " +
                             std::to_string(report.requests) + " checked");
  }
}

// --connect: the load on a server this process did not start.
int drive_running_server(const settings& s) {
  load_options load = s.load;
  load.server = endpoint_of(s.connect);
  load.label = "pipeline " + s.connect;
  const load_report report = run_load(load);
  print_report(load.label, report);
  require_clean(load.label, report);
  return 0;
}

server::stage_factory ferry_stages() {
  return [](boost::asio::any_io_executor executor) {
    return std::make_unique<ferry_stage>(std::move(executor), ferry_stage::options{});
  };
}

server_options options_for(const settings& s) {
  server_options options;
  options.io_threads = s.server_io_threads;
  options.max_payload_bytes = std::max<std::size_t>(s.load.max_bytes, 1);
  // Room for the 64 connections' buffers in use and many idle ones, so that buffers are reused rather
  // than freed and made again (the same budget for every server).
  options.memory_budget_bytes = std::max<std::size_t>(std::size_t{4} << 30, buffer_pool::class_of(s.load.max_bytes));
  options.request_deadline = std::chrono::seconds(60);
  options.large_payload_bytes = s.large_payload_bytes;
  options.large_payloads_at_once = s.large_payloads_at_once;
  return options;
}

// `load` (its server set here) on `srv` until done, then the server's metrics and its shutdown.
load_report drive(server& srv, load_options load, const std::string& label) {
  load.server = srv.endpoint();
  load.label = label;
  load_report report = run_load(load);
  print_report(label, report);
  std::cout << srv.metrics_text() << std::flush;
  srv.shutdown();
  srv.wait();
  require_clean(label, report);
  return report;
}

load_report drive(const settings& s, const server::stage_factory& make_stage, const std::string& label) {
  server srv(options_for(s), make_stage);
  return drive(srv, s.load, label);
}

// A figure where higher is better (a rate), in the harness's terms: the time each side takes for the
// same amount, so that the ratio is ferry's speed over the baseline's.
bench::result rate(const std::string& name, double ferry_amount_per_second, double baseline_amount_per_second,
                   std::size_t amount) {
  return {name, amount, static_cast<double>(amount) / ferry_amount_per_second,
          static_cast<double>(amount) / baseline_amount_per_second, 1, 1, ""};
}

bench::result latency(const std::string& name, const load_report& f, const load_report& b, double p) {
  return {name, 0, f.latency_percentile(p), b.latency_percentile(p), 1, 1, ""};
}

// The arguments that make this program the second stage of `s`'s --stage-to-stage run.
std::vector<std::string> next_stage_arguments(const settings& s) {
  return {"--serve-as-next-stage", "--server-threads", std::to_string(s.server_io_threads), "--max-bytes",
          std::to_string(s.load.max_bytes), "--large-payload", std::to_string(s.large_payload_bytes),
          "--large-payloads-at-once", std::to_string(s.large_payloads_at_once)};
}

// --serve-as-next-stage: a ferry server with a stage port, until the parent closes standard input.
int serve_as_next_stage(const settings& s) {
  server_options options = options_for(s);
  options.stage_port = 0;
  server next(options, ferry_stages());
  announce_and_wait(next.stage_port());
  // Standard output is the parent's announcement pipe: the metrics go to standard error.
  std::cerr << next.metrics_text() << std::flush;
  next.shutdown();
  next.wait();
  return 0;
}

// Two ferry servers in a row, the second in a process of its own (next_stage_process.hpp) on an
// ephemeral stage port of loopback and the first's next stage, driven with forward; then one server
// driven with transform, the same load otherwise (no checksum requests in either, so that every
// request crosses the whole pipeline). Rows of payload GB/s and latency, the ratio being the two
// stages' over the single server's.
std::vector<bench::result> stage_to_stage(const settings& s) {
  load_options load = s.load;
  load.checksum_every = 0;
  load_report two_stages;
  {
    next_stage_process next(next_stage_arguments(s));
    server_options first = options_for(s);
    first.next_stage = "127.0.0.1:" + std::to_string(next.stage_port());
    server srv(first, ferry_stages());
    load.forward = true;
    two_stages = drive(srv, load, "pipeline stage to stage");
  }
  load.forward = false;
  server single(options_for(s), ferry_stages());
  const load_report one = drive(single, load, "pipeline single server");
  std::cout << "stage to stage / single server: payload " << two_stages.payload_gigabytes_per_second() << " / "
            << one.payload_gigabytes_per_second() << " GB/s\n";
  return {
      rate("pipeline_stage_to_stage_throughput", two_stages.payload_gigabytes_per_second() * 1e9,
           one.payload_gigabytes_per_second() * 1e9, two_stages.payload_bytes),
      latency("pipeline_stage_to_stage_latency_p50", two_stages, one, 0.5),
      latency("pipeline_stage_to_stage_latency_p99", two_stages, one, 0.99),
  };
}

}  // namespace

int main(int argc, char** argv) try {
  const bool on_sim = active_backend() == backend::sim;
  const settings s = parse(argc, argv, on_sim);
  if (!s.connect.empty()) return drive_running_server(s);
  if (s.serve_as_next_stage) return serve_as_next_stage(s);
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  const std::string backend_name(to_string(active_backend()));
  std::cerr << "ferry pipeline_load on the " << backend_name << " backend: " << gpu_device.name() << "; "
            << s.load.connections << " connections, payloads " << s.load.min_bytes << " to " << s.load.max_bytes
            << " bytes, " << s.load.duration.count() / 1000.0 << " s per server\n";

  const std::string machine = bench::machine_name(s.output, backend_name, gpu_device.name());
  if (s.stage_to_stage) {
    const std::vector<bench::result> results = stage_to_stage(s);
    bench::write_report(results, s.output.out_dir, machine + "-stage-to-stage", gpu_device.name(), backend_name);
    std::cout << "stage to stage / single server: throughput " << results[0].ratio() << "x, p99 latency "
              << results[2].ratio() << "x (above 1: the two stages better)\n";
    return 0;
  }
  const load_report with_ferry = drive(s, ferry_stages(), "pipeline ferry");
  const load_report baseline = drive(s, [&](boost::asio::any_io_executor) {
    return std::make_unique<thread_pool_stage>(primary, s.baseline_threads);
  }, "pipeline thread-pool baseline");

  const std::string prefix = s.load.min_bytes == s.load.max_bytes ? "pipeline_fixed" : "pipeline_mixed";
  std::vector<bench::result> results = {
      rate(prefix + "_throughput", with_ferry.gigabytes_per_second() * 1e9, baseline.gigabytes_per_second() * 1e9,
           with_ferry.bytes),
      // Time per request across the whole server (1 / requests per second): the "us" unit of the harness.
      {prefix + "_us_per_request", 0, 1 / with_ferry.requests_per_second(), 1 / baseline.requests_per_second(), 1, 1, ""},
      latency(prefix + "_latency_p50", with_ferry, baseline, 0.5),
      latency(prefix + "_latency_p99", with_ferry, baseline, 0.99),
      latency(prefix + "_latency_p999", with_ferry, baseline, 0.999),
  };
  bench::write_report(results, s.output.out_dir, machine + "-pipeline", gpu_device.name(), backend_name);
  std::cout << "ferry / baseline: throughput " << results[0].ratio() << "x, p99 latency " << results[3].ratio()
            << "x (above 1: ferry better)\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "pipeline_load: " << error.what() << "\n";
  return 1;
}
