// A process that exits with engines alive: one leaked with work held back on a gated stream (it never
// completes), one leaked with its resident copier running (a kernel that would run until stopped), one
// static whose work is done. The process must exit 0, without hanging, and make no
// driver call after the driver's teardown at exit (the sim reports such calls on stderr; exit_test.sh
// fails on them).
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;

int main() {
  static asio::io_context io;
  ferry::context primary = ferry::context::primary(ferry::device::get(0));
  ferry::context_guard current(primary);

  static ferry::engine finished{io.get_executor()};
  {
    auto buffer = finished.allocate<std::uint32_t>(1024);
    finished.memset(buffer.get(), 1024, std::uint32_t{7}, [](auto) {});
    io.run();  // its work is done; the engine is destroyed with the statics
  }  // freed before the held-back work below exists: a free waits for the context's queued work

  auto* leaked = new ferry::engine{io.get_executor()};
  auto* target = new ferry::device_buffer<std::uint32_t>(leaked->allocate<std::uint32_t>(1 << 20));
  auto* held = new ferry::stream(ferry::stream::create());
  new ferry::testing::stream_gate(*held);  // never opened
  auto* values = new std::vector<std::uint32_t>(1 << 20, 3u);
  leaked->poke(std::span<const std::uint32_t>(*values), target->get(), *held, [](auto, std::size_t) {});
  leaked->memset(target->get(), 16, std::uint32_t{1}, *held, [](auto) {});

  ferry::engine_options resident;
  resident.resident_copies = true;
  // Neither the poller (it never parks) nor the idle watch stops the kernel before the process exits.
  resident.spin_window = std::chrono::seconds(60);
  resident.resident_idle_stop = std::chrono::seconds(60);
  auto* copier = new ferry::engine{io.get_executor(), resident};
  auto* small = new ferry::pinned_buffer<std::uint32_t>(ferry::pinned_buffer<std::uint32_t>::allocate(1024));
  auto* small_target = new ferry::device_buffer<std::uint32_t>(copier->allocate<std::uint32_t>(1024));
  copier->poke(small->span(), small_target->get(), [](auto, std::size_t) {});
  std::puts("exiting with a leaked engine holding work in flight");
  return 0;
}
