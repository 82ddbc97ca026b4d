// A connection being served: its socket and what a shutdown needs to know of it. The server's connection
// list holds it weakly; its coroutine (server::serve) owns it.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>

#include "examples/pipeline_server/server.hpp"

namespace ferry::pipeline {

struct server::connection {
  explicit connection(boost::asio::ip::tcp::socket s) : socket(std::move(s)) {}
  boost::asio::ip::tcp::socket socket;  // its executor is the connection's strand, which runs all of it
  bool idle = false;   // waiting for the next request's header (shutdown closes such connections at once)
  std::atomic<bool> finished{false};  // its coroutine is ending: a shutdown need not wait for it
};

}  // namespace ferry::pipeline
