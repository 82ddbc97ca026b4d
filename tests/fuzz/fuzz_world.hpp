// What the fuzzer's calls point into, built once per process on the sim backend: two device arrays,
// managed memory, mapped and unmapped pinned memory, two pageable arrays, a stream, a second context
// and an engine. Each call is judged by validity_model.hpp and checked by `judge`: the verdict against
// what ferry did, the driver calls a rejection made (none may enqueue or allocate), and the bytes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/fuzz/validity_model.hpp"

namespace ferry::fuzz {

inline constexpr std::size_t arena_bytes = 4096;
// The engine's staging chunks: small, so that staged transfers of an arena span several of them.
inline constexpr std::size_t staging_chunk_bytes = 1024;

struct fuzz_world {
  fuzz_world();

  context primary;
  context_guard current;
  context second;  // device 1's primary context: peer copies name it
  device_buffer<std::byte> device_a, device_b;
  managed_buffer<std::byte> managed;
  pinned_buffer<std::byte> mapped, pinned;
  std::vector<std::byte> pageable_a, pageable_b;
  stream queue;
  boost::asio::io_context io;
  engine gpu;
  memory_map map;
  sim::usage baseline;  // what the world holds between inputs

  // Fills every arena with bytes from `seed` (never zeros), so that a copy that moves nothing is seen.
  void scramble(std::uint64_t seed);
  // The host bytes behind [address, address + bytes) of an arena (device memory through the sim).
  std::byte* bytes_at(std::uintptr_t address, std::size_t bytes) const;
  // An address inside one of the arenas, or one of the addresses nothing owns (null, wrapped, random).
  std::uintptr_t pick_address(class fuzz_input& in, std::size_t element_size) const;
  // Runs the io_context until the engine op just started completes, then throws its error (a
  // system_error, which judge() counts as the driver's) if `result`, set by its handler, holds one.
  // Aborts if the handler never ran.
  void finish_engine_op(const std::optional<boost::system::error_code>& result, const std::string& arguments);
  // Aborts unless the world holds what it held before the input (nothing leaked).
  void check_nothing_left_behind() const;
};

// How a call ended.
enum class ending { accepted, rejected, driver_error };

// Runs `call` under `expected` and aborts, describing the call, when ferry's behaviour breaks the
// invariant. `check_bytes` runs after an accepted call whose verdict is valid. Returns how it ended.
ending judge(const char* operation, verdict expected, const std::function<void()>& call,
             const std::function<void()>& check_bytes, const std::string& arguments);

// Aborts with `what` (and the arguments) when `ok` is false.
void require(bool ok, const char* operation, const std::string& what, const std::string& arguments);

}  // namespace ferry::fuzz
