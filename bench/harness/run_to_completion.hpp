// Runs an engine operation to completion from a benchmark's thread: the op's handler (on the engine's
// io thread) raises a flag this thread spins on, as the raw side spins in cuStreamSynchronize. A
// future would add a second thread hop. `start` is called with the handler to pass to the operation.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <atomic>

namespace ferry::bench {

template <class Start>
void run_to_completion(Start start) {
  std::atomic<bool> done{false};
  boost::system::error_code failure;
  start([&](boost::system::error_code error, auto&&...) {
    failure = error;
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire)) {
  }
  if (failure) throw boost::system::system_error(failure);
}

}  // namespace ferry::bench
