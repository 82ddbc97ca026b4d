// The host forms of the kernels in kernels/: the sim backend's twins run them, and the tests on a GPU
// run them as the reference the kernels are compared with, so twin and reference are one piece of code.
// They take the kernels' own parameter structs and cut every range with the kernels' own layout
// functions (kernels/layout.hpp), so that the sim runs the splits the GPU runs; only the accesses differ
// (memcpy in order here, wide loads and stores in parallel there).
//
// Device addresses become host memory through `to_host(address, bytes) -> void*`, which throws when
// [address, address + bytes) is not memory the kernel may touch: ferry::sim::host_address in the twins,
// a map onto host copies of device buffers in the tests.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/layout.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail::host_kernels {

// Writes bytes [0, bytes) of a fill that repeats `pattern` from device address `address` to `host`,
// the memory that stands for that address.
void fill_range(std::uint64_t address, std::byte* host, std::uint64_t bytes, kernels::pattern16 pattern) noexcept;

// Copies `bytes` bytes from `from` to `to`, the memory that stands for device addresses `source` and
// `destination`, in the pieces ferry_copy_blocks cuts.
void copy_range(std::uint64_t source, std::uint64_t destination, const std::byte* from, std::byte* to,
                std::uint64_t bytes) noexcept;

// ferry_fill_8 (element_size 8) and ferry_fill_16 (element_size 16).
template <class ToHost>
void fill(std::uint64_t element_size, const kernels::fill_parameters& p, ToHost&& to_host) {
  const std::uint64_t bytes = p.count * element_size;
  if (bytes == 0) return;
  const kernels::pattern16 pattern = element_size == 8 ? kernels::pattern16{p.pattern.low, p.pattern.low} : p.pattern;
  fill_range(p.destination, static_cast<std::byte*>(to_host(p.destination, bytes)), bytes, pattern);
}

// ferry_fill_2d. Each row is looked up on its own: the kernel touches the rows, not the gaps between them.
template <class ToHost>
void fill_2d(const kernels::fill_2d_parameters& p, ToHost&& to_host) {
  if (p.row_bytes == 0) return;
  for (std::uint64_t y = 0; y < p.height; ++y) {
    const std::uint64_t row = p.base + y * p.pitch;
    fill_range(row, static_cast<std::byte*>(to_host(row, p.row_bytes)), p.row_bytes, p.pattern);
  }
}

// ferry_copy_blocks. The three arrays are device memory too, read through to_host like the blocks.
// Returns the bytes moved.
template <class ToHost>
std::uint64_t copy_blocks(const kernels::copy_blocks_parameters& p, ToHost&& to_host) {
  if (p.count == 0) return 0;
  const std::uint64_t array_bytes = p.count * sizeof(std::uint64_t);
  const auto* sources = static_cast<const std::byte*>(to_host(p.sources, array_bytes));
  const auto* destinations = static_cast<const std::byte*>(to_host(p.destinations, array_bytes));
  const auto* sizes = static_cast<const std::byte*>(to_host(p.sizes, array_bytes));
  const auto word = [](const std::byte* array, std::uint64_t i) {
    std::uint64_t value = 0;
    std::memcpy(&value, array + i * sizeof value, sizeof value);
    return value;
  };
  std::uint64_t moved = 0;
  for (std::uint64_t i = 0; i < p.count; ++i) {
    const std::uint64_t source = word(sources, i);
    const std::uint64_t destination = word(destinations, i);
    const std::uint64_t bytes = word(sizes, i);
    if (bytes == 0) continue;  // the kernel touches neither end of an empty block
    copy_range(source, destination, static_cast<const std::byte*>(to_host(source, bytes)),
               static_cast<std::byte*>(to_host(destination, bytes)), bytes);
    moved += bytes;
  }
  return moved;
}

// ferry_copy_span.
template <class ToHost>
void copy_span(const kernels::copy_span_parameters& p, ToHost&& to_host) {
  if (p.bytes == 0) return;
  copy_range(p.source, p.destination, static_cast<const std::byte*>(to_host(p.source, p.bytes)),
             static_cast<std::byte*>(to_host(p.destination, p.bytes)), p.bytes);
}

// ferry_resident_copy: the ring's entries in order, each taken once every word of its slot carries its
// tag, until an entry of kind resident_stop. `wait(looks)` is called while the next entry is not there
// yet, with how many looks found it missing so far; `moved(bytes)` after an entry's bytes are copied,
// before its flag is written.
template <class ToHost, class Wait, class Moved>
void resident_copy(const kernels::resident_copy_parameters& p, ToHost&& to_host, Wait&& wait, Moved&& moved) {
  auto* const ring = static_cast<kernels::resident_slot*>(to_host(p.ring, p.slots * sizeof(kernels::resident_slot)));
  auto* const consumed = static_cast<std::uint64_t*>(to_host(p.consumed, sizeof(std::uint64_t)));
  for (std::uint64_t i = p.first;; ++i) {
    kernels::resident_slot& slot = ring[i % p.slots];
    std::uint64_t words[kernels::resident_slot_words];
    for (std::uint64_t looks = 0;; ++looks) {
      bool whole = true;
      for (unsigned k = 0; k < kernels::resident_slot_words; ++k) {
        words[k] = std::atomic_ref<std::uint64_t>(slot.words[k]).load(std::memory_order_acquire);
        whole = whole && kernels::resident_word_of(words[k], i);
      }
      if (whole) break;
      wait(looks);
    }
    const auto [source, destination, bytes, flag, flag_value, kind] = kernels::resident_entry_of(words);
    if (kind == kernels::resident_stop) return;
    if (bytes > 0) {
      copy_range(source, destination, static_cast<const std::byte*>(to_host(source, bytes)),
                 static_cast<std::byte*>(to_host(destination, bytes)), bytes);
      moved(bytes);
    }
    std::atomic_ref<std::uint64_t>(*consumed).store(i + 1, std::memory_order_release);
    auto* const word = static_cast<std::uint32_t*>(to_host(flag, sizeof(std::uint32_t)));
    std::atomic_ref<std::uint32_t>(*word).store(flag_value, std::memory_order_release);
  }
}

}  // namespace ferry::detail::host_kernels
