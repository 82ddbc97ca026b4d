#include "engine/async/copy_crew.hpp"

#include <algorithm>
#include <cstring>

#include "ferry/detail/spin_pause.hpp"

namespace ferry::detail {

copy_crew::copy_crew(std::size_t threads, std::chrono::microseconds spin) : spin_(spin) {
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

copy_crew::~copy_crew() { stop(); }

void copy_crew::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_posted_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  stopped_ = true;
}

void copy_crew::work_on(job& j) {
  for (std::size_t i = j.next.fetch_add(1); i < j.slices; i = j.next.fetch_add(1)) {
    const std::size_t begin = i * j.slice;
    const std::size_t length = std::min(j.bytes, begin + j.slice) - begin;
    std::memcpy(j.destination + begin, j.source + begin, length);
    j.finished.fetch_add(1, std::memory_order_release);
  }
}

void copy_crew::copy(std::byte* destination, const std::byte* source, std::size_t bytes) {
  const std::size_t slices = std::clamp<std::size_t>(bytes / min_slice, 1, threads_.size() + 1);
  if (slices == 1 || stopped_.load()) {
    std::memcpy(destination, source, bytes);
    return;
  }
  job j;
  j.destination = destination;
  j.source = source;
  j.bytes = bytes;
  // Rounded up twice (to whole bytes, then to 64): bytes / slices alone loses the remainder whenever
  // the quotient is already a multiple of 64 (tests/reliability:staged_slices_test).
  j.slice = ((bytes + slices - 1) / slices + 63) & ~std::size_t{63};
  j.slices = (bytes + j.slice - 1) / j.slice;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(&j);
    posted_.fetch_add(1, std::memory_order_release);  // under the lock: a thread about to park sees it
    wake = parked_ > 0;
  }
  if (wake) work_posted_.notify_all();
  work_on(j);
  while (j.finished.load(std::memory_order_acquire) < j.slices) {
    spin_pause();  // slices other threads are copying: microseconds
  }
  {
    std::lock_guard lock(mutex_);
    jobs_.remove(&j);
  }
  // Crew threads that picked the job before it left the list may still hold it.
  while (j.users.load(std::memory_order_acquire) != 0) spin_pause();
}

void copy_crew::run() {
  std::uint64_t seen = posted_.load();
  while (true) {
    job* picked = nullptr;
    {
      std::unique_lock lock(mutex_);
      if (stopping_) return;
      for (job* j : jobs_) {
        if (j->next.load() < j->slices) {
          picked = j;
          picked->users.fetch_add(1);
          break;
        }
      }
      if (!picked) {
        lock.unlock();
        // Nothing to do: watch for the next job for a while, then park.
        const auto until = std::chrono::steady_clock::now() + spin_;
        while (posted_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until) {
          for (int i = 0; i < 32; ++i) spin_pause();
        }
        lock.lock();
        if (posted_.load() == seen && !stopping_) {
          ++parked_;
          work_posted_.wait(lock, [&] { return posted_.load() != seen || stopping_; });
          --parked_;
        }
        seen = posted_.load();
        continue;
      }
    }
    work_on(*picked);
    picked->users.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace ferry::detail
