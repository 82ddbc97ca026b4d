// A host model of one arena of device memory: what every byte should hold, and which bytes are unknown
// (written by an op that was cancelled, which may or may not have run) until they are written again.
// Random workloads apply each op to the model as they issue it and compare what the device hands back
// with the model's expectation.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace ferry::stress {

// Disjoint half-open byte ranges [begin, end), merged where they touch.
class range_set {
 public:
  void add(std::size_t begin, std::size_t end);
  void erase(std::size_t begin, std::size_t end);
  // The parts of [begin, end) in the set, in order.
  std::vector<std::pair<std::size_t, std::size_t>> within(std::size_t begin, std::size_t end) const;
  bool empty() const noexcept { return ranges_.empty(); }

 private:
  std::map<std::size_t, std::size_t> ranges_;  // begin -> end
};

// What a read of [offset, offset + bytes) must return: the bytes, except where unknown.
struct expectation {
  std::size_t offset = 0;
  std::vector<std::byte> bytes;
  std::vector<std::pair<std::size_t, std::size_t>> unknown;  // relative to offset
};

// The result of comparing a read with its expectation.
struct comparison {
  std::size_t verified = 0;                  // known bytes compared
  std::optional<std::size_t> first_mismatch;  // relative offset of the first known byte that differs
};
comparison compare(const expectation& expected, std::span<const std::byte> actual);

class device_model {
 public:
  // Starts fully known, holding `initial` (what the arena was filled with).
  explicit device_model(std::vector<std::byte> initial);

  std::size_t size() const noexcept { return bytes_.size(); }

  void write(std::size_t offset, std::span<const std::byte> bytes);
  // `count` elements of `pattern` (1, 2, 4, 8 or 16 bytes) from offset.
  void fill(std::size_t offset, std::size_t count, std::span<const std::byte> pattern);
  // A copy between non-overlapping ranges of the arena: unknown bytes stay unknown where they land.
  void copy(std::size_t from, std::size_t to, std::size_t bytes);
  // The range may or may not have been written: unknown until written again.
  void forget(std::size_t offset, std::size_t bytes);

  expectation expect(std::size_t offset, std::size_t bytes) const;

 private:
  std::vector<std::byte> bytes_;
  range_set unknown_;
};

}  // namespace ferry::stress
