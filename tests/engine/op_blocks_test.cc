// The reused blocks that ops and their deliveries are made in (ferry/detail/op_blocks.hpp): every block
// held at once is distinct and keeps what was written to it, beyond the blocks a class keeps too; a
// block given back on one thread is taken again on another with nothing of either thread's lost; the
// allocator serves std::allocate_shared, and over-aligned types keep their alignment.
#include "ferry/detail/op_blocks.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "tests/support/random_bytes.hpp"

using namespace ferry::detail;

namespace {

// One size of each class, a size between two classes, and one larger than the largest.
constexpr std::array<std::size_t, 6> sizes{24, 128, 200, 512, 1000, 3000};

struct held_block {
  void* block;
  std::size_t bytes;
  std::vector<std::byte> written;
};

held_block take_and_fill(std::size_t bytes, std::uint64_t seed) {
  held_block held{op_blocks::take(bytes), bytes, std::vector<std::byte>(bytes)};
  ferry::testing::fill_random(std::span<std::byte>(held.written), seed);
  std::memcpy(held.block, held.written.data(), bytes);
  return held;
}

void expect_intact_and_give_back(const held_block& held) {
  BOOST_TEST(std::memcmp(held.block, held.written.data(), held.bytes) == 0, "a block of " << held.bytes
                                                                               << " bytes lost what was written");
  op_blocks::give_back(held.block, held.bytes);
}

}  // namespace

BOOST_AUTO_TEST_CASE(blocks_held_at_once_are_distinct_aligned_and_keep_their_bytes) {
  // More blocks of each size than a class keeps: the ones beyond come from operator new.
  constexpr std::size_t per_size = 5000;
  std::vector<held_block> held;
  std::uint64_t seed = 1;
  for (std::size_t bytes : sizes) {
    for (std::size_t i = 0; i < per_size; ++i) held.push_back(take_and_fill(bytes, seed++));
  }
  std::set<void*> distinct;
  for (const held_block& block : held) {
    distinct.insert(block.block);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(block.block) % alignof(std::max_align_t) == 0);
  }
  BOOST_TEST(distinct.size() == held.size());
  for (const held_block& block : held) expect_intact_and_give_back(block);
}

BOOST_AUTO_TEST_CASE(a_block_given_back_is_taken_again_by_the_next_op_of_its_class) {
  for (std::size_t bytes : {std::size_t{100}, std::size_t{300}, std::size_t{700}}) {
    const held_block first = take_and_fill(bytes, bytes);
    expect_intact_and_give_back(first);
    const held_block second = take_and_fill(bytes, bytes + 1);
    // Reused: the stack gives the block given back last (no other thread takes blocks here).
    BOOST_TEST((second.block == first.block) == op_blocks::reuses_blocks(), "bytes " << bytes);
    expect_intact_and_give_back(second);
  }
}

BOOST_AUTO_TEST_CASE(blocks_taken_on_one_thread_and_given_back_on_another_lose_nothing) {
  // The engine's way: a block is taken by the thread that starts an op and given back by another; here
  // both threads also take blocks of their own meanwhile.
  constexpr int rounds = 20000;
  constexpr std::size_t slots = 64;
  std::array<std::atomic<held_block*>, slots> handed{};
  std::atomic<bool> failed{false};
  std::thread freer([&] {
    std::uint64_t seed = 1u << 30;
    for (int taken = 0; taken < rounds;) {
      for (auto& slot : handed) {
        held_block* item = slot.exchange(nullptr, std::memory_order_acquire);
        if (item == nullptr) continue;
        const held_block own = take_and_fill(item->bytes, seed++);
        if (std::memcmp(item->block, item->written.data(), item->bytes) != 0) failed = true;
        op_blocks::give_back(item->block, item->bytes);
        delete item;
        if (std::memcmp(own.block, own.written.data(), own.bytes) != 0) failed = true;
        op_blocks::give_back(own.block, own.bytes);
        ++taken;
      }
    }
  });
  std::uint64_t seed = 7;
  for (int i = 0; i < rounds; ++i) {
    auto* item = new held_block(take_and_fill(sizes[i % sizes.size()], seed++));
    auto& slot = handed[i % slots];
    held_block* expected = nullptr;
    while (!slot.compare_exchange_weak(expected, item, std::memory_order_release, std::memory_order_relaxed)) {
      expected = nullptr;
    }
  }
  freer.join();
  BOOST_TEST(!failed.load(), "a block handed between threads lost its bytes");
}

BOOST_AUTO_TEST_CASE(the_allocator_makes_shared_objects_and_keeps_over_alignment) {
  struct payload {
    std::array<std::uint64_t, 20> words;
  };
  const auto values = ferry::testing::random_vector<std::uint64_t>(20, 99);
  auto shared = std::allocate_shared<payload>(op_blocks::allocator<payload>());
  std::copy(values.begin(), values.end(), shared->words.begin());
  std::weak_ptr<payload> watch = shared;
  BOOST_TEST(std::equal(values.begin(), values.end(), shared->words.begin()));
  shared.reset();
  BOOST_TEST(watch.expired());

  struct alignas(256) wide {
    std::uint64_t word;
  };
  op_blocks::allocator<wide> allocator;
  wide* one = allocator.allocate(1);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(one) % 256 == 0);
  allocator.deallocate(one, 1);
  BOOST_CHECK_THROW(op_blocks::allocator<payload>().allocate(SIZE_MAX / 8), std::bad_array_new_length);
}
