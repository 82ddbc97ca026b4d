// Holds a stream back until open(): the stream waits (cuStreamWaitValue32) for a flag in mapped pinned
// memory that the host sets. Works on both backends, so "not yet complete" is observable without races
// on the GPU as in the simulation.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "ferry/marshal.hpp"

namespace ferry::testing {

class stream_gate {
 public:
  explicit stream_gate(stream_ref stream)
      : flag_(pinned_buffer<std::uint32_t>::allocate(1, alloc_flags::device_mapped | alloc_flags::portable)) {
    flag_.data()[0] = 0;
    CUdeviceptr device_flag = get_device_ptr(alloc_flags::none, flag_.get()).get();
    detail::check(detail::driver().cuStreamWaitValue32(stream.get(), device_flag, 1, CU_STREAM_WAIT_VALUE_GEQ),
                  "cuStreamWaitValue32", "stream_gate");
  }
  stream_gate(const stream_gate&) = delete;
  stream_gate& operator=(const stream_gate&) = delete;
  // An open gate: the stream never waits on freed memory.
  ~stream_gate() { open(); }

  void open() noexcept {
    std::atomic_ref<std::uint32_t>(flag_.data()[0]).store(1, std::memory_order_seq_cst);
  }

 private:
  pinned_buffer<std::uint32_t> flag_;
};

}  // namespace ferry::testing
