// The parameters of the kernels in kernels/*.cu, as one struct per kernel passed by value. The launcher
// (engine/kernels), the kernels and their host twins all read this one definition, so the layout in
// kernelParams cannot drift between them. Plain 64-bit fields: the same layout under nvcc and g++.
#pragma once

#include <cstdint>

namespace ferry::detail::kernels {

// A 16-byte pattern: byte k is byte k % 8 of `low` (k < 8) or of `high` (k >= 8), least significant
// first, since both the host and the GPU are little-endian. Fills repeat it from their first byte.
struct pattern16 {
  std::uint64_t low;
  std::uint64_t high;
};

// ferry_fill_8 and ferry_fill_16: `count` elements of 8 or 16 bytes from `destination`, which needs no
// particular alignment. ferry_fill_8 reads pattern.low only (pattern.high is ignored), so that an
// 8-byte fill cannot be handed two different halves.
struct fill_parameters {
  std::uint64_t destination;
  std::uint64_t count;
  pattern16 pattern;
};

// ferry_fill_2d: `height` rows of `row_bytes` bytes, row y at base + y * pitch. The launcher replicates
// the element (1, 2, 4, 8 or 16 bytes) into the 16-byte pattern, which each row repeats from its first
// byte; the kernel itself never needs the element size.
struct fill_2d_parameters {
  std::uint64_t base;
  std::uint64_t pitch;
  std::uint64_t row_bytes;
  std::uint64_t height;
  pattern16 pattern;
};

// ferry_copy_blocks: for i in [0, count), copy sizes[i] bytes from sources[i] to destinations[i]. The
// three are device addresses of arrays of `count` 64-bit words. Blocks run in no particular order and
// concurrently: no destination may overlap another block's destination or any source.
struct copy_blocks_parameters {
  std::uint64_t sources;
  std::uint64_t destinations;
  std::uint64_t sizes;
  std::uint64_t count;
};

// ferry_copy_span: `bytes` bytes from `source` to `destination` (device addresses, no alignment needed,
// the ranges disjoint), by the whole grid.
struct copy_span_parameters {
  std::uint64_t source;
  std::uint64_t destination;
  std::uint64_t bytes;
};

// ferry_resident_copy: one block of threads that stays on the GPU and copies what the host posts to a
// ring of `slots` slots (mapped page-locked memory at device address `ring`), entry i in slot i % slots,
// from entry `first` on. Every word of an entry carries the entry's tag (resident_tag(i)) in its top 16
// bits, so that the kernel reads the slot's words together, in one read of its line over the link, and
// takes the entry once every word carries its tag: each word is written and read whole, so a slot read
// while the host rewrites it shows some word still without the tag, never a mix that passes. The kernel
// then copies `bytes` bytes from `source` to `destination` (device-accessible addresses, disjoint
// ranges) and, after a system-wide fence (the copied bytes are visible before the words are), writes
// i + 1 to the word at `consumed` (the host may then reuse the slot) and `flag_value` to the 32-bit word
// at `flag` (mapped page-locked memory). An entry of kind resident_stop ends the kernel once every entry
// before it is done.
inline constexpr std::uint32_t resident_copy_entry = 0;
inline constexpr std::uint32_t resident_stop = 1;

// Where a slot word's tag sits, and the values below it: addresses and sizes under 2^48 fit (the host
// posts nothing else to the ring).
inline constexpr unsigned resident_tag_shift = 48;
inline constexpr std::uint64_t resident_value_limit = std::uint64_t{1} << resident_tag_shift;
// Entry i's tag, 1 to 65535 (never 0, the word of a slot never written). The entries that take turns in
// one slot (i, i + slots, ...) have different tags as long as the ring has fewer than 65535 slots.
constexpr std::uint64_t resident_tag(std::uint64_t index) { return index % 0xffff + 1; }
constexpr std::uint64_t resident_word(std::uint64_t value, std::uint64_t index) {
  return value | resident_tag(index) << resident_tag_shift;
}
constexpr bool resident_word_of(std::uint64_t word, std::uint64_t index) {
  return word >> resident_tag_shift == resident_tag(index);
}
constexpr std::uint64_t resident_value(std::uint64_t word) { return word & (resident_value_limit - 1); }

// The words that carry an entry, from the slot's start.
inline constexpr unsigned resident_slot_words = 5;

struct resident_slot {
  std::uint64_t words[resident_slot_words];  // resident_words: source, destination, bytes, flag, flag value and kind
  std::uint64_t unused[8 - resident_slot_words];  // one slot per 64-byte line: the kernel reads a line per entry
};
static_assert(sizeof(resident_slot) == 64);

// An entry of the ring, as the host posts it and the kernel takes it.
struct resident_entry {
  std::uint64_t source;
  std::uint64_t destination;
  std::uint64_t bytes;
  std::uint64_t flag;
  std::uint32_t flag_value;
  std::uint32_t kind;  // resident_copy_entry or resident_stop
};

// Entry `index`'s slot words: its fields (each below resident_value_limit), each with the entry's tag.
constexpr void resident_words(const resident_entry& entry, std::uint64_t index,
                              std::uint64_t (&words)[resident_slot_words]) {
  const std::uint64_t values[resident_slot_words] = {entry.source, entry.destination, entry.bytes, entry.flag,
                                                     entry.flag_value | std::uint64_t{entry.kind} << 32};
  for (unsigned k = 0; k < resident_slot_words; ++k) words[k] = resident_word(values[k], index);
}

// The entry that slot words carrying its tag hold.
constexpr resident_entry resident_entry_of(const std::uint64_t (&words)[resident_slot_words]) {
  const std::uint64_t last = resident_value(words[4]);
  return {resident_value(words[0]), resident_value(words[1]), resident_value(words[2]), resident_value(words[3]),
          static_cast<std::uint32_t>(last), static_cast<std::uint32_t>(last >> 32)};
}

struct resident_copy_parameters {
  std::uint64_t ring;
  std::uint64_t slots;
  std::uint64_t first;
  std::uint64_t consumed;
};

// Threads per block, fixed at compile time so that the kernels can promise it in __launch_bounds__
// (which lets ptxas budget registers for full occupancy) and the launcher cannot ask for more.
// Fills: 256 threads, 8 blocks per SM at Hopper's 2048 resident threads, a common sweet spot for
// store-only streams. Copies: one block of threads per copied block; 128 threads keep 16 copied blocks
// in flight per SM, which matters when most blocks are small, while 128 x 16 bytes = 2 KiB per pass still
// needs only 32 passes for the largest (64 KiB) blocks we expect.
inline constexpr unsigned fill_block_threads = 256;
// 16-byte units each thread of a 1-D fill stores in its block's tile.
inline constexpr unsigned fill_units_per_thread = 4;
inline constexpr unsigned copy_block_threads = 128;
// A span copy's blocks all take the same share, so the block size only sets how the grid's one wave
// is cut: 256 threads, 8 blocks per SM.
inline constexpr unsigned copy_span_threads = 256;
// The resident copier is one block: 1024 threads keep 64 KiB of 16-byte loads in flight (four per
// thread), so that a 64 KiB copy from host memory waits out the link's latency once (a smaller block would
// wait it out once for each share it can hold in flight, and take longer than the copy engine), while the
// block holds half of one SM's threads.
inline constexpr unsigned resident_copy_threads = 1024;

}  // namespace ferry::detail::kernels
