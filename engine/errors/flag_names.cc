#include <cstdio>
#include <string>
#include <utility>

#include "ferry/flags.hpp"

namespace ferry {
namespace {

template <class E, std::size_t N>
std::string names_of(E flags, const std::pair<E, const char*> (&known)[N]) {
  unsigned rest = static_cast<unsigned>(flags);
  if (rest == 0) return "none";
  std::string result;
  for (const auto& [flag, name] : known) {
    if (rest & static_cast<unsigned>(flag)) {
      if (!result.empty()) result += "|";
      result += name;
      rest &= ~static_cast<unsigned>(flag);
    }
  }
  if (rest != 0) {
    if (!result.empty()) result += "|";
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "0x%x", rest);
    result += buffer;
  }
  return result;
}

}  // namespace

std::string to_string(alloc_flags flags) {
  static constexpr std::pair<alloc_flags, const char*> known[] = {
      {alloc_flags::portable, "portable"},
      {alloc_flags::device_mapped, "device_mapped"},
      {alloc_flags::write_combined, "write_combined"}};
  return names_of(flags, known);
}

std::string to_string(register_flags flags) {
  static constexpr std::pair<register_flags, const char*> known[] = {
      {register_flags::portable, "portable"},
      {register_flags::device_map, "device_map"},
      {register_flags::io_memory, "io_memory"},
      {register_flags::read_only, "read_only"}};
  return names_of(flags, known);
}

std::string to_string(attach_flag flag) {
  switch (flag) {
    case attach_flag::global: return "global";
    case attach_flag::host: return "host";
    case attach_flag::single: return "single";
  }
  return "attach_flag(" + std::to_string(static_cast<unsigned>(flag)) + ")";
}

}  // namespace ferry
