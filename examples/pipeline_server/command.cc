#include "examples/pipeline_server/command.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <ostream>

#include "examples/pipeline_server/ferry_stage.hpp"
#include "examples/pipeline_server/server.hpp"
#include "ferry/backend.hpp"
#include "tools/command_line/command_line.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {
namespace {

constexpr const char* summary =
    "The pipeline server: requests in over TCP, through ferry's engine and the GPU, results out; Prometheus\n"
    "metrics over HTTP. Serves until SIGINT or SIGTERM, then lets in-flight requests finish.";

server_options parse(int argc, char** argv, std::ostream& out) {
  server_options o;
  unsigned short stage_port = 0;
  std::string stage_memory;
  tools::command_line command("pipeline_server", summary);
  command.text("address", o.address, "the IP address both ports listen on")
      .number("port", o.port, "the request port (0: an ephemeral one, printed at start)")
      .number("metrics-port", o.metrics_port, "the metrics port (0: an ephemeral one, printed at start)")
      .number("max-payload", o.max_payload_bytes, "largest request payload, bytes")
      .number("memory-budget", o.memory_budget_bytes, "host and device buffer bytes leased or kept for reuse")
      .duration<std::chrono::milliseconds>("deadline-ms", o.request_deadline, "from a request's header to its result")
      .duration<std::chrono::milliseconds>("header-deadline-ms", o.header_deadline,
                                           "for a whole request header to arrive")
      .duration<std::chrono::milliseconds>("write-deadline-ms", o.write_deadline, "for writing one reply")
      .duration<std::chrono::milliseconds>("grace-ms", o.shutdown_grace, "for in-flight requests at shutdown")
      .number("io-threads", o.io_threads, "threads serving the sockets")
      .number("max-connections", o.max_connections,
              "connections served at once; more are answered busy (default: 1024, or fewer to fit the open-files "
              "limit; a value that does not fit is refused)")
      .number("max-metrics-connections", o.max_metrics_connections,
              "connections to the metrics port answered at once; more are answered 503")
      .number("gpu-lanes", o.gpu_lanes, "GPU streams shared by all connections")
      .number("payload-prefix", o.payload_prefix_bytes, "payload bytes that must arrive before buffers are leased")
      .number("min-payload-rate", o.min_payload_bytes_per_second,
              "bytes per second a payload must arrive at after its prefix, with 1 s of slack per step (0: no minimum)")
      .number("large-payload", o.large_payload_bytes, "payloads of at least this many bytes go through the gate")
      .number("large-payloads-at-once", o.large_payloads_at_once,
              "large payloads past their prefix at a time; the next waits its turn (0: no limit)")
      .number("stage-port", stage_port, "the port previous stages connect to (0: none)")
      .text("next-stage", o.next_stage, "HOST:PORT of the next stage's stage port (forward hands payloads on to it)")
      .number("stage-slots", o.stage_slots, "buffers in flight to the next stage; slots of each previous stage's window")
      .text("stage-transports", o.stage_transports,
            "UCX transports of the stage links (empty: cuda_ipc,cuda_copy,tcp,sm,self on cuda, tcp,sm,self on sim)")
      .text("stage-memory", stage_memory, "memory of the stage windows: device or host (empty: device on cuda, host on sim)");
  command.parse_or_exit(argc, argv, out);
  if (stage_port != 0) o.stage_port = stage_port;
  // The forms the server would refuse too, named here by their flags.
  try {
    if (!stage_memory.empty()) o.stage_memory = parse_memory_kind(stage_memory, "--stage-memory");
    if (!o.next_stage.empty()) (void)split_host_port(o.next_stage, "--next-stage");
  } catch (const std::invalid_argument& error) {
    command.exit_with_usage_error(error.what());
  }
  if (o.stage_slots == 0) command.exit_with_usage_error("--stage-slots 0: at least one slot is needed");
  if (o.large_payload_bytes == 0 && o.large_payloads_at_once > 0) {
    command.exit_with_usage_error("--large-payload 0: every request would wait for the large payloads' turn "
                                  "(--large-payloads-at-once 0 lets every request through)");
  }
  return o;
}

}  // namespace

int run_command(int argc, char** argv, std::ostream& out) {
  const server_options options = parse(argc, argv, out);
  // Registered before the server's threads start, so that no signal finds the default action.
  asio::io_context signals_io;
  asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  server s(options, [](asio::any_io_executor executor) {
    return std::make_unique<ferry_stage>(std::move(executor), ferry_stage::options{});
  });
  out << "pipeline_server on the " << ferry::to_string(ferry::active_backend()) << " backend: listening on "
      << s.endpoint() << ", metrics on http://" << s.metrics_endpoint() << "/metrics";
  if (s.stage_port() != 0) out << ", stage port " << s.stage_port();
  if (!options.next_stage.empty()) out << ", next stage " << options.next_stage;
  out << std::endl;
  if (!s.start_notice().empty()) out << "pipeline_server: " << s.start_notice() << std::endl;
  signals.async_wait([&](boost::system::error_code error, int signal) {
    if (error) return;
    out << "pipeline_server: signal " << signal << ", shutting down (grace " << options.shutdown_grace.count()
        << " ms)" << std::endl;
    s.shutdown();
  });
  signals_io.run();
  s.wait();
  out << "pipeline_server: stopped" << std::endl;
  return 0;
}

}  // namespace ferry::pipeline
