// libFuzzer target over the argument checks of every public operation, Marshal and engine: sizes,
// offsets, pitches, 2-D geometry, flags and pointer kinds drawn from the input, each call judged by the
// independent model of validity_model.hpp (see fuzz_world.hpp for what is checked). Sim backend only.
// Built by tests/fuzz/build_fuzzer.sh (clang, -fsanitize=fuzzer,address,undefined) and, for replaying
// the corpus in CI, by Bazel with g++ (tests/fuzz:corpus_replay_test).
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <sstream>
#include <type_traits>
#include <vector>

#include <boost/system/system_error.hpp>

#include "ferry/blocks.hpp"
#include "ferry/engine.hpp"
#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/fuzz_world.hpp"
#include "tests/fuzz/validity_model.hpp"

namespace ferry::fuzz {
namespace {

struct bytes3 {
  std::uint8_t b[3];
};
struct bytes16 {
  std::uint64_t low, high;
};

// Calls f.template operator()<T>() for one of the element types.
template <class F>
void with_element(unsigned which, F&& f) {
  switch (which % 6) {
    case 0: return f.template operator()<std::uint8_t>();
    case 1: return f.template operator()<std::uint16_t>();
    case 2: return f.template operator()<std::uint32_t>();
    case 3: return f.template operator()<std::uint64_t>();
    case 4: return f.template operator()<bytes16>();
    default: return f.template operator()<bytes3>();
  }
}

template <class... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream out;
  out << std::hex << std::showbase;
  ((out << parts << ' '), ...);
  return out.str();
}

template <class T>
T* host(std::uintptr_t address) { return reinterpret_cast<T*>(address); }
template <class T>
device_ptr<T> dev(std::uintptr_t address) { return device_ptr<T>(static_cast<CUdeviceptr>(address)); }

fuzz_world& world() {
  static fuzz_world* the_world = new fuzz_world();  // never destroyed: the engine lives to process exit
  return *the_world;
}

// The bytes at `address` now, to compare a copy's destination with afterwards.
std::vector<std::byte> snapshot(std::uintptr_t address, std::size_t bytes) {
  const std::byte* at = world().bytes_at(address, bytes);
  return {at, at + bytes};
}

void require_bytes(const char* operation, std::uintptr_t destination, const std::vector<std::byte>& expected,
                   const std::string& arguments) {
  const std::byte* at = world().bytes_at(destination, expected.size());
  require(expected.empty() || std::memcmp(at, expected.data(), expected.size()) == 0, operation,
          "the destination does not hold the source's bytes", arguments);
}

// ---- one-dimensional copies: Marshal and engine, every pointer kind

template <class T>
void fuzz_copy_1d(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(16);
  const std::uintptr_t source = w.pick_address(in, size);
  const std::uintptr_t destination = w.pick_address(in, size);
  const std::size_t count = pick_count(in, size, arena_bytes);
  const bool on_stream = in.byte() & 1;
  static constexpr promised kinds[][2] = {
      {promised::device, promised::pageable}, {promised::device, promised::pinned},   // peek_array, _async
      {promised::pageable, promised::device}, {promised::pinned, promised::device},   // poke_array, _async
      {promised::device, promised::device},   {promised::device, promised::device},   // copy_array, _async
      {promised::pageable, promised::device}, {promised::pinned, promised::device},   // engine poke span, host_ptr
      {promised::device, promised::pageable}, {promised::device, promised::pinned},   // engine peek span, host_ptr
      {promised::device, promised::device},                                           // engine copy
      {promised::pageable, promised::device}, {promised::device, promised::pageable}, // engine poke/peek, options
      {promised::device, promised::device},   {promised::device, promised::device},   // copy_array_peer, engine
      {promised::device, promised::device},                                           // copy_array_peer_async
  };
  const promised from = kinds[op][0], to = kinds[op][1];
  copy_1d_model model = model_copy_1d(w.map, count, size, from, source, to, destination);
  // A pageable source the engine stages is read by host threads: device memory there would fault on
  // the host before any driver could refuse it, so the model keeps such calls out.
  if (op >= 6 && from == promised::pageable && model.outcome != verdict::invalid &&
      w.map.find(source, true) && !w.map.find(source, true)->host_accessible()) {
    model.outcome = verdict::unsafe;
  }
  if (op >= 6 && to == promised::pageable && model.outcome != verdict::invalid && w.map.find(destination, true) &&
      !w.map.find(destination, true)->host_accessible()) {
    model.outcome = verdict::unsafe;
  }
  const transfer_plan plan = static_cast<transfer_plan>(in.choose(7));  // 6 is no plan at all
  if ((op == 11 || op == 12) && model.outcome != verdict::unsafe) {
    // A forced plan must be one a pageable transfer can take: batching is the planner's choice for
    // page-locked copies, driver_staged is for pokes only, and values past the enumerators are no plan.
    if (plan == transfer_plan::batched || plan > transfer_plan::driver_staged ||
        (plan == transfer_plan::driver_staged && op == 12)) {
      model.outcome = verdict::invalid;
    }
  }
  // The page-locked and device forms may choose a batch path: refused given a stream, and past the
  // enumerators (3 is no path at all).
  const batch_path batching = static_cast<batch_path>(in.choose(4));
  if ((op == 7 || op == 9 || op == 10) && model.outcome != verdict::unsafe && batching != batch_path::automatic &&
      (on_stream || batching > batch_path::kernel)) {
    model.outcome = verdict::invalid;
  }
  // The peer forms name a context for each side: null ones must be refused, device 1's is the driver's call.
  const unsigned source_context = in.choose(4), destination_context = in.choose(4);
  auto context_of = [&](unsigned which) { return which == 0 ? nullptr : which == 1 ? w.second.get() : w.primary.get(); };
  if (op >= 13) {
    if (source_context == 0 || destination_context == 0) model.outcome = verdict::invalid;
    else if ((source_context == 1 || destination_context == 1) && model.outcome == verdict::valid)
      model.outcome = verdict::driver_decides;
  }
  const std::string arguments = text("op", op, "element", size, "count", count, "source", source, "destination",
                                     destination, "stream", on_stream, "plan", static_cast<int>(plan), "batching",
                                     static_cast<int>(batching), "contexts",
                                     source_context, destination_context);
  const std::size_t bytes = static_cast<std::size_t>(model.bytes);
  w.scramble(count ^ source ^ (destination << 1));
  std::vector<std::byte> expected;
  if (model.outcome == verdict::valid) expected = snapshot(source, bytes);
  using U = T;
  stream_ref s = w.queue;
  std::size_t reported = bytes;
  auto run = [&](auto start) {
    std::optional<boost::system::error_code> result;
    start([&](boost::system::error_code error, std::size_t moved) {
      result = error;
      reported = moved;
    });
    w.finish_engine_op(result, arguments);
  };
  // A stream with the chosen batch path: refused unless the path is automatic.
  auto on = [&](stream_ref stream) {
    transfer_options options{stream};
    options.batching = batching;
    return options;
  };
  auto call = [&] {
    switch (op) {
      case 0: return peek_array(count, dev<const U>(source), host<U>(destination));
      case 1: peek_array_async(count, dev<const U>(source), host_ptr<U>(host<U>(destination)), s); return w.queue.synchronize();
      case 2: return poke_array(count, host<const U>(source), dev<U>(destination));
      case 3: poke_array_async(count, host_ptr<const U>(host<const U>(source)), dev<U>(destination), s); return w.queue.synchronize();
      case 4: return copy_array(count, dev<const U>(source), dev<U>(destination));
      case 5: copy_array_async(count, dev<const U>(source), dev<U>(destination), s); return w.queue.synchronize();
      case 6:
        return run([&](auto h) {
          if (on_stream) w.gpu.poke(std::span<const U>(host<const U>(source), count), dev<U>(destination), s, h);
          else w.gpu.poke(std::span<const U>(host<const U>(source), count), dev<U>(destination), h);
        });
      case 7:
        return run([&](auto h) {
          if (on_stream) w.gpu.poke(pinned_span(host_ptr<const U>(host<const U>(source)), count), dev<U>(destination), on(s), h);
          else w.gpu.poke(pinned_span(host_ptr<const U>(host<const U>(source)), count), dev<U>(destination), batching, h);
        });
      case 8:
        return run([&](auto h) {
          if (on_stream) w.gpu.peek(dev<const U>(source), std::span<U>(host<U>(destination), count), s, h);
          else w.gpu.peek(dev<const U>(source), std::span<U>(host<U>(destination), count), h);
        });
      case 9:
        return run([&](auto h) {
          if (on_stream) w.gpu.peek(dev<const U>(source), pinned_span(host_ptr<U>(host<U>(destination)), count), on(s), h);
          else w.gpu.peek(dev<const U>(source), pinned_span(host_ptr<U>(host<U>(destination)), count), batching, h);
        });
      case 10:
        return run([&](auto h) {
          if (on_stream) w.gpu.copy(dev<const U>(source), dev<U>(destination), count, on(s), h);
          else w.gpu.copy(dev<const U>(source), dev<U>(destination), count, batching, h);
        });
      case 11:
        return run([&](auto h) {
          transfer_options options{plan};
          if (on_stream) options.stream = s;
          w.gpu.poke(std::span<const U>(host<const U>(source), count), dev<U>(destination), options, h);
        });
      case 12:
        return run([&](auto h) {
          transfer_options options{plan};
          if (on_stream) options.stream = s;
          w.gpu.peek(dev<const U>(source), std::span<U>(host<U>(destination), count), options, h);
        });
      case 13:
        return copy_array_peer(count, dev<const U>(source), context_ref(context_of(source_context)), dev<U>(destination),
                               context_ref(context_of(destination_context)));
      case 14:
        return run([&](auto h) {
          w.gpu.copy_peer(dev<const U>(source), context_ref(context_of(source_context)), dev<U>(destination),
                          context_ref(context_of(destination_context)), count, h);
        });
      default:
        copy_array_peer_async(count, dev<const U>(source), context_ref(context_of(source_context)), dev<U>(destination),
                              context_ref(context_of(destination_context)), s);
        return w.queue.synchronize();
    }
  };
  judge("copy", model.outcome, call, [&] {
    require(op < 6 || op == 13 || op == 15 || reported == bytes, "engine", "the handler reported " +
            std::to_string(reported) + " bytes", arguments);
    require_bytes("copy", destination, expected, arguments);
  }, arguments);
}

// ---- list forms: the op owns one side (a vector it makes, or the caller's span of it)

template <class T>
void fuzz_lists(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(5);
  const std::uintptr_t device_side = w.pick_address(in, size);
  // The op allocates count elements on the host before anything is checked: counts stay small.
  const std::size_t count = pick_count(in, size, arena_bytes) % (2 * arena_bytes / size + 1);
  const bool up = op == 1 || op == 3 || op == 4;
  std::vector<T> list(count);
  w.scramble(count + device_side);
  if (up && count != 0) std::memcpy(list.data(), w.bytes_at(w.map.regions()[5].base, std::min(count * size, arena_bytes)),
                      std::min(count * size, arena_bytes));
  // The host side is the op's own vector (or the caller's span of one): only the device side and the
  // byte count can be wrong. new_list_array allocates its array: at least one element.
  const wide wide_bytes = static_cast<wide>(count) * size;
  verdict outcome = wide_bytes > wide_size_max ? verdict::invalid
                    : op == 3                  ? (count == 0 ? verdict::invalid : verdict::valid)
                                               : side_verdict(w.map, promised::device, device_side, 0, wide_bytes);
  const std::string arguments = text("list op", op, "element", size, "count", count, "device", device_side);
  const std::size_t bytes = count * size;
  std::vector<std::byte> expected;
  if (outcome == verdict::valid) {
    expected = up ? std::vector<std::byte>(reinterpret_cast<std::byte*>(list.data()),
                                           reinterpret_cast<std::byte*>(list.data()) + bytes)
                  : snapshot(device_side, bytes);
  }
  std::vector<T> got;
  std::uintptr_t written = device_side;
  auto call = [&] {
    std::optional<boost::system::error_code> result;
    switch (op) {
      case 0: got = peek_list_array(count, dev<const T>(device_side)); return;
      case 1: return poke_list_array(std::span<const T>(list), dev<T>(device_side));
      case 2:
        w.gpu.peek(dev<const T>(device_side), count, [&](boost::system::error_code error, std::vector<T> values) {
          result = error;
          got = std::move(values);
        });
        break;
      case 3: {
        device_ptr<T> made = new_list_array(std::span<const T>(list));
        expected.resize(bytes);  // compared below, then freed
        written = made.get();
        const auto* at = static_cast<const std::byte*>(sim::host_address(written, bytes));  // not an arena
        std::vector<std::byte> now(at, at + bytes);
        ferry::free(made);
        require(std::memcmp(now.data(), list.data(), bytes) == 0, "new_list_array", "the array does not hold the list",
                arguments);
        expected.clear();
        return;
      }
      default:
        w.gpu.poke(std::move(list), dev<T>(device_side), [&](boost::system::error_code error, std::vector<T> values) {
          result = error;
          got = std::move(values);
        });
        break;
    }
    w.finish_engine_op(result, arguments);
  };
  judge("list", outcome, call, [&] {
    if (op == 0 || op == 2) {
      require(got.size() == count && (bytes == 0 || std::memcmp(got.data(), expected.data(), bytes) == 0), "list",
              "the vector does not hold the device's bytes", arguments);
    } else if (op != 3) {
      require_bytes("list", written, expected, arguments);
    }
  }, arguments);
}

// ---- block lists: engine::poke_blocks and peek_blocks

// One block as drawn: its host and device addresses and its element count.
struct drawn_block {
  std::uintptr_t host;
  std::uintptr_t device;
  std::size_t count;
};

// The drawn blocks as a list of block_pair<Host, Element> (Host: a std::span or a pinned_span).
template <class Host, class Element>
std::vector<block_pair<Host, Element>> block_list(const std::vector<drawn_block>& drawn) {
  using U = typename Host::element_type;
  std::vector<block_pair<Host, Element>> blocks;
  for (const drawn_block& b : drawn) {
    if constexpr (std::is_same_v<Host, std::span<U>>) {
      blocks.push_back({Host(host<U>(b.host), b.count), dev<Element>(b.device)});
    } else {
      blocks.push_back({Host(host_ptr<U>(host<U>(b.host)), b.count), dev<Element>(b.device)});
    }
  }
  return blocks;
}

template <class T>
void fuzz_blocks(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const bool to_device = in.byte() & 1;
  const promised host_kind = in.byte() & 1 ? promised::pinned : promised::pageable;
  const bool on_stream = in.byte() & 1;
  const batch_path batching = static_cast<batch_path>(in.choose(4));  // 3 is no path at all
  std::vector<drawn_block> drawn(in.choose(5));
  for (drawn_block& b : drawn) {
    b.host = w.pick_address(in, size);
    b.device = w.pick_address(in, size);
    // Mostly a part of an arena, so that lists of several blocks fit; the edge counts too.
    b.count = in.byte() & 1 ? std::size_t{in.byte()} % (arena_bytes / size / 4 + 1) : pick_count(in, size, arena_bytes);
  }
  // Every block's sides are checked as any transfer's; a block's own two sides may not overlap, nor may
  // two blocks' written ranges (the device's for a poke, the host's for a peek); the sizes may not add up
  // past size_t; the kernel takes pageable blocks only as many bytes as a staging chunk packs.
  verdict outcome = batching > batch_path::kernel ? verdict::invalid : verdict::valid;
  wide total = 0;
  for (const drawn_block& b : drawn) {
    const wide bytes = static_cast<wide>(b.count) * size;
    total += bytes;
    if (bytes > wide_size_max) {
      outcome = verdict::invalid;
      continue;
    }
    outcome = worst(outcome, worst(side_verdict(w.map, host_kind, b.host, 0, bytes),
                                   side_verdict(w.map, promised::device, b.device, 0, bytes)));
    if (ranges_overlap(b.host, b.device, bytes)) outcome = verdict::invalid;
  }
  if (total > wide_size_max) outcome = verdict::invalid;
  // Whether a block reads what another writes: then the bytes that land are chance, and only the
  // completion is checked.
  bool reads_written = false;
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    for (std::size_t j = 0; j < drawn.size(); ++j) {
      const wide bytes_i = static_cast<wide>(drawn[i].count) * size, bytes_j = static_cast<wide>(drawn[j].count) * size;
      if (i == j || bytes_i == 0 || bytes_j == 0) continue;
      const wide written_i = to_device ? drawn[i].device : drawn[i].host;
      const wide written_j = to_device ? drawn[j].device : drawn[j].host;
      const wide read_j = to_device ? drawn[j].host : drawn[j].device;
      if (written_i < written_j + bytes_j && written_j < written_i + bytes_i) outcome = verdict::invalid;
      if (written_i < read_j + bytes_j && read_j < written_i + bytes_i) reads_written = true;
    }
  }
  std::string arguments = text("blocks to_device", to_device, "pinned", host_kind == promised::pinned, "element", size,
                               "stream", on_stream, "batching", static_cast<int>(batching), "blocks", drawn.size());
  for (const drawn_block& b : drawn) arguments += text("[host", b.host, "device", b.device, "count", b.count) + "] ";
  std::uint64_t seed = drawn.size();
  for (const drawn_block& b : drawn) seed = seed * 31 + (b.host ^ (b.device << 1) ^ b.count);
  w.scramble(seed);
  // What each block's destination must hold: its source's bytes now.
  std::vector<std::vector<std::byte>> expected(drawn.size());
  if (outcome == verdict::valid && !reads_written) {
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      expected[i] = snapshot(to_device ? drawn[i].host : drawn[i].device, drawn[i].count * size);
    }
  }
  transfer_options options(batching);
  if (on_stream) options.stream = stream_ref(w.queue);
  std::size_t reported = 0;
  auto call = [&] {
    std::optional<boost::system::error_code> result;
    auto handler = [&](boost::system::error_code error, std::size_t moved) {
      result = error;
      reported = moved;
    };
    const bool pinned = host_kind == promised::pinned;
    if (to_device && pinned) w.gpu.poke_blocks(block_list<pinned_span<const T>, T>(drawn), options, handler);
    if (to_device && !pinned) w.gpu.poke_blocks(block_list<std::span<const T>, T>(drawn), options, handler);
    if (!to_device && pinned) w.gpu.peek_blocks(block_list<pinned_span<T>, const T>(drawn), options, handler);
    if (!to_device && !pinned) w.gpu.peek_blocks(block_list<std::span<T>, const T>(drawn), options, handler);
    w.finish_engine_op(result, arguments);
  };
  judge("blocks", outcome, call, [&] {
    require(static_cast<wide>(reported) == total, "blocks",
            "the handler reported " + std::to_string(reported) + " bytes", arguments);
    if (reads_written) return;
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      require_bytes("blocks", to_device ? drawn[i].device : drawn[i].host, expected[i], arguments);
    }
  }, arguments);
}

// ---- two-dimensional copies

template <class T>
void fuzz_copy_2d(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(10);  // 0-2 sync peek/poke/copy, 3-5 their async forms, 6-9 engine kinds
  // Half the calls use geometry that fits the arenas (most of those are valid); the others draw each
  // extent from the edge values (0, 1, huge, overflowing). One in eight puts one row at row 0 or 1 of a
  // source whose pitch is a few elements short of 2^64 bytes: its offset wraps the address space back
  // near the pointer, and the one-row overlap check meets pitches of 2^63 bytes and more.
  const unsigned mode = in.choose(8);
  const bool fits = mode < 4, wrapping = mode == 7;
  auto extent = [&](std::size_t most) { return fits ? std::size_t{in.byte()} % most : pick_extent(in); };
  const std::size_t width = extent(9), height = wrapping ? 1 : extent(9);
  const std::size_t source_pitch = fits       ? width + in.byte() % 5
                                   : wrapping ? size_max / size - in.byte() % 64
                                              : pick_extent(in);
  const std::size_t source_x = extent(source_pitch - width + 2);
  const std::size_t source_y = wrapping ? in.byte() % 2 : extent(4);
  const std::size_t destination_pitch = in.byte() & 1 ? source_pitch : fits ? width + in.byte() % 5 : pick_extent(in);
  const std::size_t destination_x = extent(destination_pitch - width + 2), destination_y = extent(4);
  const std::uintptr_t source = w.pick_address(in, size);
  const std::uintptr_t destination = in.byte() % 4 == 0 ? source + size * (in.byte() % 8) : w.pick_address(in, size);
  static constexpr promised kinds[][2] = {
      {promised::device, promised::pageable}, {promised::pageable, promised::device}, {promised::device, promised::device},
      {promised::device, promised::pinned},   {promised::pinned, promised::device},   {promised::device, promised::device},
      {promised::device, promised::device},   {promised::pinned, promised::device},   {promised::device, promised::pinned},
      {promised::pinned, promised::pinned}};
  const promised from = kinds[op][0], to = kinds[op][1];
  const plane_model a = model_plane(w.map, width, height, size, from, source, source_pitch, source_x, source_y);
  const plane_model b = model_plane(w.map, width, height, size, to, destination, destination_pitch, destination_x,
                                    destination_y);
  verdict outcome = worst(a.outcome, b.outcome);
  // Page-locked to page-locked is a copy the driver does (engine::copy_2d); pageable memory only moves
  // to or from a device.
  const bool both_pinned = from == promised::pinned && to == promised::pinned;
  if (is_host(from) && is_host(to) && !both_pinned) outcome = verdict::invalid;
  if (outcome != verdict::invalid && outcome != verdict::unsafe &&
      regions_overlap(source, a, destination, b, width, height, size, source_pitch, destination_pitch)) {
    outcome = verdict::invalid;
  }
  const std::string arguments =
      text("2d op", op, "element", size, "width", width, "height", height, "source", source, source_pitch, source_x,
           source_y, "destination", destination, destination_pitch, destination_x, destination_y);
  w.scramble(width ^ height ^ source);
  // The expected destination: every row of the region from the source, the rest as it was.
  std::vector<std::byte> before_source, before_destination;
  if (outcome == verdict::valid && a.length != 0) {
    before_source = snapshot(source + static_cast<std::size_t>(a.begin), static_cast<std::size_t>(a.length));
    before_destination = snapshot(destination + static_cast<std::size_t>(b.begin), static_cast<std::size_t>(b.length));
    for (std::size_t row = 0; row < height; ++row) {
      std::memcpy(before_destination.data() + row * destination_pitch * size,
                  before_source.data() + row * source_pitch * size, width * size);
    }
  }
  stream_ref s = w.queue;
  auto run = [&](auto start) {
    std::optional<boost::system::error_code> result;
    start([&](boost::system::error_code error, std::size_t) { result = error; });
    w.finish_engine_op(result, arguments);
  };
  auto call = [&] {
    switch (op) {
      case 0: return peek_array_2d(width, height, dev<const T>(source), source_pitch, source_x, source_y,
                                   host<T>(destination), destination_pitch, destination_x, destination_y);
      case 1: return poke_array_2d(width, height, host<const T>(source), source_pitch, source_x, source_y,
                                   dev<T>(destination), destination_pitch, destination_x, destination_y);
      case 2: return copy_array_2d(width, height, dev<const T>(source), source_pitch, source_x, source_y,
                                   dev<T>(destination), destination_pitch, destination_x, destination_y);
      case 3:
        peek_array_2d_async(width, height, dev<const T>(source), source_pitch, source_x, source_y,
                            host_ptr<T>(host<T>(destination)), destination_pitch, destination_x, destination_y, s);
        return w.queue.synchronize();
      case 4:
        poke_array_2d_async(width, height, host_ptr<const T>(host<const T>(source)), source_pitch, source_x, source_y,
                            dev<T>(destination), destination_pitch, destination_x, destination_y, s);
        return w.queue.synchronize();
      case 5:
        copy_array_2d_async(width, height, dev<const T>(source), source_pitch, source_x, source_y, dev<T>(destination),
                            destination_pitch, destination_x, destination_y, s);
        return w.queue.synchronize();
      case 6:
        return run([&](auto h) {
          w.gpu.copy_2d(
              pitched_view(dev<const T>(source), source_pitch, width, height, source_x, source_y),
              pitched_view(dev<T>(destination), destination_pitch, width, height, destination_x, destination_y), s, h);
        });
      case 7:
        return run([&](auto h) {
          w.gpu.copy_2d(
              pitched_view(host_ptr<const T>(host<const T>(source)), source_pitch, width, height, source_x, source_y),
              pitched_view(dev<T>(destination), destination_pitch, width, height, destination_x, destination_y), s, h);
        });
      case 8:
        return run([&](auto h) {
          w.gpu.copy_2d(pitched_view(dev<const T>(source), source_pitch, width, height, source_x, source_y),
                        pitched_view(host_ptr<T>(host<T>(destination)), destination_pitch, width, height, destination_x,
                                     destination_y),
                        s, h);
        });
      default:
        return run([&](auto h) {
          w.gpu.copy_2d(
              pitched_view(host_ptr<const T>(host<const T>(source)), source_pitch, width, height, source_x, source_y),
              pitched_view(host_ptr<T>(host<T>(destination)), destination_pitch, width, height, destination_x,
                           destination_y),
              s, h);
        });
    }
  };
  judge("copy_2d", outcome, call, [&] {
    if (!before_destination.empty()) {
      require_bytes("copy_2d", destination + static_cast<std::size_t>(b.begin), before_destination, arguments);
    }
  }, arguments);
}

// ---- memset, and the managed-memory operations

template <class T>
void fuzz_fill(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(3);  // memset, memset_async, engine memset
  const std::uintptr_t destination = w.pick_address(in, size);
  const std::size_t count = pick_count(in, size, arena_bytes);
  T value;
  for (std::size_t i = 0; i < size; ++i) reinterpret_cast<std::uint8_t*>(&value)[i] = in.byte() | 1;
  const wide bytes = static_cast<wide>(count) * size;
  verdict outcome = bytes > wide_size_max ? verdict::invalid : side_verdict(w.map, promised::device, destination, 0, bytes);
  if (size == 3 || destination % size != 0 || destination == 0) outcome = verdict::invalid;
  // Memory the sim does not map for the device (unmapped pinned) is the driver's call, but 8- and
  // 16-byte fills launch a kernel, and a kernel's fault there is sticky: the context would die with it.
  if (outcome == verdict::driver_decides && size >= 8) outcome = verdict::unsafe;
  const std::string arguments = text("fill op", op, "element", size, "count", count, "destination", destination);
  w.scramble(count ^ destination);
  auto call = [&] {
    if (op == 0) return memset(dev<T>(destination), count, value);
    if (op == 1) {
      memset_async(dev<T>(destination), count, value, w.queue);
      return w.queue.synchronize();
    }
    std::optional<boost::system::error_code> result;
    w.gpu.memset(dev<T>(destination), count, value, [&](boost::system::error_code error) { result = error; });
    w.finish_engine_op(result, arguments);
  };
  judge("memset", outcome, call, [&] {
    const std::byte* at = w.bytes_at(destination, static_cast<std::size_t>(bytes));
    for (std::size_t i = 0; i < count; ++i) {
      require(std::memcmp(at + i * size, &value, size) == 0, "memset", "element " + std::to_string(i) + " is wrong",
              arguments);
    }
  }, arguments);
}

template <class T>
void fuzz_managed(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(4);  // prefetch_array_async, advise_array, attach_array_async, engine prefetch
  const std::uintptr_t pointer = w.pick_address(in, size);
  const std::size_t count = pick_count(in, size, arena_bytes);
  const unsigned where = in.choose(3);  // host, device 0, device 1
  const memory_location location = where == 0 ? memory_location::host() : memory_location::on(device::get(where - 1));
  const auto advice = static_cast<memory_advice>(in.choose(9));  // 1-6 are the driver's advice
  const auto flag = static_cast<attach_flag>(in.choose(2) ? 1u << in.choose(3) : in.byte());
  const wide bytes = static_cast<wide>(count) * size;
  const region* r = w.map.find(pointer, true);
  verdict outcome = bytes > wide_size_max || r == nullptr || r->kind != memory::managed
                        ? verdict::invalid
                        : side_verdict(w.map, promised::device, pointer, 0, bytes);
  if (op == 1 && (static_cast<int>(advice) < 1 || static_cast<int>(advice) > 6)) outcome = verdict::invalid;
  if (op == 2 && flag != attach_flag::global && flag != attach_flag::host && flag != attach_flag::single) {
    outcome = verdict::invalid;
  } else if (op == 2 && outcome == verdict::valid && !(pointer == r->base && (count == 0 || bytes == r->size))) {
    outcome = verdict::driver_decides;  // the driver attaches whole allocations (length 0 or all of it)
  }
  const std::string arguments = text("managed op", op, "element", size, "count", count, "pointer", pointer, "location",
                                     where, "advice", static_cast<int>(advice), "flag", static_cast<unsigned>(flag));
  auto call = [&] {
    switch (op) {
      case 0: prefetch_array_async(dev<T>(pointer), count, location, w.queue); return w.queue.synchronize();
      case 1: return advise_array(dev<T>(pointer), count, advice, location);
      case 2:
        attach_array_async(flag, w.queue, dev<T>(pointer), count);
        w.queue.synchronize();
        // Back to global, as the world's other calls expect of the managed arena.
        return attach_array_async(attach_flag::global, w.queue, dev<T>(pointer), count);
      default: {
        std::optional<boost::system::error_code> result;
        w.gpu.prefetch(dev<T>(pointer), count, location, [&](boost::system::error_code error) { result = error; });
        w.finish_engine_op(result, arguments);
      }
    }
  };
  judge("managed", outcome, call, [] {}, arguments);
  w.queue.synchronize();
}

// ---- allocation, registration, pointer queries and frees of pointers that must be refused

template <class T>
void fuzz_allocation(fuzz_input& in) {
  fuzz_world& w = world();
  constexpr std::size_t size = sizeof(T);
  const unsigned op = in.choose(10);
  std::size_t count = pick_count(in, size, arena_bytes);
  const unsigned raw_flags = in.choose(2) ? in.choose(8) : in.u16();
  const std::uintptr_t pointer = w.pick_address(in, size);
  const wide bytes = static_cast<wide>(count) * size;
  const bool count_ok = count != 0 && bytes <= wide_size_max;
  // Host allocations of what the count asks would be real memory: large valid ones are left out.
  const bool huge = bytes > (wide{1} << 20);
  // The sim backs device memory with host memory: past the device's 16 GiB it is out of memory (the
  // driver's answer), below that a large allocation would be real memory here and is left out.
  const verdict device_outcome = bytes > sim::default_device_memory ? verdict::driver_decides
                                 : huge                             ? verdict::unsafe
                                                                    : verdict::valid;
  verdict outcome = verdict::valid;
  const std::string arguments = text("allocation op", op, "element", size, "count", count, "flags", raw_flags,
                                     "pointer", pointer);
  const region* r = w.map.find(pointer, false);
  std::function<void()> call;
  switch (op) {
    case 0:
      outcome = !count_ok ? verdict::invalid : device_outcome;
      call = [&] { ferry::free(malloc_array<T>(count)); };
      break;
    case 1:
      outcome = !count_ok ? verdict::invalid : device_outcome;
      call = [&] { device_buffer<T>::allocate(count); };
      break;
    case 2:
      outcome = !count_ok || (raw_flags & ~7u) ? verdict::invalid : huge ? verdict::unsafe : verdict::valid;
      call = [&] { free_host(malloc_host_array<T>(static_cast<alloc_flags>(raw_flags), count)); };
      break;
    case 3:
      outcome = !count_ok || (raw_flags & ~7u) ? verdict::invalid : huge ? verdict::unsafe : verdict::valid;
      call = [&] { pinned_buffer<T>::allocate(count, static_cast<alloc_flags>(raw_flags)); };
      break;
    case 4: {
      const auto flag = static_cast<attach_flag>(raw_flags);
      outcome = !count_ok || (flag != attach_flag::global && flag != attach_flag::host) ? verdict::invalid
                : huge                                                                 ? verdict::unsafe
                                                                                       : verdict::valid;
      call = [&, flag] { ferry::free(malloc_managed_array<T>(flag, count)); };
      break;
    }
    case 5: {  // register_array of the caller's memory, unregistered at once
      const bool inside = r != nullptr && bytes <= wide{r->base} + r->size - pointer;
      // io_memory and read_only depend on what the memory and the device are: the driver's call.
      outcome = pointer == 0 || !count_ok || (raw_flags & ~15u)     ? verdict::invalid
                : !inside                                           ? verdict::unsafe
                : r->kind != memory::pageable || (raw_flags & 12u) ? verdict::driver_decides
                                                                    : verdict::valid;
      call = [&] {
        unregister_array(register_array(static_cast<register_flags>(raw_flags), count, host<T>(pointer)));
      };
      break;
    }
    case 6:  // get_device_ptr: mapped pinned memory only
      outcome = raw_flags != 0 || r == nullptr || r->kind != memory::mapped_pinned ? verdict::invalid : verdict::valid;
      call = [&] {
        const device_ptr<T> mapped = get_device_ptr(static_cast<alloc_flags>(raw_flags), host_ptr<T>(host<T>(pointer)));
        require(mapped.get() == pointer, "get_device_ptr", "not the host address (unified addressing)", arguments);
      };
      break;
    case 7:  // get_base_ptr
      outcome = r == nullptr || !r->known_to_driver() ? verdict::invalid
                : r->kind == memory::device || r->kind == memory::managed ? verdict::valid
                                                                          : verdict::driver_decides;
      call = [&] {
        const auto [base, bytes_in_allocation] = get_base_ptr(dev<T>(pointer));
        require(base.get() == r->base && static_cast<std::size_t>(bytes_in_allocation) == r->size, "get_base_ptr",
                "wrong allocation", arguments);
      };
      break;
    case 8:  // free of anything but the start of a live device allocation the fuzzer does not own
      if (r != nullptr && pointer == r->base) return;
      outcome = verdict::invalid;
      call = [&] { ferry::free(dev<T>(pointer)); };
      break;
    default:  // free_host and unregister_array of what is not theirs
      if (r != nullptr && pointer == r->base) return;
      outcome = verdict::invalid;
      call = [&] {
        if (raw_flags & 1) free_host(host_ptr<T>(host<T>(pointer)));
        else unregister_array(host_ptr<T>(host<T>(pointer)));
      };
      break;
  }
  judge("allocation", outcome, call, [] {}, arguments);
}

void fuzz_one(fuzz_input& in) {
  const unsigned family = in.choose(7);
  const unsigned element = in.byte();
  with_element(element, [&]<class T>() {
    switch (family) {
      case 0: return fuzz_copy_1d<T>(in);
      case 1: return fuzz_lists<T>(in);
      case 2: return fuzz_copy_2d<T>(in);
      case 3: return fuzz_fill<T>(in);
      case 4: return fuzz_managed<T>(in);
      case 5: return fuzz_blocks<T>(in);
      default: return fuzz_allocation<T>(in);
    }
  });
}

}  // namespace
}  // namespace ferry::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("FERRY_BACKEND", "sim", 1);
  ferry::fuzz::world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ferry::fuzz::fuzz_input in(data, size);
  for (int calls = 0; calls < 8 && !in.empty(); ++calls) ferry::fuzz::fuzz_one(in);
  ferry::fuzz::world().check_nothing_left_behind();
  return 0;
}
