// The argument checks of a vectored transfer (engine::poke_blocks / peek_blocks). A list of a thousand
// blocks is checked at a cost far below the copy's: a block whose range lies in the allocation found for
// an earlier block asks the driver nothing (KV-cache blocks live in a few large allocations).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/errors/check.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "ferry/detail/prefetch.hpp"

namespace ferry::detail {
namespace {

std::string block_argument(std::size_t index, const char* side) {
  return "blocks[" + std::to_string(index) + "]." + side;
}

// The allocations found so far for one side of the blocks (most recent first). The list's loop looks a
// block up in the most recent one itself (recent(), kept in registers for a page-locked list's common
// blocks) and calls check() for a block outside it.
class known_allocations {
 public:
  // Checks [address, address + bytes) as any transfer's side is checked (the same messages, naming
  // blocks[index].side), and remembers its allocation.
  [[gnu::noinline]] void check(std::string_view operation, memory_kind kind, std::uintptr_t address,
                               std::size_t bytes, std::size_t index, const char* side) {
    if (address != 0 && (bytes == 0 || holds(address, bytes))) return;
    const std::string argument = block_argument(index, side);
    // Throws for null, unknown or short ranges.
    if (std::optional<known_range> range = check_side(operation, endpoint{kind, address, argument}, 0, bytes)) {
      if (!first_foreign_ && !on_current_device(*range)) {
        first_foreign_ = foreign_block{index, address, range->device};
      }
      if (ranges_.size() == most_remembered) ranges_.pop_back();
      ranges_.insert(ranges_.begin(), *range);
    }
  }
  // The allocation found last (an empty range before any).
  known_range recent() const noexcept { return ranges_.empty() ? known_range{0, 0} : ranges_.front(); }
  // The first block found in memory of another device than the current context's, if any.
  std::optional<foreign_block> first_foreign() const noexcept { return first_foreign_; }

  static bool within(const known_range& r, std::uintptr_t address, std::size_t bytes) noexcept {
    return address >= r.base && address - r.base <= r.size && bytes <= r.size - (address - r.base);
  }

 private:
  bool holds(std::uintptr_t address, std::size_t bytes) const noexcept {
    return std::any_of(ranges_.begin(), ranges_.end(), [&](const known_range& r) { return within(r, address, bytes); });
  }

  static constexpr std::size_t most_remembered = 8;
  std::vector<known_range> ranges_;
  std::optional<foreign_block> first_foreign_;
};

// Pageable memory found not to be device memory, by 2 MiB region: the driver reserves device memory in
// regions of at least that size and alignment, so a region that held no device memory at one address
// holds none anywhere. A list's blocks in one buffer then ask the driver once per region, not per block.
class host_regions {
 public:
  bool verified(std::uintptr_t address, std::size_t bytes) {
    const std::uintptr_t first = address / region_bytes;
    const std::uintptr_t last = (address + bytes - 1) / region_bytes;
    if (last - first > 1) return false;  // a block over several regions: asked as any pageable side is
    for (std::uintptr_t region = first; region <= last; ++region) {
      if (std::find(regions_.begin(), regions_.end(), region) != regions_.end()) continue;
      if (is_device_only_memory(std::max(address, region * region_bytes))) return false;
      if (regions_.size() == most_remembered) regions_.pop_back();
      regions_.insert(regions_.begin(), region);
    }
    return true;
  }

 private:
  static constexpr std::uintptr_t region_bytes = std::uintptr_t{2} << 20;
  static constexpr std::size_t most_remembered = 16;
  std::vector<std::uintptr_t> regions_;
};

// Where the checks put the blocks that hold bytes: put(j, ...) writes the j-th, written(j) says the range it
// writes (the device's for a poke, the host's for a peek) as (begin, bytes).
struct block_sink {  // a list of blocks
  checked_block* out;
  void prefetch(std::size_t, std::size_t) const noexcept {}  // just made by this thread: in its cache
  void put(std::size_t j, std::uintptr_t host, CUdeviceptr device, std::size_t bytes, bool) const noexcept {
    out[j] = {host, device, bytes};
  }
  std::pair<std::uintptr_t, std::size_t> written(std::size_t j, bool to_device) const noexcept {
    return {to_device ? out[j].device : out[j].host, out[j].bytes};
  }
};
struct array_sink {  // copies, as the kernel and the copy engine take them
  copy_arrays arrays;
  // Read prefetches, though the checks write these lines: a line no other core holds comes exclusive
  // either way, and PREFETCHW brings a line that is only in memory no sooner.
  void prefetch(std::size_t first, std::size_t count) const noexcept {
    prefetch_for_reading(arrays.sources + first, count * sizeof(CUdeviceptr));
    prefetch_for_reading(arrays.destinations + first, count * sizeof(CUdeviceptr));
    prefetch_for_reading(arrays.sizes + first, count * sizeof(std::size_t));
  }
  void put(std::size_t j, std::uintptr_t host, CUdeviceptr device, std::size_t bytes, bool to_device) const noexcept {
    arrays.put(j, host, device, bytes, to_device);
  }
  std::pair<std::uintptr_t, std::size_t> written(std::size_t j, bool) const noexcept {
    return {arrays.destinations[j], arrays.sizes[j]};
  }
};

// What the list's loop learns of the written ranges on its way: whether every block has the first one's
// size, and the lowest and highest written address.
struct written_extent {
  std::size_t size = 0;
  bool one_size = true;
  std::uintptr_t lowest = UINTPTR_MAX;
  std::uintptr_t highest = 0;

  void add(std::uintptr_t begin, std::size_t bytes) noexcept {
    if (size == 0) size = bytes;
    one_size = one_size && bytes == size;
    lowest = std::min(lowest, begin);
    highest = std::max(highest, begin);
  }
};

// The common list (KV-cache pages) writes equal-sized blocks into slots of a grid, in any order: true when
// every written range is one slot of such a grid and no slot is written twice, found in one pass over a
// bitmap of the slots. False when the list is no dense grid, or names a slot twice: then the sort below
// decides, and names the blocks. (Sorting is most of a long list's checks: several times this pass.)
template <class Sink>
bool written_slots_distinct(const Sink& sink, std::size_t count, bool to_device, const written_extent& extent) {
  if (count < 2) return true;
  if (!extent.one_size) return false;
  const std::size_t size = extent.size;
  // A sparse grid would make the bitmap cost more than the sort.
  const std::uintptr_t slots = (extent.highest - extent.lowest) / size + 1;
  if (slots > 4 * count + 64) return false;
  std::vector<std::uint64_t> taken((slots + 63) / 64);
  // Slots of a power-of-two size (KV-cache pages) are found by a shift: a division per block would be
  // most of this pass.
  const bool power_of_two = std::has_single_bit(size);
  const int shift = std::countr_zero(size);
  for (std::size_t j = 0; j < count; ++j) {
    const std::uintptr_t offset = sink.written(j, to_device).first - extent.lowest;
    std::uintptr_t slot;
    if (power_of_two) {
      if ((offset & (size - 1)) != 0) return false;
      slot = offset >> shift;
    } else {
      if (offset % size != 0) return false;
      slot = offset / size;
    }
    const std::uint64_t bit = std::uint64_t{1} << (slot % 64);
    if ((taken[slot / 64] & bit) != 0) return false;
    taken[slot / 64] |= bit;
  }
  return true;
}

// The written ranges must not overlap: the blocks move at once, and which of two overlapping writes lands
// would be chance. A grid of slots is checked in one pass; other lists are sorted as bare [begin, end)
// pairs, and the two blocks are looked up in the caller's list (`listed`, empty blocks included) only for
// the message.
template <class Sink>
void check_written_ranges_disjoint(std::string_view operation, const block_source& listed,
                                   std::size_t element_size, const Sink& sink, std::size_t count, bool to_device,
                                   const written_extent& extent) {
  if (written_slots_distinct(sink, count, to_device, extent)) return;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  ranges.reserve(count);
  for (std::size_t j = 0; j < count; ++j) {
    const auto [begin, bytes] = sink.written(j, to_device);
    ranges.emplace_back(begin, begin + bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].first >= ranges[k - 1].second) continue;
    const auto range_of_block = [&](std::size_t i) {
      block_sides b{};
      listed.read(i, std::span(&b, 1));
      const std::uintptr_t begin = to_device ? b.device : b.host;
      return std::pair(begin, begin + b.count * element_size);
    };
    // The two blocks whose ranges these are, in list order (empty ones span no bytes).
    std::vector<std::size_t> found;
    for (std::size_t i = 0; i < listed.size() && found.size() < 2; ++i) {
      const auto range = range_of_block(i);
      if (range.first != range.second && (range == ranges[k - 1] || range == ranges[k])) found.push_back(i);
    }
    const char* side = to_device ? "device" : "host";
    const auto named = [&](std::size_t i) {
      const auto [begin, end] = range_of_block(i);
      return block_argument(i, side) + " [" + hex(begin) + ", " + hex(end) + ")";
    };
    throw_invalid_argument(operation, named(found.at(0)) + " and " + named(found.at(1)) +
                                          " overlap; the blocks' destinations may not overlap");
  }
}

// What the checks have found so far.
struct list_totals {
  std::size_t filled = 0;  // blocks put into the sink
  std::size_t bytes = 0;
  written_extent written;
};

// Checks blocks from `first` on while each is the common block of a page-locked list: bytes that fit, not
// empty, both sides inside the allocations found last (`device_range`, `host_range`), apart from each
// other, and a total that still fits. Each goes into the sink; returns the first block that is not such a
// block, which the caller checks in full. Apart from the full checks, and made once per direction, so that
// its state stays in registers: this loop is most of a long list's initiating call. When the two
// allocations are apart (not one mapped or managed range named by both sides), so is every pair of sides
// inside them, and the loop does not compare each block's sides.
template <bool to_device, class Sink>
[[gnu::noinline]] std::size_t check_common_blocks(std::span<const block_sides> blocks, std::size_t first,
                                                  std::size_t element_size, known_range device_range,
                                                  known_range host_range, Sink sink, list_totals& totals) {
  const bool ranges_apart = device_range.base + device_range.size <= host_range.base ||
                            host_range.base + host_range.size <= device_range.base;
  std::size_t filled = totals.filled;
  std::size_t sum = totals.bytes;
  written_extent extent = totals.written;
  std::size_t i = first;
  for (; i < blocks.size(); ++i) {
    const block_sides& b = blocks[i];
    std::size_t bytes = 0;
    std::size_t next = 0;
    // A null side is in no range: within() needs bytes above zero there.
    if (__builtin_mul_overflow(b.count, element_size, &bytes) || bytes == 0 ||
        !known_allocations::within(device_range, b.device, bytes) ||
        !known_allocations::within(host_range, b.host, bytes) ||
        (!ranges_apart && b.host < b.device + bytes && b.device < b.host + bytes) ||
        __builtin_add_overflow(sum, bytes, &next)) {
      break;
    }
    sum = next;
    extent.add(to_device ? b.device : b.host, bytes);
    sink.put(filled++, b.host, b.device, bytes, to_device);
  }
  totals.filled = filled;
  totals.bytes = sum;
  totals.written = extent;
  return i;
}

template <class Sink>
checked_blocks check_list(std::string_view operation, bool to_device, memory_kind host_kind,
                          const block_source& blocks, std::size_t element_size, Sink sink) {
  list_totals totals;
  known_allocations devices;
  known_allocations pinned_hosts;
  host_regions pageable_hosts;
  const bool pinned = host_kind == memory_kind::pinned_host;
  // The caller's list a run at a time: the run stays in the core's cache, the list is read once. The
  // list and the copies' memory are asked for a window ahead of the checks (the first window at once):
  // both were last touched a while ago (the copies' slab by the GPU), and a pass over lines that are not
  // in the cache waits for memory at each of them, where the prefetches let it wait for many at once.
  std::array<block_sides, 256> run;
  constexpr std::size_t ahead = 4 * run.size();
  const std::size_t listed = blocks.size();
  blocks.prefetch(0, ahead);
  sink.prefetch(0, std::min(ahead, listed));
  for (std::size_t base = 0; base < listed;) {
    if (base + ahead < listed) {
      blocks.prefetch(base + ahead, run.size());
      sink.prefetch(base + ahead, std::min(run.size(), listed - base - ahead));
    }
    const std::span<const block_sides> part(run.data(), blocks.read(base, run));
    if (part.empty()) break;
    // The messages' argument names (blocks[base + k]) are built only for a block that fails a check.
    for (std::size_t k = 0; k < part.size(); ++k) {
      if (pinned) {
        k = to_device ? check_common_blocks<true>(part, k, element_size, devices.recent(), pinned_hosts.recent(),
                                                  sink, totals)
                      : check_common_blocks<false>(part, k, element_size, devices.recent(), pinned_hosts.recent(),
                                                   sink, totals);
        if (k == part.size()) break;
      }
      const block_sides& b = part[k];
      const std::size_t i = base + k;
      std::size_t bytes = 0;
      if (__builtin_mul_overflow(b.count, element_size, &bytes)) {
        byte_size(operation, block_argument(i, "host.size()"), b.count, element_size);  // throws
      }
      if (b.device == 0 || !known_allocations::within(devices.recent(), b.device, bytes)) {
        devices.check(operation, memory_kind::device, b.device, bytes, i, "device");
      }
      if (pinned) {
        pinned_hosts.check(operation, memory_kind::pinned_host, b.host, bytes, i, "host");
      } else if (bytes > 0) {
        // Null, or running past the end of the address space: check_side says which.
        if (b.host == 0 || runs_past_address_space(b.host, 0, bytes)) {
          check_side(operation, endpoint{host_kind, b.host, block_argument(i, "host")}, 0, bytes);
        }
        if (!pageable_hosts.verified(b.host, bytes) && is_device_only_memory(b.host)) {
          throw_invalid_argument(operation, block_argument(i, "host") + " " + hex(b.host) +
                                                " is device memory, not host memory (pass it as a device_ptr)");
        }
      }
      if (bytes == 0) continue;  // checked, but nothing to move (the copy engine refuses empty copies)
      // Mapped or managed memory may be named by both sides.
      if (b.host < b.device + bytes && b.device < b.host + bytes) {
        throw_invalid_argument(operation, block_argument(i, "host") + " [" + hex(b.host) + ", " +
                                              hex(b.host + bytes) + ") and " + block_argument(i, "device") + " [" +
                                              hex(b.device) + ", " + hex(b.device + bytes) + ") overlap");
      }
      if (__builtin_add_overflow(totals.bytes, bytes, &totals.bytes)) {
        throw_invalid_argument(operation, "the blocks' sizes add up past the largest size_t");
      }
      totals.written.add(to_device ? b.device : b.host, bytes);
      sink.put(totals.filled++, b.host, b.device, bytes, to_device);
    }
    base += part.size();
  }
  check_written_ranges_disjoint(operation, blocks, element_size, sink, totals.filled, to_device, totals.written);
  checked_blocks checked;
  checked.copies = totals.filled;
  checked.bytes = totals.bytes;
  checked.foreign_device_block = devices.first_foreign();
  return checked;
}

}  // namespace

checked_blocks plan_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                           const block_source& blocks, std::size_t element_size, const copy_arrays* arrays) {
  if (arrays != nullptr) {
    return check_list(operation, to_device, host_kind, blocks, element_size, array_sink{*arrays});
  }
  // Written by index (room for every block), then cut to the blocks that hold bytes.
  std::vector<checked_block> list(blocks.size());
  checked_blocks checked = check_list(operation, to_device, host_kind, blocks, element_size, block_sink{list.data()});
  list.resize(checked.copies);
  checked.blocks = std::move(list);
  return checked;
}

}  // namespace ferry::detail
