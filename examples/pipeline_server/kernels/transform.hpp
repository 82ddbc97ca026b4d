// The byte transform and checksum of ferry_transform_checksum (transform_checksum.cu), the pipeline
// server's GPU step. One definition for the kernel (nvcc, through --expt-relaxed-constexpr), its
// host twin, and the clients that check every reply (the load generator, the tests), so that what the
// server computes and what a client expects cannot drift apart.
//
// Both work on 8-byte little-endian words: word j holds bytes [8j, 8j + 8) of the data, and a last partial
// word is zero-padded. Word-wide arithmetic keeps the host's check of a reply as cheap as a memory pass
// (a client verifies gigabytes per second), and the word index makes every result depend on where its
// bytes are, so a reply with bytes moved, lost or repeated fails.
#pragma once

#include <cstdint>

namespace ferry::pipeline::kernels {

// Result word j of the transform: every byte rotated left by 3 bits, then xored with a key that changes
// with j. A bijection per word, so no input pattern is lost.
constexpr std::uint64_t transform_word(std::uint64_t word, std::uint64_t j) {
  const std::uint64_t rotated = ((word << 3) & 0xF8F8F8F8F8F8F8F8ull) | ((word >> 5) & 0x0707070707070707ull);
  return rotated ^ (0x5C3A9E71D2B4F60Dull + j * 0xA24BAED4963EE407ull);
}

// Word j's share of the checksum (the checksum is the sum of the shares, modulo 2^64): the word, offset
// by a multiple of its index, through one multiply-xorshift round (the first of splitmix64's finalizer).
// A sum, so the GPU may add the shares in any order; one multiply per word, so a client checks replies
// about as fast as it reads them. A checksum against accidents, not against an adversary.
constexpr std::uint64_t checksum_term(std::uint64_t word, std::uint64_t j) {
  const std::uint64_t x = (word ^ ((j + 1) * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 31);
}

// The bytes of a last word that holds `bytes` (1 to 7) bytes of data: the checksum reads only those.
constexpr std::uint64_t partial_word_mask(std::uint64_t bytes) {
  return bytes >= 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
}

}  // namespace ferry::pipeline::kernels
