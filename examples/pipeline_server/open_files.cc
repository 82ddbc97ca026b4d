// The server's descriptors against the process's open-files limit: max_connections must leave room for
// what else the server and the process hold, or the limit is reached while the server believes it has
// room, and every accept fails instead of the next connection being answered `busy`.
#include <sys/resource.h>

#include <limits>
#include <stdexcept>
#include <string>

#include "examples/pipeline_server/server.hpp"

namespace ferry::pipeline {
namespace {

constexpr std::size_t listening_sockets = 2;  // the request port and the metrics port
constexpr std::size_t spare_descriptors = 1;  // accept_backoff's spare
// The rest of the process: standard streams, the io_context's epoll and wake-up descriptors, the
// engine's and UCX's (stage links open sockets and shared memory of their own).
constexpr std::size_t process_slack = 64;

}  // namespace

std::size_t descriptors_beside_connections(const server_options& options) noexcept {
  return listening_sockets + spare_descriptors + options.max_metrics_connections + process_slack;
}

std::size_t open_files_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > std::numeric_limits<std::size_t>::max()) {
    return std::numeric_limits<std::size_t>::max();
  }
  return static_cast<std::size_t>(limit.rlim_cur);
}

connection_limit fit_max_connections(const server_options& options, std::size_t open_files) {
  const std::size_t beside = descriptors_beside_connections(options);
  const std::size_t room = open_files > beside ? open_files - beside : 0;
  const std::string needs = "the server needs " + std::to_string(beside) +
                            " descriptors beside its connections (both ports, a spare, max_metrics_connections " +
                            std::to_string(options.max_metrics_connections) + ", " +
                            std::to_string(process_slack) + " for the rest of the process)";
  if (options.max_connections) {
    if (*options.max_connections <= room) return {*options.max_connections, ""};
    throw std::invalid_argument("pipeline server: max_connections (--max-connections) " +
                                std::to_string(*options.max_connections) + " does not fit under the open-files limit " +
                                std::to_string(open_files) + ": " + needs + "; raise the limit (ulimit -n) or serve "
                                "at most " + std::to_string(room) + " connections");
  }
  if (room == 0) {
    throw std::invalid_argument("pipeline server: the open-files limit " + std::to_string(open_files) +
                                " leaves no room for connections: " + needs + "; raise it (ulimit -n)");
  }
  if (default_max_connections <= room) return {default_max_connections, ""};
  return {room, "max_connections (--max-connections) lowered from its default " + std::to_string(default_max_connections) +
                    " to " + std::to_string(room) + " to fit under the open-files limit " + std::to_string(open_files) +
                    ": " + needs + "; raise the limit (ulimit -n) to serve more"};
}

}  // namespace ferry::pipeline
