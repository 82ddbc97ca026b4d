// Words of mapped page-locked memory that the GPU writes (cuStreamWriteValue32) once the work before them
// on a stream is done: the poll policy reads a word instead of asking cuEventQuery, a driver call that
// costs far more than a read and holds driver locks that submissions on other threads then wait for
// (bench/completion_signals, bench/submit_path_costs). Word i belongs to the completion bridge's entry i
// (whoever holds the entry holds its word, so no lock guards them); each use of a word has a new value
// for the GPU to write there, so a word is never mistaken for done by an earlier use. The op's event
// stays the source of truth: a failed stream writes no word.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class completion_flags {
 public:
  struct flag {
    std::uint32_t index;
    std::uint32_t value;  // what the GPU writes when the work before it is done (never 0)
  };

  // Allocates `words` words (CU_MEMHOSTALLOC_DEVICEMAP) with the caller's context current; throws
  // ferry::cuda_error (ferry::out_of_memory when the driver says so) naming the call.
  completion_flags(const driver_table& driver, std::size_t words);
  completion_flags(const completion_flags&) = delete;
  completion_flags& operator=(const completion_flags&) = delete;
  ~completion_flags();

  std::size_t words() const noexcept { return last_value_.size(); }
  // The next use of word `index`, held by the caller alone until it gives the word back (the GPU will not
  // write an older value over it then: a stream runs in order, and a failed one runs no more).
  flag next_use(std::uint32_t index) noexcept;

  // Enqueues the write of `used` on `stream`, after the work already there.
  CUresult enqueue_write(CUstream stream, const flag& used) const;
  bool is_written(const flag& used) const noexcept;
  // Where the GPU writes `used` (for a kernel that writes its own flag).
  CUdeviceptr device_address(const flag& used) const noexcept {
    return device_words_ + used.index * sizeof(std::uint32_t);
  }

  // At process exit: the memory goes with the process; freeing it would call the driver.
  void leak() noexcept { words_ = nullptr; }

 private:
  const driver_table& driver_;
  std::uint32_t* words_ = nullptr;
  CUdeviceptr device_words_ = 0;
  std::vector<std::uint32_t> last_value_;  // per word, the value of its latest use (its holder's)
};

}  // namespace ferry::detail
