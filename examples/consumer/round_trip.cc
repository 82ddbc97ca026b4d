// A program of someone else's project that uses ferry: one round trip of 256 KiB through the engine
// (poke, then peek, from a coroutine), checked. Built both ways a project can take ferry (README.md,
// "Using ferry in your project"): with Bazel (WORKSPACE, BUILD.bazel) and with CMake against an
// installed ferry (CMakeLists.txt). It links the sim so that FERRY_BACKEND=sim runs it without a GPU.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <numeric>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/engine.hpp"
#include "ferry/version.hpp"

namespace asio = boost::asio;

int main() {
  asio::io_context io;
  ferry::engine gpu{io.get_executor()};
  bool same = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::vector<int> host(1 << 16);
        std::iota(host.begin(), host.end(), 0);
        auto device = gpu.allocate<int>(host.size());
        co_await gpu.poke(host, device.get(), asio::use_awaitable);
        std::vector<int> back(host.size());
        co_await gpu.peek(device.get(), back, asio::use_awaitable);
        same = back == host;
      },
      asio::detached);
  io.run();
  std::cout << "ferry " << ferry::version() << " on the " << ferry::to_string(ferry::active_backend())
            << " backend: round trip " << (same ? "ok" : "WRONG") << "\n";
  return same ? 0 : 1;
}
