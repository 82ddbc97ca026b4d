#include "tests/stress/device_model.hpp"

#include <algorithm>
#include <cstring>

namespace ferry::stress {

void range_set::add(std::size_t begin, std::size_t end) {
  if (begin >= end) return;
  // Absorb every range that overlaps or touches [begin, end).
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;
  while (it != ranges_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(begin, end);
}

void range_set::erase(std::size_t begin, std::size_t end) {
  if (begin >= end) return;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  while (it != ranges_.end() && it->first < end) {
    if (it->first < begin) kept.emplace_back(it->first, begin);
    if (it->second > end) kept.emplace_back(end, it->second);
    it = ranges_.erase(it);
  }
  for (const auto& [b, e] : kept) ranges_.emplace(b, e);
}

std::vector<std::pair<std::size_t, std::size_t>> range_set::within(std::size_t begin, std::size_t end) const {
  std::vector<std::pair<std::size_t, std::size_t>> parts;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    parts.emplace_back(std::max(begin, it->first), std::min(end, it->second));
  }
  return parts;
}

comparison compare(const expectation& expected, std::span<const std::byte> actual) {
  comparison result;
  std::size_t at = 0;
  auto check = [&](std::size_t from, std::size_t to) {
    if (from >= to || result.first_mismatch) return;
    if (std::memcmp(expected.bytes.data() + from, actual.data() + from, to - from) != 0) {
      for (std::size_t i = from; i < to; ++i) {
        if (expected.bytes[i] != actual[i]) {
          result.first_mismatch = i;
          return;
        }
      }
    }
    result.verified += to - from;
  };
  for (const auto& [begin, end] : expected.unknown) {
    check(at, begin);
    at = end;
  }
  check(at, expected.bytes.size());
  return result;
}

device_model::device_model(std::vector<std::byte> initial) : bytes_(std::move(initial)) {}

void device_model::write(std::size_t offset, std::span<const std::byte> bytes) {
  std::memcpy(bytes_.data() + offset, bytes.data(), bytes.size());
  unknown_.erase(offset, offset + bytes.size());
}

void device_model::fill(std::size_t offset, std::size_t count, std::span<const std::byte> pattern) {
  std::byte* out = bytes_.data() + offset;
  for (std::size_t i = 0; i < count; ++i, out += pattern.size()) std::memcpy(out, pattern.data(), pattern.size());
  unknown_.erase(offset, offset + count * pattern.size());
}

void device_model::copy(std::size_t from, std::size_t to, std::size_t bytes) {
  std::memcpy(bytes_.data() + to, bytes_.data() + from, bytes);
  const auto unknown_source = unknown_.within(from, from + bytes);
  unknown_.erase(to, to + bytes);
  for (const auto& [begin, end] : unknown_source) unknown_.add(begin - from + to, end - from + to);
}

void device_model::forget(std::size_t offset, std::size_t bytes) { unknown_.add(offset, offset + bytes); }

expectation device_model::expect(std::size_t offset, std::size_t bytes) const {
  expectation result;
  result.offset = offset;
  result.bytes.assign(bytes_.begin() + offset, bytes_.begin() + offset + bytes);
  for (const auto& [begin, end] : unknown_.within(offset, offset + bytes)) {
    result.unknown.emplace_back(begin - offset, end - offset);
  }
  return result;
}

}  // namespace ferry::stress
