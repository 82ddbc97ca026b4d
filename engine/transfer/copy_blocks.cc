// The argument checks of a vectored transfer (engine::poke_blocks / peek_blocks). A list of a thousand
// blocks is checked at a cost far below the copy's: a block whose range lies in the allocation found for
// an earlier block asks the driver nothing (KV-cache blocks live in a few large allocations).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/errors/check.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"

namespace ferry::detail {
namespace {

std::string block_argument(std::size_t index, const char* side) {
  return "blocks[" + std::to_string(index) + "]." + side;
}

// The allocations found so far for one side of the blocks (most recent first).
class known_allocations {
 public:
  // Checks [address, address + bytes) as any transfer's side is checked (the same messages, naming
  // blocks[index].side), and remembers its allocation. Inline for the common block, one in the
  // allocation found last; the rest out of line.
  void check(std::string_view operation, memory_kind kind, std::uintptr_t address, std::size_t bytes,
             std::size_t index, const char* side) {
    if (address != 0 && !ranges_.empty() && within(ranges_.front(), address, bytes)) return;
    check_further(operation, kind, address, bytes, index, side);
  }
  // The first block found in memory of another device than the current context's, if any.
  std::optional<std::size_t> first_foreign() const noexcept { return first_foreign_; }

 private:
  static bool within(const known_range& r, std::uintptr_t address, std::size_t bytes) noexcept {
    return address >= r.base && address - r.base <= r.size && bytes <= r.size - (address - r.base);
  }
  bool holds(std::uintptr_t address, std::size_t bytes) const noexcept {
    return std::any_of(ranges_.begin(), ranges_.end(), [&](const known_range& r) { return within(r, address, bytes); });
  }
  [[gnu::noinline]] void check_further(std::string_view operation, memory_kind kind, std::uintptr_t address,
                                       std::size_t bytes, std::size_t index, const char* side) {
    if (address != 0 && (bytes == 0 || holds(address, bytes))) return;
    const std::string argument = block_argument(index, side);
    // Throws for null, unknown or short ranges.
    if (std::optional<known_range> range = check_side(operation, endpoint{kind, address, argument}, 0, bytes)) {
      if (!first_foreign_ && !on_current_device(*range)) first_foreign_ = index;
      if (ranges_.size() == most_remembered) ranges_.pop_back();
      ranges_.insert(ranges_.begin(), *range);
    }
  }

  static constexpr std::size_t most_remembered = 8;
  std::vector<known_range> ranges_;
  std::optional<std::size_t> first_foreign_;
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

std::uintptr_t written_begin(const checked_block& b, bool to_device) { return to_device ? b.device : b.host; }

// The common list (KV-cache pages) writes equal-sized blocks into slots of a grid, in any order: true when
// every written range is one slot of such a grid and no slot is written twice, found in one pass over a
// bitmap of the slots. False when the list is no dense grid, or names a slot twice: then the sort below
// decides, and names the blocks. (Sorting is most of a long list's checks: several times this pass.)
bool written_slots_distinct(const std::vector<checked_block>& blocks, bool to_device) {
  std::size_t size = 0;
  std::size_t written = 0;
  std::uintptr_t lowest = UINTPTR_MAX;
  std::uintptr_t highest = 0;
  for (const checked_block& b : blocks) {
    if (b.bytes == 0) continue;
    if (size == 0) size = b.bytes;
    if (b.bytes != size) return false;
    ++written;
    lowest = std::min(lowest, written_begin(b, to_device));
    highest = std::max(highest, written_begin(b, to_device));
  }
  if (written < 2) return true;
  // A sparse grid would make the bitmap cost more than the sort.
  const std::uintptr_t slots = (highest - lowest) / size + 1;
  if (slots > 4 * written + 64) return false;
  std::vector<bool> taken(slots);
  // Slots of a power-of-two size (KV-cache pages) are found by a shift: a division per block would be
  // most of this pass.
  const bool power_of_two = std::has_single_bit(size);
  const int shift = std::countr_zero(size);
  for (const checked_block& b : blocks) {
    if (b.bytes == 0) continue;
    const std::uintptr_t offset = written_begin(b, to_device) - lowest;
    std::uintptr_t slot;
    if (power_of_two) {
      if ((offset & (size - 1)) != 0) return false;
      slot = offset >> shift;
    } else {
      if (offset % size != 0) return false;
      slot = offset / size;
    }
    if (taken[slot]) return false;
    taken[slot] = true;
  }
  return true;
}

// The written ranges (the device's for a poke, the host's for a peek) must not overlap: the blocks move
// at once, and which of two overlapping writes lands would be chance. A grid of slots is checked in one
// pass; other lists are sorted as bare [begin, end) pairs, and the blocks are looked up only for the
// message.
void check_written_ranges_disjoint(std::string_view operation, const std::vector<checked_block>& blocks,
                                   bool to_device) {
  if (written_slots_distinct(blocks, to_device)) return;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  ranges.reserve(blocks.size());
  for (const checked_block& b : blocks) {
    const std::uintptr_t begin = written_begin(b, to_device);
    if (b.bytes > 0) ranges.emplace_back(begin, begin + b.bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].first >= ranges[k - 1].second) continue;
    // The two blocks whose ranges these are, in list order.
    std::vector<std::size_t> found;
    for (std::size_t i = 0; i < blocks.size() && found.size() < 2; ++i) {
      const std::uintptr_t begin = written_begin(blocks[i], to_device);
      if (blocks[i].bytes > 0 && ((begin == ranges[k - 1].first && begin + blocks[i].bytes == ranges[k - 1].second) ||
                                  (begin == ranges[k].first && begin + blocks[i].bytes == ranges[k].second))) {
        found.push_back(i);
      }
    }
    const char* side = to_device ? "device" : "host";
    const auto range_of = [&](std::size_t i) {
      const std::uintptr_t begin = written_begin(blocks[i], to_device);
      return block_argument(i, side) + " [" + hex(begin) + ", " + hex(begin + blocks[i].bytes) + ")";
    };
    throw_invalid_argument(operation, range_of(found.at(0)) + " and " + range_of(found.at(1)) +
                                          " overlap; the blocks' destinations may not overlap");
  }
}

}  // namespace

checked_blocks plan_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                           std::span<const block_sides> blocks, std::size_t element_size) {
  checked_blocks checked;
  checked.blocks.reserve(blocks.size());
  known_allocations devices;
  known_allocations pinned_hosts;
  host_regions pageable_hosts;
  // The messages' argument names are built only for a block that fails a check.
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const block_sides& b = blocks[i];
    if (element_size != 0 && b.count > SIZE_MAX / element_size) {
      byte_size(operation, block_argument(i, "host.size()"), b.count, element_size);  // throws
    }
    const std::size_t bytes = b.count * element_size;
    devices.check(operation, memory_kind::device, b.device, bytes, i, "device");
    if (host_kind == memory_kind::pinned_host) {
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
    // Mapped or managed memory may be named by both sides.
    if (bytes > 0 && b.host < b.device + bytes && b.device < b.host + bytes) {
      throw_invalid_argument(operation, block_argument(i, "host") + " [" + hex(b.host) + ", " + hex(b.host + bytes) +
                                            ") and " + block_argument(i, "device") + " [" + hex(b.device) + ", " +
                                            hex(b.device + bytes) + ") overlap");
    }
    if (bytes > SIZE_MAX - checked.bytes) {
      throw_invalid_argument(operation, "the blocks' sizes add up past the largest size_t");
    }
    checked.bytes += bytes;
    checked.blocks.push_back({b.host, b.device, bytes});
  }
  check_written_ranges_disjoint(operation, checked.blocks, to_device);
  checked.foreign_device_block = devices.first_foreign();
  return checked;
}

}  // namespace ferry::detail
