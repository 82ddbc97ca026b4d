// Threads that split large memcpys (filling and draining staging chunks) among themselves and the
// calling thread. Two choices come from the time a parked thread takes to run again once woken, long
// and uneven on a virtual machine (bench/host_timers):
// - the caller never waits for a wake-up: it takes slices itself until none is left unclaimed, then
//   waits only for slices already being copied;
// - between jobs the crew spins for `spin` before parking, since a staged transfer hands it its chunks
//   one after another, each sooner than a parked thread would wake.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::detail {

class copy_crew {
 public:
  // `threads` helpers besides the caller (0: the caller copies alone).
  copy_crew(std::size_t threads, std::chrono::microseconds spin);
  copy_crew(const copy_crew&) = delete;
  copy_crew& operator=(const copy_crew&) = delete;
  ~copy_crew();

  // Copies `bytes` in slices of at least `min_slice` bytes (64-byte aligned), shared with the crew;
  // returns when every byte is copied. Several threads may call it at once.
  void copy(std::byte* destination, const std::byte* source, std::size_t bytes);

  // Stops and joins the threads (at process exit too); copy() then runs on the caller alone.
  void stop();

  static constexpr std::size_t min_slice = std::size_t{256} << 10;  // smaller ones cost more to hand over

 private:
  struct job {
    std::byte* destination;
    const std::byte* source;
    std::size_t bytes;
    std::size_t slice;
    std::size_t slices;
    std::atomic<std::size_t> next{0};      // the next unclaimed slice
    std::atomic<std::size_t> finished{0};  // slices copied
    std::atomic<std::size_t> users{0};     // crew threads holding a pointer to it
  };
  static void work_on(job& j);
  void run();

  std::chrono::microseconds spin_;
  std::mutex mutex_;
  std::condition_variable work_posted_;
  std::list<job*> jobs_;                  // under mutex_
  std::size_t parked_ = 0;                // under mutex_
  bool stopping_ = false;                 // under mutex_
  std::atomic<std::uint64_t> posted_{0};  // jobs posted so far: what spinning threads watch
  std::atomic<bool> stopped_{false};
  std::vector<std::thread> threads_;
};

}  // namespace ferry::detail
