#include "examples/pipeline_server/command.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <ostream>
#include <stdexcept>
#include <string>

#include "examples/pipeline_server/ferry_stage.hpp"
#include "examples/pipeline_server/flags.hpp"
#include "examples/pipeline_server/server.hpp"
#include "ferry/backend.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {
namespace {

constexpr const char* usage =
    "usage: pipeline_server [--address IP] [--port N] [--metrics-port N] [--max-payload BYTES]\n"
    "                       [--memory-budget BYTES] [--deadline-ms N] [--write-deadline-ms N]\n"
    "                       [--grace-ms N] [--io-threads N] [--header-deadline-ms N]\n"
    "                       [--max-connections N] [--gpu-lanes N] [--payload-prefix BYTES]\n"
    "defaults: 127.0.0.1, ephemeral ports, 256 MiB, 2 GiB, 30000 ms, 10000 ms, 10000 ms, 4, 10000 ms,\n"
    "          1024, 64, 65536\n";

unsigned short port_number(const std::string& flag, const std::string& text) {
  const unsigned long long value = flag_number(flag, text);
  if (value > 65535) throw std::invalid_argument(flag + ": " + text + " is not a port (0 to 65535)");
  return static_cast<unsigned short>(value);
}

server_options parse(int argc, char** argv) {
  server_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + ": missing value (or unknown flag)\n" + usage);
    const std::string value = argv[++i];
    if (flag == "--address") o.address = value;
    else if (flag == "--port") o.port = port_number(flag, value);
    else if (flag == "--metrics-port") o.metrics_port = port_number(flag, value);
    else if (flag == "--max-payload") o.max_payload_bytes = flag_number(flag, value);
    else if (flag == "--memory-budget") o.memory_budget_bytes = flag_number(flag, value);
    else if (flag == "--deadline-ms") o.request_deadline = std::chrono::milliseconds(flag_number(flag, value));
    else if (flag == "--write-deadline-ms") o.write_deadline = std::chrono::milliseconds(flag_number(flag, value));
    else if (flag == "--grace-ms") o.shutdown_grace = std::chrono::milliseconds(flag_number(flag, value));
    else if (flag == "--io-threads") o.io_threads = flag_number(flag, value);
    else if (flag == "--header-deadline-ms") o.header_deadline = std::chrono::milliseconds(flag_number(flag, value));
    else if (flag == "--max-connections") o.max_connections = flag_number(flag, value);
    else if (flag == "--gpu-lanes") o.gpu_lanes = flag_number(flag, value);
    else if (flag == "--payload-prefix") o.payload_prefix_bytes = flag_number(flag, value);
    else throw std::invalid_argument("unknown flag " + flag + "\n" + usage);
  }
  return o;
}

}  // namespace

int run_command(int argc, char** argv, std::ostream& out) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      out << usage;
      return 0;
    }
  }
  const server_options options = parse(argc, argv);
  // Registered before the server's threads start, so that no signal finds the default action.
  asio::io_context signals_io;
  asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  server s(options, [](asio::any_io_executor executor) {
    return std::make_unique<ferry_stage>(std::move(executor), ferry_stage::options{});
  });
  out << "pipeline_server on the " << ferry::to_string(ferry::active_backend()) << " backend: listening on "
      << s.endpoint() << ", metrics on http://" << s.metrics_endpoint() << "/metrics" << std::endl;
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
