// Device memory that ferry's kernels cannot reach: another device's. The copy engine reaches it through
// unified addressing, a kernel launched on the engine's device would fault there and fail the context.
// So batches, block lists and the resident copier move such copies by the copy engine, a kernel path
// asked for by name is refused, and so is a fill that needs the fill kernel. Memory of a second context
// of the engine's own device is shared with the engine's kernels and takes them as the engine's own
// memory does. Every byte is checked against random data.
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
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

// An address as the engine's messages write it.
template <class T>
std::string address_of(device_ptr<T> pointer) {
  char text[2 + 2 * sizeof(CUdeviceptr) + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(pointer.get()));
  return text;
}

constexpr std::size_t copies = 64;
constexpr std::size_t words = 1000;  // 4000 bytes each
constexpr std::size_t blocks = 48;   // past batch_kernel_min_copies: a block list for the kernel

struct foreign_fixture : ferry::testing::device_fixture {
  // Batches of every size go to the kernel unless the memory keeps them off it.
  engine& start(engine_options options = {}) {
    options.batch_window = std::chrono::milliseconds(10);  // concurrent even under a sanitizer
    options.batch_kernel_min_copies = 2;
    gpu = std::make_unique<engine>(io.get_executor(), options);
    return *gpu;
  }
  ~foreign_fixture() { gpu.reset(); }

  // Pokes `copies` page-locked blocks of random words into memory of `owner` and peeks them back, all at
  // once so that they meet in batches; checks every word both ways.
  void batched_round_trip(context_ref owner, std::uint64_t seed) {
    const auto values = random_vector<std::uint32_t>(copies * words, seed);
    auto source = pinned_buffer<std::uint32_t>::allocate(copies * words);
    auto back = pinned_buffer<std::uint32_t>::allocate(copies * words);
    std::copy(values.begin(), values.end(), source.data());
    std::fill(back.data(), back.data() + copies * words, 0xA5A5A5A5u);
    memory_in there(owner, std::vector<std::uint32_t>(copies * words, 0x5A5A5A5Au));
    ferry::testing::run_together(io, copies, words * 4, [&](std::size_t i, auto handler) {
      gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data() + i * words), words), there.get() + i * words,
                handler);
    });
    BOOST_TEST(same_bytes(there.read(), values));
    ferry::testing::run_together(io, copies, words * 4, [&](std::size_t i, auto handler) {
      gpu->peek(device_ptr<const std::uint32_t>(there.get() + i * words),
                pinned_span(host_ptr<std::uint32_t>(back.data() + i * words), words), handler);
    });
    BOOST_TEST(std::equal(values.begin(), values.end(), back.data()));
  }

  // Pokes a block list of random words into memory of `owner` (block i into the place of block
  // blocks - 1 - i) by `path`, and checks every block.
  void block_list_into(context_ref owner, batch_path path, std::uint64_t seed) {
    const auto values = random_vector<std::uint32_t>(blocks * words, seed);
    auto source = pinned_buffer<std::uint32_t>::allocate(blocks * words);
    std::copy(values.begin(), values.end(), source.data());
    memory_in there(owner, std::vector<std::uint32_t>(blocks * words, 0x5A5A5A5Au));
    outcome poked;
    gpu->poke_blocks(list_into(source.data(), there.get()), path, record(poked));
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
  }

  static std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> list_into(
      const std::uint32_t* source, device_ptr<std::uint32_t> area) {
    std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> list;
    for (std::size_t i = 0; i < blocks; ++i) {
      list.push_back({pinned_span(host_ptr<const std::uint32_t>(source + i * words), words),
                      area + static_cast<std::ptrdiff_t>((blocks - 1 - i) * words)});
    }
    return list;
  }

  // The engine's device 0, through a context of its own (made without becoming current).
  context second = context::create(device::get(0));
  asio::io_context io;
  std::unique_ptr<engine> gpu;
};

// Device 1's primary context, held for the case (cases with another device's memory need two devices:
// the sim's default, two GPUs on cuda).
struct other_device_fixture : foreign_fixture {
  context other = context::primary(device::get(1));
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(foreign_memory, foreign_fixture)

BOOST_AUTO_TEST_CASE(memory_of_a_second_context_of_the_engines_device_takes_its_kernels) {
  engine_options resident;
  resident.batching = batch_path::kernel;
  resident.resident_copies = true;
  start(resident);
  batched_round_trip(second, 1701);
  BOOST_TEST(gpu->plan_counts().kernel_batches > 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches == 0u);
  block_list_into(second, batch_path::kernel, 1702);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 1u);
  // One copy alone: the resident copier's.
  const auto values = random_vector<std::uint32_t>(words, 1703);
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  std::copy(values.begin(), values.end(), source.data());
  memory_in there(second, std::vector<std::uint32_t>(words, 0x5A5A5A5Au));
  const std::size_t resident_before = gpu->plan_counts().resident;  // the batches' first copies came alone
  outcome poked;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), record(poked));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return poked.calls == 1; }));
  BOOST_TEST(!poked.error);
  BOOST_TEST(same_bytes(there.read(), values));
  BOOST_TEST(gpu->plan_counts().resident == resident_before + 1);
  // Elements of 8 bytes: the fill kernel.
  bool set = false;
  gpu->memset(device_ptr<std::uint64_t>(there.get().get()), words / 2, std::uint64_t{0x0123456789ABCDEFull},
              [&](boost::system::error_code error) {
                BOOST_TEST(!error);
                set = true;
              });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return set; }));
  const std::vector<std::uint32_t> filled = there.read();
  bool every_word = true;
  for (std::size_t i = 0; i < words; ++i) every_word = every_word && filled[i] == (i % 2 ? 0x01234567u : 0x89ABCDEFu);
  BOOST_TEST(every_word);
}

// Nothing is touched: the kernel path may be asked for whatever the memory (the fuzzer's corpus has it).
BOOST_AUTO_TEST_CASE(a_copy_of_no_bytes_takes_the_kernel_path_asked_for) {
  start();
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  auto there = gpu->allocate<std::uint32_t>(words);
  outcome empty;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), 0), there.get(), batch_path::kernel,
            record(empty));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return empty.calls == 1; }));
  BOOST_TEST(!empty.error);
  BOOST_TEST(empty.bytes == 0u);
}

BOOST_FIXTURE_TEST_CASE(batched_copies_of_another_devices_memory_take_the_copy_engine, other_device_fixture,
                        *ferry::testing::only_with_two_devices()) {
  engine_options by_kernel;
  by_kernel.batching = batch_path::kernel;  // the engine's choice: such copies still take the copy engine
  start(by_kernel);
  batched_round_trip(other, 1711);
  const plan_counts counted = gpu->plan_counts();
  BOOST_TEST(counted.batched > 0u);
  BOOST_TEST(counted.kernel_batches == 0u);
  BOOST_TEST(counted.copy_engine_batches > 0u);
}

// The refusal names the side (or block) in another device's memory, the device it is on and the engine's.
BOOST_FIXTURE_TEST_CASE(the_kernel_asked_for_another_devices_memory_is_refused_and_the_copy_engine_moves_it,
                        other_device_fixture, *ferry::testing::only_with_two_devices()) {
  start();
  BOOST_REQUIRE(gpu->device_ordinal() == 0);
  const auto values = random_vector<std::uint32_t>(words, 1712);
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  std::copy(values.begin(), values.end(), source.data());
  memory_in there(other, std::vector<std::uint32_t>(words, 0x5A5A5A5Au));
  auto here = gpu->allocate<std::uint32_t>(words);
  const std::string kernel_refused = "; the engine's kernel cannot reach another device's memory (the copy engine "
                                     "can): give copy_engine or no batch path";
  const std::string on_device_1 = " is memory of device 1, not of the engine's device 0";
  outcome never;
  expect_error<std::invalid_argument>(
      [&] {
        gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), batch_path::kernel,
                  record(never));
      },
      {"engine::poke: transfer_options::batching is kernel; destination " + address_of(there.get()) + on_device_1 +
       kernel_refused});
  expect_error<std::invalid_argument>(
      [&] {
        gpu->peek(device_ptr<const std::uint32_t>(there.get()),
                  pinned_span(host_ptr<std::uint32_t>(source.data()), words), batch_path::kernel, record(never));
      },
      {"engine::peek: transfer_options::batching is kernel; source " + address_of(there.get()) + on_device_1 +
       kernel_refused});
  expect_error<std::invalid_argument>(
      [&] {
        gpu->copy(device_ptr<const std::uint32_t>(here.get()), there.get(), words, batch_path::kernel, record(never));
      },
      {"engine::copy: transfer_options::batching is kernel; destination " + address_of(there.get()) + on_device_1 +
       kernel_refused});
  memory_in also_there(other, std::vector<std::uint32_t>(words, 0x5A5A5A5Au));
  expect_error<std::invalid_argument>(
      [&] {
        gpu->copy(device_ptr<const std::uint32_t>(there.get()), also_there.get(), words, batch_path::kernel,
                  record(never));
      },
      {"engine::copy: transfer_options::batching is kernel; source " + address_of(there.get()) + on_device_1 +
       "; destination " + address_of(also_there.get()) + on_device_1 + kernel_refused});
  auto list_source = pinned_buffer<std::uint32_t>::allocate(blocks * words);
  memory_in listed(other, std::vector<std::uint32_t>(blocks * words, 0x5A5A5A5Au));
  const auto poked = list_into(list_source.data(), listed.get());
  expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(poked, batch_path::kernel, record(never)); },
      {"engine::poke_blocks: transfer_options::batching is kernel, but blocks[0].device " +
       address_of(poked[0].device) + on_device_1 +
       "; the engine's kernel cannot reach another device's memory (the copy engine can): choose automatic or "
       "copy_engine"});
  // The first block in another device's memory is named, whichever side of the copy it is.
  auto list_back = pinned_buffer<std::uint32_t>::allocate(3 * words);
  auto own = gpu->allocate<std::uint32_t>(2 * words);
  const std::vector<block_pair<pinned_span<std::uint32_t>, const std::uint32_t>> peeked{
      {pinned_span(host_ptr<std::uint32_t>(list_back.data()), words), own.get()},
      {pinned_span(host_ptr<std::uint32_t>(list_back.data() + words), words), own.get() + words},
      {pinned_span(host_ptr<std::uint32_t>(list_back.data() + 2 * words), words), there.get()}};
  expect_error<std::invalid_argument>(
      [&] { gpu->peek_blocks(peeked, batch_path::kernel, record(never)); },
      {"engine::peek_blocks: transfer_options::batching is kernel, but blocks[2].device " + address_of(there.get()) +
       on_device_1 +
       "; the engine's kernel cannot reach another device's memory (the copy engine can): choose automatic or "
       "copy_engine"});
  expect_error<std::invalid_argument>(
      [&] {
        gpu->memset(device_ptr<std::uint64_t>(there.get().get()), words / 2, std::uint64_t{7},
                    [&](boost::system::error_code) { ++never.calls; });
      },
      {"engine::memset: destination", "is memory of device 1, not of the device the fill kernel runs on"});
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(never.calls == 0);
  BOOST_TEST(same_bytes(there.read(), std::vector<std::uint32_t>(words, 0x5A5A5A5Au)));
  BOOST_TEST(same_bytes(also_there.read(), std::vector<std::uint32_t>(words, 0x5A5A5A5Au)));
  BOOST_TEST(same_bytes(listed.read(), std::vector<std::uint32_t>(blocks * words, 0x5A5A5A5Au)));
  outcome moved;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), batch_path::copy_engine,
            record(moved));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return moved.calls == 1; }));
  BOOST_TEST(!moved.error);
  BOOST_TEST(same_bytes(there.read(), values));
}

BOOST_FIXTURE_TEST_CASE(block_lists_and_single_copies_of_another_devices_memory_take_the_copy_engine,
                        other_device_fixture, *ferry::testing::only_with_two_devices()) {
  engine_options resident;
  resident.resident_copies = true;
  start(resident);
  block_list_into(other, batch_path::automatic, 1713);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 1u);
  const auto values = random_vector<std::uint32_t>(words, 1714);
  auto source = pinned_buffer<std::uint32_t>::allocate(words);
  std::copy(values.begin(), values.end(), source.data());
  memory_in there(other, std::vector<std::uint32_t>(words, 0x5A5A5A5Au));
  outcome poked;
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.data()), words), there.get(), record(poked));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return poked.calls == 1; }));
  BOOST_TEST(!poked.error);
  BOOST_TEST(same_bytes(there.read(), values));
  BOOST_TEST(gpu->plan_counts().resident == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
