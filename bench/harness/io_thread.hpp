// The thread that runs a benchmark's engine completions: it runs `io` until destroyed, then lets the
// completions already posted run and joins, so that no exit leaves it running. Declare it after the
// io_context and before the engine: the engine, destroyed first, posts its last completions.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>

namespace ferry::bench {

class io_thread {
 public:
  explicit io_thread(boost::asio::io_context& io) : io_(io), work_(io.get_executor()), runner_([this] { io_.run(); }) {}
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  ~io_thread() {
    work_.reset();
    runner_.join();
  }

 private:
  boost::asio::io_context& io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread runner_;
};

}  // namespace ferry::bench
