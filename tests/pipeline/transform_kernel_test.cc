// ferry_transform_checksum through launch_transform_checksum, from the example's own fatbin: every byte of
// the result and the checksum against the expectation computed here word by word
// (tests/pipeline/client.hpp), and against the host form the sim's twin runs (host_transform.hpp). On
// cuda that checks the GPU kernel; on sim the twin the example registers.
#include "examples/pipeline_server/kernels/transform_kernel.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "examples/pipeline_server/kernels/host_transform.hpp"
#include "examples/pipeline_server/kernels/parameters.hpp"
#include "ferry/marshal.hpp"
#include "tests/pipeline/client.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using namespace ferry::testing;
namespace kernels = ferry::pipeline::kernels;

namespace {

struct kernel_fixture : device_fixture {
  ~kernel_fixture() { BOOST_CHECK_EQUAL(kernels::unload_transform_kernel(), CUDA_SUCCESS); }
};

// Runs the kernel over `bytes` random bytes (in a buffer with 48 bytes of random guard after the
// checksum word) and checks the data, the checksum, and that nothing past them changed.
void check_kernel(std::size_t bytes, pipeline::operation op, std::uint64_t seed) {
  const std::size_t checksum_at = (bytes + 15) / 16 * 16;
  const std::vector<std::uint8_t> initial = random_vector<std::uint8_t>(checksum_at + 8 + 48, seed);
  device_buffer<std::uint8_t> device = device_buffer<std::uint8_t>::allocate(initial.size());
  poke_array(initial.size(), initial.data(), device.get());
  // Blocking: a synchronous copy from pageable memory may return before its DMA is done (the driver
  // orders it only with the legacy stream and blocking streams), and the kernel must see every byte.
  stream s = stream::create(stream_flags::blocking);
  const std::uint64_t mode = op == pipeline::operation::transform ? kernels::transform_in_place : kernels::checksum_only;
  BOOST_REQUIRE_EQUAL(kernels::launch_transform_checksum(device.get().get(), bytes, (device.get() + checksum_at).get(),
                                                         mode, s.ref()),
                      CUDA_SUCCESS);
  s.synchronize();
  const std::vector<std::uint8_t> after = peek_list_array(initial.size(), device.get());

  const std::vector<std::uint8_t> payload(initial.begin(), initial.begin() + static_cast<std::ptrdiff_t>(bytes));
  const expected_reply expected = expected_for(op, payload);
  std::vector<std::uint8_t> reference = payload;
  const std::uint64_t reference_checksum =
      kernels::transform_checksum_range(reinterpret_cast<std::byte*>(reference.data()), bytes, mode);

  BOOST_TEST_CONTEXT(bytes << " bytes, " << pipeline::to_string(op)) {
    BOOST_CHECK_EQUAL(reference_checksum, expected.checksum);
    std::uint64_t checksum = 0;
    std::memcpy(&checksum, after.data() + checksum_at, 8);
    BOOST_CHECK_EQUAL(checksum, expected.checksum);
    const std::vector<std::uint8_t> data(after.begin(), after.begin() + static_cast<std::ptrdiff_t>(bytes));
    const std::vector<std::uint8_t>& wanted = op == pipeline::operation::transform ? expected.body : payload;
    BOOST_CHECK_MESSAGE(same_bytes(data, wanted), "the data differs from the expectation");
    if (op == pipeline::operation::transform) BOOST_CHECK_MESSAGE(same_bytes(reference, wanted), "the host form differs");
    BOOST_CHECK_MESSAGE(std::equal(after.begin() + static_cast<std::ptrdiff_t>(bytes), after.begin() + static_cast<std::ptrdiff_t>(checksum_at),
                                   initial.begin() + static_cast<std::ptrdiff_t>(bytes)),
                        "the kernel wrote past the data");
    BOOST_CHECK_MESSAGE(std::equal(after.begin() + static_cast<std::ptrdiff_t>(checksum_at) + 8, after.end(),
                                   initial.begin() + static_cast<std::ptrdiff_t>(checksum_at) + 8),
                        "the kernel wrote past the checksum");
  }
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(transform_kernel, kernel_fixture)

BOOST_AUTO_TEST_CASE(transform_and_checksum_match_the_definition_at_every_size_and_tail) {
  std::uint64_t seed = 1;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                            std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{31}, std::size_t{4096},
                            std::size_t{65537}, std::size_t{607745}, std::size_t{(3 << 20) + 13}}) {
    for (auto op : {pipeline::operation::transform, pipeline::operation::checksum}) check_kernel(bytes, op, ++seed);
  }
}

BOOST_AUTO_TEST_CASE(arguments_the_kernel_cannot_take_are_refused_before_anything_runs) {
  device_buffer<std::uint8_t> device = device_buffer<std::uint8_t>::allocate(256);
  const CUdeviceptr base = device.get().get();
  stream s = stream::create();
  BOOST_CHECK_EQUAL(kernels::launch_transform_checksum(base + 1, 16, base + 128, kernels::transform_in_place, s.ref()),
                    CUDA_ERROR_INVALID_VALUE);  // data not 16-byte aligned
  BOOST_CHECK_EQUAL(kernels::launch_transform_checksum(base, 16, base + 132, kernels::transform_in_place, s.ref()),
                    CUDA_ERROR_INVALID_VALUE);  // checksum not 8-byte aligned
  BOOST_CHECK_EQUAL(kernels::launch_transform_checksum(base, 16, 0, kernels::transform_in_place, s.ref()),
                    CUDA_ERROR_INVALID_VALUE);  // no checksum word
  BOOST_CHECK_EQUAL(kernels::launch_transform_checksum(base, 16, base + 128, 7, s.ref()), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(kernels::launch_transform_checksum(0, 16, base + 128, kernels::checksum_only, s.ref()),
                    CUDA_ERROR_INVALID_VALUE);  // null data
}

BOOST_AUTO_TEST_SUITE_END()
