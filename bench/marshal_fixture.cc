#include "bench/marshal_fixture.hpp"

#include <cstring>
#include <random>

#include "bench/harness/test_data.hpp"

namespace ferry::bench {
namespace {

std::vector<std::uint32_t> random_words(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint32_t> values(n);
  std::mt19937_64 generator(seed);
  for (auto& v : values) v = static_cast<std::uint32_t>(generator());
  return values;
}

}  // namespace

marshal_fixture::marshal_fixture(device gpu, context_ref primary)
    : gpu(gpu),
      primary(primary),
      source_values(random_words(words, 1)),
      pageable_in(source_values),
      pageable_out(words),
      pinned_in(pinned_buffer<std::uint32_t>::allocate(words)),
      pinned_out(pinned_buffer<std::uint32_t>::allocate(words)),
      device_a(device_buffer<std::uint32_t>::allocate(words)),
      device_b(device_buffer<std::uint32_t>::allocate(words)),
      a(device_a.get().get()),
      b(device_b.get().get()) {
  std::memcpy(pinned_in.data(), source_values.data(), transfer_bytes);
  poke_array(words, source_values.data(), device_a.get());
}

std::function<void()> marshal_fixture::verify_device(CUdeviceptr where, std::string what) {
  return [this, where, what = std::move(what)] {
    std::memset(pageable_out.data(), 0xA5, transfer_bytes);
    check(raw.cuMemcpyDtoH(pageable_out.data(), where, transfer_bytes), "cuMemcpyDtoH");
    require_equal(pageable_out.data(), source_values.data(), transfer_bytes, what);
  };
}

std::function<void()> marshal_fixture::verify_host(const std::uint32_t* where, std::string what) const {
  return [this, where, what = std::move(what)] { require_equal(where, source_values.data(), transfer_bytes, what); };
}

void marshal_fixture::poison_host(std::uint32_t* where) const { std::memset(where, 0xA5, transfer_bytes); }

void marshal_fixture::poison_device(CUdeviceptr where) const {
  check(raw.cuMemsetD8(where, 0xA5, transfer_bytes), "cuMemsetD8");
}

comparison_spec marshal_fixture::moving(std::string name, std::function<void()> ferry, std::function<void()> raw,
                                        std::function<void()> verify) {
  return {std::move(name), transfer_bytes, 1, 2, 7, std::move(ferry), std::move(raw), std::move(verify)};
}

}  // namespace ferry::bench
