#include "bench/transfer_fixture.hpp"

#include <cstring>
#include <filesystem>
#include <iterator>

#include "bench/harness/test_data.hpp"

namespace ferry::bench {

std::size_t thread_count() {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                                std::filesystem::directory_iterator()));
}

transfer_fixture::transfer_fixture(device on)
    : gpu_device(on),
      source(random_bytes(largest, 11)),
      pageable_in(source),
      pageable_out(largest),
      raw_pageable_in(source),
      raw_pageable_out(largest),
      pinned_in(pinned_buffer<std::uint8_t>::allocate(largest)),
      pinned_out(pinned_buffer<std::uint8_t>::allocate(largest)),
      device_in(gpu.allocate<std::uint8_t>(largest)),
      device_out(gpu.allocate<std::uint8_t>(largest)),
      in(device_in.get().get()),
      out(device_out.get().get()) {
  std::memcpy(pinned_in.data(), source.data(), largest);
  check(raw.cuMemcpyHtoD(in, source.data(), largest), "cuMemcpyHtoD");
}

std::function<void()> transfer_fixture::verify_device(std::size_t bytes, std::string what) const {
  return [this, bytes, what = std::move(what)] {
    std::vector<std::uint8_t> back(bytes, 0xA5);
    check(raw.cuMemcpyDtoH(back.data(), out, bytes), "cuMemcpyDtoH");
    require_equal(back.data(), source.data(), bytes, what);
    check(raw.cuMemsetD8(out, 0xA5, bytes), "cuMemsetD8");
  };
}

std::function<void()> transfer_fixture::verify_host(std::uint8_t* where, std::size_t bytes, std::string what) const {
  return [this, where, bytes, what = std::move(what)] {
    require_equal(where, source.data(), bytes, what);
    std::memset(where, 0xA5, bytes);
  };
}

}  // namespace ferry::bench
