// Device memory of another context than the engine's (a second context of the same device here; another
// device's memory is the same case): the copy engine reaches it through unified addressing, ferry's
// kernels, launched in the engine's context, would fault there and fail the context. So batches,
// block lists and the resident copier move such copies by the copy engine, a kernel path asked for
// by name is refused, and so is a fill that needs the fill kernel. Every byte is checked against random
// data.
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/peer_memory.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::memory_in;
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t copies = 64;
constexpr std::size_t words = 1000;  // 4000 bytes each

struct foreign_fixture : ferry::testing::device_fixture {
  // Batches of every size go to the kernel unless the memory keeps them off it.
  engine& start(engine_options options = {}) {
    options.batch_window = std::chrono::milliseconds(10);  // concurrent even under a sanitizer
    options.batch_kernel_min_copies = 2;
    gpu = std::make_unique<engine>(io.get_executor(), options);
    return *gpu;
  }
  ~foreign_fixture() { gpu.reset(); }

  // Starts every copy at once (start_copy(i, handler)), so that they meet in batches, and runs the
  // io_context until each has moved its bytes.
  template <class Start>
  void run_together(Start start_copy) {
    ferry::testing::run_together(io, copies, words * 4, start_copy);
  }

  // Made without becoming current: the second context is current only around memory_in's own calls.
  context other = context::create(device::get(0));
  asio::io_context io;
  std::unique_ptr<engine> gpu;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(foreign_memory, foreign_fixture)

BOOST_AUTO_TEST_CASE(batched_copies_to_and_from_another_contexts_memory_take_the_copy_engine) {
  engine_options by_kernel;
  by_kernel.batching = batch_path::kernel;  // the engine's choice: such copies still take the copy engine
  start(by_kernel);
  const auto values = random_vector<std::uint32_t>(copies * words, 1701);
  auto source = pinned_buffer<std::uint32_t>::allocate(copies * words);
  auto back = pinned_buffer<std::uint32_t>::allocate(copies * words);
  std::copy(values.begin(), values.end(), source.data());
  std::fill(back.data(), back.data() + copies * words, 0xA5A5A5A5u);
  memory_in there(other, std::vector<std::uint32_t>(copies * words, 0x5A5A5A5Au));
  run_together([&](std::size_t i, auto handler) {
    gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data() + i * words), words), there.get() + i * words,
              handler);
  });
  BOOST_TEST(same_bytes(there.read(), values));
  run_together([&](std::size_t i, auto handler) {
    gpu->peek(device_ptr<const std::uint32_t>(there.get() + i * words),
              pinned_span(host_ptr<std::uint32_t>(back.data() + i * words), words), handler);
  });
  BOOST_TEST(std::equal(values.begin(), values.end(), back.data()));
  const plan_counts counted = gpu->plan_counts();
  BOOST_TEST(counted.batched > 0u);
  BOOST_TEST(counted.kernel_batches == 0u);
  BOOST_TEST(counted.copy_engine_batches > 0u);
}

BOOST_AUTO_TEST_CASE(the_kernel_batch_path_asked_for_another_contexts_memory_is_refused) {
  start();
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  memory_in there(other, random_vector<std::uint32_t>(words, 1702));
  outcome never;
  expect_error<std::invalid_argument>(
      [&] {
        gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), batch_path::kernel,
                  record(never));
      },
      {"engine::poke: transfer_options::batching is kernel; a device side is memory of another context than the "
       "engine's",
       "give copy_engine or no batch path"});
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(never.calls == 0);
  // The copy engine, asked for by name, moves it.
  std::copy_n(random_vector<std::uint32_t>(words, 1703).begin(), words, source.data());
  outcome moved;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), batch_path::copy_engine,
            record(moved));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return moved.calls == 1; }));
  BOOST_TEST(!moved.error);
  BOOST_TEST(same_bytes(there.read(), random_vector<std::uint32_t>(words, 1703)));
}

BOOST_AUTO_TEST_CASE(a_block_list_in_another_contexts_memory_takes_the_copy_engine_and_refuses_the_kernel) {
  start();
  constexpr std::size_t blocks = 48;  // past batch_kernel_min_copies: the kernel's, but for the memory
  const auto values = random_vector<std::uint32_t>(blocks * words, 1704);
  auto source = pinned_buffer<std::uint32_t>::allocate(blocks * words);
  std::copy(values.begin(), values.end(), source.data());
  memory_in there(other, std::vector<std::uint32_t>(blocks * words, 0x5A5A5A5Au));
  std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> list;
  for (std::size_t i = 0; i < blocks; ++i) {  // block i lands in the place of block blocks - 1 - i
    list.push_back({pinned_span(host_ptr<const std::uint32_t>(source.data() + i * words), words),
                    there.get() + (blocks - 1 - i) * words});
  }
  outcome refused;
  expect_error<std::invalid_argument>([&] { gpu->poke_blocks(list, batch_path::kernel, record(refused)); },
                                      {"engine::poke_blocks: transfer_options::batching is kernel, but "
                                       "blocks[0].device is memory of another context than the engine's"});
  outcome poked;
  gpu->poke_blocks(list, record(poked));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return poked.calls == 1; }));
  BOOST_TEST(!poked.error);
  BOOST_TEST(poked.bytes == blocks * words * 4);
  const std::vector<std::uint32_t> landed = there.read();
  bool every_block = true;
  for (std::size_t i = 0; i < blocks; ++i) {
    every_block = every_block && std::equal(values.begin() + i * words, values.begin() + (i + 1) * words,
                                            landed.begin() + (blocks - 1 - i) * words);
  }
  BOOST_TEST(every_block);
  BOOST_TEST(refused.calls == 0);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 1u);
}

BOOST_AUTO_TEST_CASE(the_resident_copier_leaves_another_contexts_memory_to_the_copy_engine) {
  engine_options resident;
  resident.resident_copies = true;
  start(resident);
  const auto values = random_vector<std::uint32_t>(words, 1705);
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  std::copy(values.begin(), values.end(), source.data());
  memory_in there(other, std::vector<std::uint32_t>(words, 0x5A5A5A5Au));
  outcome poked;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), record(poked));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return poked.calls == 1; }));
  BOOST_TEST(!poked.error);
  BOOST_TEST(same_bytes(there.read(), values));
  BOOST_TEST(gpu->plan_counts().resident == 0u);
  BOOST_TEST(gpu->plan_counts().pinned == 1u);
}

BOOST_AUTO_TEST_CASE(a_fill_that_needs_the_fill_kernel_is_refused_for_another_contexts_memory) {
  start();
  memory_in there(other, random_vector<std::uint32_t>(2 * words, 1706));
  const std::vector<std::uint32_t> before = there.read();
  outcome never;
  expect_error<std::invalid_argument>(
      [&] {
        gpu->memset(device_ptr<std::uint64_t>(there.get().get()), words,
                    std::uint64_t{0x0123456789ABCDEFull}, [&](boost::system::error_code error) {
                      ++never.calls;
                      never.error = error;
                    });
      },
      {"engine::memset: destination", "is memory of another context than the one the fill kernel runs in",
       "elements of 8 bytes are set by a kernel"});
  BOOST_TEST(same_bytes(there.read(), before));
  // Elements of 4 bytes are the driver's memset, which reaches it.
  bool set = false;
  gpu->memset(there.get(), 2 * words, std::uint32_t{0x600DF00Du}, [&](boost::system::error_code error) {
    BOOST_TEST(!error);
    set = true;
  });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return set; }));
  BOOST_TEST(same_bytes(there.read(), std::vector<std::uint32_t>(2 * words, 0x600DF00Du)));
  BOOST_TEST(never.calls == 0);
}

BOOST_AUTO_TEST_SUITE_END()
