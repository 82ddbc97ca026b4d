#include "tests/support/remote_peer.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/random_bytes.hpp"

extern char** environ;

namespace ferry::testing {
namespace {

std::uint64_t number_from(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) {
    std::cerr << "remote peer: " << name << " is not set\n";
    std::exit(2);
  }
  return std::strtoull(text, nullptr, 10);
}

boost::asio::awaitable<void> serve(remote::worker& worker, remote::registration& memory, unsigned short port) {
  remote::endpoint endpoint = co_await worker.async_connect("127.0.0.1", port, boost::asio::use_awaitable);
  std::vector<std::byte> about = memory.export_descriptor().serialize();
  co_await endpoint.async_send(about, boost::asio::use_awaitable);
  std::vector<std::byte> message(1 << 20);
  for (;;) {
    std::size_t bytes = co_await endpoint.async_receive(message, boost::asio::use_awaitable);
    if (bytes == 0) continue;
    if (message[0] == std::byte{'E'}) {
      co_await endpoint.async_send(std::span(message).subspan(1, bytes - 1), boost::asio::use_awaitable);
    } else if (message[0] == std::byte{'Q'}) {
      const std::byte reply[] = {std::byte{'q'}};
      co_await endpoint.async_send(reply, boost::asio::use_awaitable);
      // Until the test closes the connection: the reply is delivered before this process ends.
      co_await endpoint.async_receive(message, boost::asio::as_tuple(boost::asio::use_awaitable));
      co_return;
    }
  }
}

// The peer's whole life; returns its exit status.
int run_peer() {
  auto port = static_cast<unsigned short>(number_from("FERRY_REMOTE_PORT"));
  std::uint64_t seed = number_from("FERRY_REMOTE_SEED");
  std::size_t bytes = number_from("FERRY_REMOTE_BYTES");
  bool device = number_from("FERRY_REMOTE_KIND") == static_cast<std::uint64_t>(remote::memory_kind::device);
  int status = 0;
  try {
    // Current before the worker exists, as in the test's own process: UCX's CUDA transports look for the
    // current context when the worker opens them.
    std::optional<ferry::context> context;
    if (device) {
      context.emplace(ferry::context::primary(ferry::device::get(0)));
      context->ref().make_current();
    }
    boost::asio::io_context io;
    const char* polling = std::getenv("FERRY_REMOTE_POLLING");
    remote::worker worker(io.get_executor(),
                          remote::worker_options{remote_transports(), polling != nullptr && *polling == '1'
                                                                          ? remote::progress_mode::polling
                                                                          : remote::progress_mode::events});
    std::vector<std::byte> host(bytes);
    fill_random(std::span(host), seed);
    std::optional<ferry::device_buffer<std::byte>> on_device;
    remote::registration memory;
    if (device) {
      on_device.emplace(ferry::device_buffer<std::byte>::allocate(bytes));
      ferry::poke_array(bytes, host.data(), on_device->get());
      memory = worker.register_memory(on_device->get(), bytes);
    } else {
      memory = worker.register_memory(host);
    }
    // The worker waits for UCX's events as long as it lives, so run() ends only with stop().
    boost::asio::co_spawn(io, serve(worker, memory, port), [&](std::exception_ptr failure) {
      io.stop();
      if (!failure) return;
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& error) {
        std::cerr << "remote peer: " << error.what() << "\n";
      }
      status = 3;
    });
    io.run();
  } catch (const std::exception& error) {
    std::cerr << "remote peer: " << error.what() << "\n";
    status = 4;
  }
  return status;
}

// Before main: the binary started as a peer never reaches Boost.Test.
const bool peer_ran = [] {
  if (std::getenv("FERRY_REMOTE_PEER") != nullptr) std::exit(run_peer());
  return false;
}();

}  // namespace

std::string remote_transports() {
  const char* chosen = std::getenv("FERRY_REMOTE_TLS");
  return chosen != nullptr && *chosen != 0 ? chosen : "tcp,sm,self";
}

peer_process::peer_process(unsigned short port, std::uint64_t seed, std::size_t bytes, remote::memory_kind kind,
                           remote::progress_mode progress) {
  std::vector<std::string> settings = {
      "FERRY_REMOTE_PEER=1",
      "FERRY_REMOTE_PORT=" + std::to_string(port),
      "FERRY_REMOTE_SEED=" + std::to_string(seed),
      "FERRY_REMOTE_BYTES=" + std::to_string(bytes),
      "FERRY_REMOTE_KIND=" + std::to_string(static_cast<int>(kind)),
  };
  if (progress == remote::progress_mode::polling) settings.emplace_back("FERRY_REMOTE_POLLING=1");
  // Everything else is inherited, FERRY_REMOTE_TLS and FERRY_REMOTE_POLLING included: both processes
  // must offer the same transports (a peer without CUDA's cannot register device memory at all).
  const std::vector<std::string> own(settings.begin(), settings.end());
  const auto name_of = [](std::string_view setting) { return setting.substr(0, setting.find('=')); };
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const bool replaced = std::any_of(own.begin(), own.end(),
                                      [&](const std::string& mine) { return name_of(mine) == name_of(*entry); });
    if (!replaced) settings.emplace_back(*entry);
  }
  std::vector<char*> environment;
  for (auto& setting : settings) environment.push_back(setting.data());
  environment.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  char* arguments[] = {self.data(), nullptr};
  int error = posix_spawn(&pid_, self.c_str(), nullptr, nullptr, arguments, environment.data());
  if (error != 0) throw std::runtime_error("posix_spawn " + self + ": " + std::strerror(error));
}

peer_process::~peer_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void peer_process::kill() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

std::optional<int> peer_process::ended() {
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    ended_ = status;
  }
  return ended_;
}

int peer_process::wait() {
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    pid_ = -1;
    ended_ = status;
  }
  return ended_.value_or(status);
}

}  // namespace ferry::testing
