#include "tests/stress/random_workload.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "ferry/blocks.hpp"
#include "tests/stress/device_model.hpp"

namespace ferry::stress {
namespace asio = boost::asio;
namespace {

using error_code = boost::system::error_code;
using strand = asio::strand<asio::any_io_executor>;

enum class op_kind {
  poke_pageable,
  poke_pinned,
  poke_owned,
  peek_pageable,
  peek_pinned,
  peek_owned,
  copy,
  memset,
  poke_blocks,
  peek_blocks,
  copy_2d_to_device,
  copy_2d_to_host,
  copy_2d_device_to_device,
};
constexpr std::size_t kind_count = 13;
constexpr std::size_t kind_weights[kind_count] = {15, 15, 3, 15, 15, 3, 12, 10, 5, 5, 4, 4, 4};  // in this order

const char* name_of(op_kind kind) {
  static const char* const names[kind_count] = {"poke pageable",     "poke pinned",     "poke owned",
                                                "peek pageable",     "peek pinned",     "peek owned",
                                                "copy",              "memset",          "poke_blocks",
                                                "peek_blocks",       "copy_2d to device", "copy_2d to host",
                                                "copy_2d device to device"};
  return names[static_cast<std::size_t>(kind)];
}

bool is_2d(op_kind kind) { return kind >= op_kind::copy_2d_to_device; }

// What all workers share.
struct workload_state {
  engine& gpu;
  workload_options options;
  workload_totals& totals;
  std::atomic<std::size_t> issued{0};
};

// One op of a step: what to check when it completes.
struct op_record {
  op_kind kind{};
  std::size_t bytes = 0;
  bool cancel = false;
  bool done = false;
  std::string description;
  asio::cancellation_signal signal;
  std::vector<std::pair<const std::byte*, expectation>> reads;  // host memory a peek filled, and its expectation
  expectation owned_read;                                        // a peek into a vector the op hands back
  std::vector<std::uint8_t> sent;                                // an owned poke's data, to compare when handed back
  bool read_back = false;  // a read-back of what a step wrote, not a workload op
};

// One step: its ops, and the join that wakes the worker when all have completed.
struct step_state {
  explicit step_state(const strand& executor) : join(executor) { join.expires_at(std::chrono::steady_clock::time_point::max()); }
  std::vector<std::shared_ptr<op_record>> ops;
  std::vector<std::unique_ptr<asio::steady_timer>> cancel_timers;
  asio::steady_timer join;
  std::size_t pending = 0;
};

std::vector<std::pair<std::size_t, std::size_t>> merged(std::vector<std::pair<std::size_t, std::size_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

class worker {
 public:
  worker(std::shared_ptr<workload_state> state, std::size_t index, strand executor)
      : state_(std::move(state)),
        gpu_(state_->gpu),
        context_(gpu_.context()),
        totals_(state_->totals),
        index_(index),
        executor_(std::move(executor)),
        random_(state_->options.seed * 1000003 + index),
        max_bytes_(index == 0 ? state_->options.big_max_bytes : state_->options.small_max_bytes),
        arena_bytes_(2 * max_bytes_),
        arena_(gpu_.allocate<std::uint8_t>(arena_bytes_)),
        pageable_(arena_bytes_),
        pinned_(pinned_in_engine_context(arena_bytes_)),
        read_back_(pinned_in_engine_context(arena_bytes_)),
        next_big_(state_->options.big_every_ops / 2) {}
  // The coroutine may end on any thread of the io_context, or be destroyed with it after the engine is
  // gone: the buffers are freed in the context the engine used.
  ~worker() {
    try {
      context_guard in_engine(context_);
      arena_ = {};
      pinned_ = {};
      read_back_ = {};
    } catch (const std::exception&) {
      // The context cannot be made current (the driver is gone): the memory goes with the process.
      (void)arena_.release();
      (void)pinned_.release();
      (void)read_back_.release();
    }
  }

  asio::awaitable<void> run() {
    // The arena starts with random bytes, known to the model. Every host buffer is touched now, so that
    // the process's memory is all there from the start (the soak watches it stay flat).
    fill(std::as_writable_bytes(pinned_.span()));
    std::memset(read_back_.data(), 0xA5, arena_bytes_);
    fill(std::as_writable_bytes(std::span(pageable_)));
    std::vector<std::byte> initial(arena_bytes_);
    std::memcpy(initial.data(), pinned_.data(), arena_bytes_);
    model_.emplace(std::move(initial));
    co_await gpu_.poke(pinned_span(host_ptr<const std::uint8_t>(pinned_.get()), arena_bytes_), arena_.get(), asio::use_awaitable);
    totals_.workers_started.fetch_add(1);
    while (std::chrono::steady_clock::now() < state_->options.deadline) {
      const bool big = index_ == 0 && state_->issued.load(std::memory_order_relaxed) >= next_big_;
      const std::size_t wanted = big ? 1 : 1 + random_() % 8;
      std::size_t first = state_->issued.fetch_add(wanted);
      const std::size_t limit = state_->options.max_ops;
      if (limit != 0 && first >= limit) break;
      const std::size_t count = limit == 0 ? wanted : std::min(wanted, limit - first);
      if (big) next_big_ += state_->options.big_every_ops;
      co_await step(count, big);
      ++steps_;
    }
    // The engine may have registered parts of it (docs/engine.md: the registration cache's hazard).
    gpu_.forget_host_memory(std::span(pageable_));
  }

 private:
  pinned_buffer<std::uint8_t> pinned_in_engine_context(std::size_t bytes) {
    context_guard in_engine(context_);
    return pinned_buffer<std::uint8_t>::allocate(bytes);
  }

  std::size_t below(std::size_t n) { return n <= 1 ? 0 : random_() % n; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(random_) < p; }

  void fill(std::span<std::byte> out) {
    std::size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
      const std::uint64_t word = random_();
      std::memcpy(out.data() + i, &word, 8);
    }
    for (std::uint64_t word = random_(); i < out.size(); ++i, word >>= 8) out[i] = static_cast<std::byte>(word);
  }

  std::size_t log_uniform(std::size_t low, std::size_t high) {
    if (high <= low) return low;
    const double u = std::uniform_real_distribution<double>(0, 1)(random_);
    const double value = std::exp(std::log(double(low)) + u * (std::log(double(high) + 1) - std::log(double(low))));
    return std::clamp(static_cast<std::size_t>(value), low, high);
  }

  // Most ops are small: 97% from 1 B to 4 KiB, the rest up to `high`, log-uniform in both.
  std::size_t draw_size(std::size_t high) {
    const std::size_t small = std::min<std::size_t>(4096, high);
    return below(100) < 97 ? log_uniform(1, small) : log_uniform(small, high);
  }

  // copy_2d needs a stream; an owned peek takes none (in a run on a stream it would not be ordered).
  static std::size_t weight(op_kind kind, bool on_stream) {
    if (is_2d(kind) && !on_stream) return 0;
    if (kind == op_kind::peek_owned && on_stream) return 0;
    return kind_weights[static_cast<std::size_t>(kind)];
  }

  op_kind draw_kind(bool on_stream) {
    std::size_t total = 0;
    for (std::size_t k = 0; k < kind_count; ++k) total += weight(op_kind(k), on_stream);
    std::size_t pick = below(total);
    for (std::size_t k = 0; k < kind_count; ++k) {
      const std::size_t w = weight(op_kind(k), on_stream);
      if (pick < w) return op_kind(k);
      pick -= w;
    }
    return op_kind::copy;
  }

  std::string describe(const op_record& op, const std::optional<stream_ref>& stream) const {
    std::ostringstream text;
    text << "worker " << index_ << " step " << steps_ << ": " << name_of(op.kind) << " of " << op.bytes << " bytes"
         << (stream ? " on a stream" : " given no stream") << (op.cancel ? " (cancelled)" : "");
    return text.str();
  }

  // The completion of every op: checks its error, byte count and what it read.
  void complete(step_state& step, op_record& op, error_code error, std::optional<std::size_t> bytes,
                const std::vector<std::uint8_t>* handed_back) {
    op.done = true;
    totals_.completed(&op);
    if (!op.read_back) {
      totals_.ops.fetch_add(1, std::memory_order_relaxed);
      totals_.bytes_moved.fetch_add(op.bytes, std::memory_order_relaxed);
      if (op.kind == op_kind::poke_blocks || op.kind == op_kind::peek_blocks) {
        totals_.block_lists.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (error == asio::error::operation_aborted && op.cancel) {
      totals_.aborted.fetch_add(1, std::memory_order_relaxed);
    } else if (error) {
      totals_.fail(op.description + ": completed with " + error.message());
    } else if (bytes && *bytes != op.bytes) {
      totals_.fail(op.description + ": reported " + std::to_string(*bytes) + " bytes");
    } else {
      for (const auto& [host, expected] : op.reads) verify(op, expected, std::span(host, expected.bytes.size()));
      if (op.kind == op_kind::peek_owned && handed_back) {
        verify(op, op.owned_read, std::as_bytes(std::span(*handed_back)));
      }
      if (op.kind == op_kind::poke_owned && handed_back && *handed_back != op.sent) {
        totals_.fail(op.description + ": the vector handed back differs from the one given");
      }
    }
    if (--step.pending == 0) step.join.cancel();
  }

  void verify(const op_record& op, const expectation& expected, std::span<const std::byte> actual) {
    if (actual.size() != expected.bytes.size()) {
      totals_.fail(op.description + ": read " + std::to_string(actual.size()) + " bytes, expected " +
                   std::to_string(expected.bytes.size()));
      return;
    }
    const comparison result = compare(expected, actual);
    totals_.bytes_verified.fetch_add(result.verified, std::memory_order_relaxed);
    if (result.first_mismatch) {
      const std::size_t at = *result.first_mismatch;
      totals_.fail(op.description + ": byte " + std::to_string(at) + " (arena offset " +
                   std::to_string(expected.offset + at) + ") is " + std::to_string(int(actual[at])) + ", expected " +
                   std::to_string(int(expected.bytes[at])));
    }
  }

  // A handler for `op`, run on this worker's strand, cancellable through op.signal when op.cancel.
  template <class F>
  auto handler(const std::shared_ptr<step_state>& step, op_record& op, F f) {
    return asio::bind_cancellation_slot(op.cancel ? op.signal.slot() : asio::cancellation_slot(),
                                        asio::bind_executor(executor_, [this, step, &op, f](auto&&... args) {
                                          f(*step, op, std::forward<decltype(args)>(args)...);
                                        }));
  }
  auto transfer_handler(const std::shared_ptr<step_state>& step, op_record& op) {
    return handler(step, op, [this](step_state& s, op_record& o, error_code e, std::size_t n) { complete(s, o, e, n, nullptr); });
  }
  auto status_handler(const std::shared_ptr<step_state>& step, op_record& op) {
    return handler(step, op, [this](step_state& s, op_record& o, error_code e) { complete(s, o, e, std::nullopt, nullptr); });
  }
  auto vector_handler(const std::shared_ptr<step_state>& step, op_record& op) {
    return handler(step, op, [this](step_state& s, op_record& o, error_code e, std::vector<std::uint8_t> v) {
      complete(s, o, e, std::nullopt, &v);
      gpu_.forget_host_memory(std::span(v));  // freed next: a registration of it must go first
    });
  }

  device_ptr<std::uint8_t> device_at(std::size_t offset) const { return arena_.get() + offset; }
  device_ptr<const std::uint8_t> device_source(std::size_t offset) const {
    return device_ptr<const std::uint8_t>(arena_.get() + offset);
  }

  // Host memory for the ops of one step: each op takes its own, so ops in flight never share bytes.
  struct host_cursor {
    std::size_t pageable = 0;
    std::size_t pinned = 0;
  };

  // Plans op `op` in [low, high) of the arena, applies it to the model and initiates it. Returns false,
  // having done nothing, when the step's host memory cannot hold it.
  bool issue(const std::shared_ptr<step_state>& step, op_record& op, std::size_t low, std::size_t high, bool big,
             std::optional<stream_ref> stream, host_cursor& host) {
    const std::size_t region = high - low;
    const std::size_t cap = std::min(max_bytes_, region / 2);
    std::size_t size = big ? (big_ops_ == 0 ? cap : log_uniform(state_->options.small_max_bytes, cap)) : draw_size(cap);
    if (is_2d(op.kind)) size = std::max<std::size_t>(1, std::min(size, region / 6));
    op.cancel = chance(state_->options.cancel_probability);
    auto pick = [&](std::size_t from, std::size_t to, std::size_t bytes, std::size_t align = 1) {
      return from + (below((to - from - bytes) / align + 1)) * align;
    };
    const bool pageable_side = op.kind == op_kind::poke_pageable || op.kind == op_kind::peek_pageable;
    const bool pinned_side = op.kind == op_kind::poke_pinned || op.kind == op_kind::peek_pinned ||
                             op.kind == op_kind::copy_2d_to_device || op.kind == op_kind::copy_2d_to_host;
    std::size_t& cursor = pageable_side ? host.pageable : host.pinned;
    const std::size_t host_room = arena_bytes_ - cursor;
    std::optional<transfer_options> forced;
    if (pageable_side && chance(0.2)) {
      forced = transfer_options(transfer_plan::staged);
      forced->stream = stream;
    }

    switch (op.kind) {
      case op_kind::poke_pageable:
      case op_kind::poke_pinned:
      case op_kind::poke_owned: {
        if ((pageable_side || pinned_side) && size > host_room) return false;
        const std::size_t at = pick(low, high, size);
        std::span<std::uint8_t> source;
        std::vector<std::uint8_t> owned;
        if (op.kind == op_kind::poke_owned) {
          owned.resize(size);
          source = owned;
        } else {
          source = std::span(pageable_side ? pageable_.data() : pinned_.data(), arena_bytes_).subspan(cursor, size);
          cursor += size;
        }
        fill(std::as_writable_bytes(source));
        model_->write(at, std::as_bytes(source));
        op.bytes = size;
        op.description = describe(op, stream) + " at " + std::to_string(at);
        note_write(op, at, size);
        if (op.kind == op_kind::poke_owned) {
          op.sent = owned;
          if (stream) gpu_.poke(std::move(owned), device_at(at), *stream, vector_handler(step, op));
          else gpu_.poke(std::move(owned), device_at(at), vector_handler(step, op));
        } else if (op.kind == op_kind::poke_pinned) {
          const pinned_span<const std::uint8_t> from(host_ptr<const std::uint8_t>(source.data()), size);
          if (stream) gpu_.poke(from, device_at(at), *stream, transfer_handler(step, op));
          else gpu_.poke(from, device_at(at), batching_of(op), transfer_handler(step, op));
        } else {
          const std::span<const std::uint8_t> from(source);
          if (forced) gpu_.poke(from, device_at(at), *forced, transfer_handler(step, op));
          else if (stream) gpu_.poke(from, device_at(at), *stream, transfer_handler(step, op));
          else gpu_.poke(from, device_at(at), transfer_handler(step, op));
        }
        return true;
      }
      case op_kind::peek_pageable:
      case op_kind::peek_pinned:
      case op_kind::peek_owned: {
        if ((pageable_side || pinned_side) && size > host_room) return false;
        const std::size_t at = pick(low, high, size);
        op.bytes = size;
        op.description = describe(op, stream) + " at " + std::to_string(at);
        if (op.kind == op_kind::peek_owned) {
          op.owned_read = model_->expect(at, size);
          gpu_.peek(device_source(at), size, vector_handler(step, op));
          return true;
        }
        std::uint8_t* into = (pageable_side ? pageable_.data() : pinned_.data()) + cursor;
        cursor += size;
        std::memset(into, 0xA5, size);  // bytes the peek fails to write are caught
        op.reads.emplace_back(reinterpret_cast<const std::byte*>(into), model_->expect(at, size));
        if (op.kind == op_kind::peek_pinned) {
          const pinned_span<std::uint8_t> to(host_ptr<std::uint8_t>(into), size);
          if (stream) gpu_.peek(device_source(at), to, *stream, transfer_handler(step, op));
          else gpu_.peek(device_source(at), to, batching_of(op), transfer_handler(step, op));
        } else {
          const std::span<std::uint8_t> to(into, size);
          if (forced) gpu_.peek(device_source(at), to, *forced, transfer_handler(step, op));
          else if (stream) gpu_.peek(device_source(at), to, *stream, transfer_handler(step, op));
          else gpu_.peek(device_source(at), to, transfer_handler(step, op));
        }
        return true;
      }
      case op_kind::copy: {
        // Source and destination in different halves of the region: they never overlap.
        const std::size_t middle = low + region / 2;
        const bool upward = below(2) == 0;
        const std::size_t from = upward ? pick(low, middle, size) : pick(middle, high, size);
        const std::size_t to = upward ? pick(middle, high, size) : pick(low, middle, size);
        model_->copy(from, to, size);
        op.bytes = size;
        op.description = describe(op, stream) + " from " + std::to_string(from) + " to " + std::to_string(to);
        note_write(op, to, size);
        if (stream) gpu_.copy(device_source(from), device_at(to), size, *stream, transfer_handler(step, op));
        else gpu_.copy(device_source(from), device_at(to), size, transfer_handler(step, op));
        return true;
      }
      case op_kind::memset: {
        const std::size_t element = std::size_t{1} << below(5);
        const std::size_t count = std::max<std::size_t>(1, size / element);
        op.bytes = count * element;
        const std::size_t at = pick(low, high, op.bytes, element);
        std::array<std::byte, 16> pattern;
        fill(pattern);
        model_->fill(at, count, std::span(pattern).first(element));
        op.description = describe(op, stream) + " of " + std::to_string(element) + "-byte elements at " + std::to_string(at);
        note_write(op, at, op.bytes);
        memset_of(step, op, element, at, count, pattern, stream);
        return true;
      }
      case op_kind::poke_blocks:
      case op_kind::peek_blocks:
        return issue_blocks(step, op, low, high, stream, host);
      default:
        return issue_2d(step, op, low, high, size, *stream, host);
    }
  }

  // How a copy moves if it is batched, drawn for a lone page-locked copy given no stream: mostly the
  // planner's choice, sometimes forced to the copy engine or the kernel (named in the op's description).
  batch_path batching_of(op_record& op) {
    const batch_path path = below(4) == 0 ? draw_batch_path() : batch_path::automatic;
    if (path != batch_path::automatic) op.description += " (batching " + std::string(to_string(path)) + ")";
    return path;
  }
  batch_path draw_batch_path() {
    constexpr batch_path paths[] = {batch_path::automatic, batch_path::copy_engine, batch_path::kernel};
    return paths[below(std::size(paths))];
  }

  // One block of a block list: its host bytes and the arena offset they go to or come from.
  struct placed_block {
    std::uint8_t* host;
    std::size_t bytes;
    std::size_t at;
  };

  // A block list of 1 to 16 blocks of 1 B to 4 KiB, in page-locked or pageable host memory, each block's
  // device range in a part of [low, high) of its own, the parts in shuffled order (a gather or scatter),
  // moved by the batch path drawn. Returns false, having done nothing, when the step's host memory cannot
  // hold it.
  bool issue_blocks(const std::shared_ptr<step_state>& step, op_record& op, std::size_t low, std::size_t high,
                    std::optional<stream_ref> stream, host_cursor& host) {
    const bool to_device = op.kind == op_kind::poke_blocks;
    const bool pageable = below(2) == 0;
    const std::size_t count = 1 + below(16);
    const std::size_t part = (high - low) / count;
    if (part == 0) return false;
    std::vector<std::size_t> parts(count);
    std::iota(parts.begin(), parts.end(), std::size_t{0});
    std::shuffle(parts.begin(), parts.end(), random_);
    std::size_t& cursor = pageable ? host.pageable : host.pinned;
    std::uint8_t* host_base = (pageable ? pageable_.data() : pinned_.data()) + cursor;
    std::vector<placed_block> blocks;
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t bytes = log_uniform(1, std::min<std::size_t>(4096, part));
      blocks.push_back({host_base + total, bytes, low + parts[i] * part + below(part - bytes + 1)});
      total += bytes;
    }
    if (total > arena_bytes_ - cursor) return false;
    cursor += total;
    op.bytes = total;
    transfer_options options(draw_batch_path());
    options.stream = stream;
    op.description = describe(op, stream) + " in " + std::to_string(count) + " blocks of " +
                     (pageable ? "pageable" : "page-locked") + " memory (batching " +
                     std::string(to_string(options.batching)) + ")";
    for (const placed_block& b : blocks) {
      const std::span<std::uint8_t> bytes(b.host, b.bytes);
      if (to_device) {
        fill(std::as_writable_bytes(bytes));
        model_->write(b.at, std::as_bytes(bytes));
        note_write(op, b.at, b.bytes);
      } else {
        std::memset(b.host, 0xA5, b.bytes);  // bytes the peek fails to write are caught
        op.reads.emplace_back(reinterpret_cast<const std::byte*>(b.host), model_->expect(b.at, b.bytes));
      }
    }
    if (pageable) {
      start_blocks<std::span>(step, op, blocks, options, to_device);
    } else {
      start_blocks<pinned_span>(step, op, blocks, options, to_device);
    }
    return true;
  }

  // Host is std::span or pinned_span.
  template <template <class> class Host>
  void start_blocks(const std::shared_ptr<step_state>& step, op_record& op, const std::vector<placed_block>& blocks,
                    const transfer_options& options, bool to_device) {
    if (to_device) {
      std::vector<block_pair<Host<const std::uint8_t>, std::uint8_t>> pokes;
      for (const placed_block& b : blocks) pokes.push_back({host_view<Host<const std::uint8_t>>(b), device_at(b.at)});
      gpu_.poke_blocks(pokes, options, transfer_handler(step, op));
    } else {
      std::vector<block_pair<Host<std::uint8_t>, const std::uint8_t>> peeks;
      for (const placed_block& b : blocks) peeks.push_back({host_view<Host<std::uint8_t>>(b), device_source(b.at)});
      gpu_.peek_blocks(peeks, options, transfer_handler(step, op));
    }
  }
  template <class View>
  static View host_view(const placed_block& b) {
    if constexpr (std::is_same_v<View, std::span<typename View::element_type>>) {
      return View(b.host, b.bytes);
    } else {
      return View(host_ptr<typename View::element_type>(b.host), b.bytes);
    }
  }

  template <class T>
  void memset_as(const std::shared_ptr<step_state>& step, op_record& op, std::size_t at, std::size_t count,
                 const std::array<std::byte, 16>& pattern, std::optional<stream_ref> stream) {
    T value;
    std::memcpy(&value, pattern.data(), sizeof(T));
    const device_ptr<T> to(arena_.get().get() + at);
    if (stream) gpu_.memset(to, count, value, *stream, status_handler(step, op));
    else gpu_.memset(to, count, value, status_handler(step, op));
  }
  struct bytes16 {
    std::array<std::byte, 16> b;
  };
  void memset_of(const std::shared_ptr<step_state>& step, op_record& op, std::size_t element, std::size_t at,
                 std::size_t count, const std::array<std::byte, 16>& pattern, std::optional<stream_ref> stream) {
    switch (element) {
      case 1: return memset_as<std::uint8_t>(step, op, at, count, pattern, stream);
      case 2: return memset_as<std::uint16_t>(step, op, at, count, pattern, stream);
      case 4: return memset_as<std::uint32_t>(step, op, at, count, pattern, stream);
      case 8: return memset_as<std::uint64_t>(step, op, at, count, pattern, stream);
      default: return memset_as<bytes16>(step, op, at, count, pattern, stream);
    }
  }

  // A width x height region with pitches up to 1.5 x width at (x, y) of each side; device sides in
  // different halves of the region when both are on the device.
  bool issue_2d(const std::shared_ptr<step_state>& step, op_record& op, std::size_t low, std::size_t high,
                std::size_t size, stream_ref stream, host_cursor& host) {
    const std::size_t height = 1 + below(std::min<std::size_t>(32, size));
    const std::size_t width = std::max<std::size_t>(1, size / height);
    struct side {
      std::size_t pitch, x, y;
      std::size_t extent() const { return (y + height_) * pitch; }
      std::size_t height_;
      std::size_t row(std::size_t r) const { return (y + r) * pitch + x; }
    };
    auto make_side = [&] {
      const std::size_t pitch = width + below(width / 2 + 1);
      return side{pitch, below(pitch - width + 1), below(2), height};
    };
    const side source = make_side(), destination = make_side();
    const std::size_t middle = low + (high - low) / 2;
    const bool to_device = op.kind != op_kind::copy_2d_to_host;
    const bool from_device = op.kind != op_kind::copy_2d_to_device;
    const side& host_side = to_device ? source : destination;
    if (op.kind != op_kind::copy_2d_device_to_device && host_side.extent() > arena_bytes_ - host.pinned) return false;
    // Device bases: in the lower half for the source, the upper for the destination (or alone anywhere).
    const std::size_t source_base = from_device ? low + below(middle - low - source.extent() + 1) : 0;
    const std::size_t destination_base = to_device ? (from_device ? middle : low) +
                                                         below((from_device ? high - middle : high - low) -
                                                               destination.extent() + 1)
                                                   : 0;
    std::uint8_t* host_base = pinned_.data() + host.pinned;
    if (op.kind != op_kind::copy_2d_device_to_device) host.pinned += host_side.extent();
    op.bytes = width * height;
    op.description = describe(op, stream) + " (" + std::to_string(width) + " x " + std::to_string(height) + ")";
    if (op.kind == op_kind::copy_2d_to_device) {
      fill(std::as_writable_bytes(std::span(host_base, source.extent())));
      for (std::size_t r = 0; r < height; ++r) {
        model_->write(destination_base + destination.row(r),
                      std::as_bytes(std::span(host_base + source.row(r), width)));
        note_write(op, destination_base + destination.row(r), width);
      }
      gpu_.copy_2d(
          pitched_view(host_ptr<const std::uint8_t>(host_base), source.pitch, width, height, source.x, source.y),
          pitched_view(device_at(destination_base), destination.pitch, width, height, destination.x, destination.y),
          stream, transfer_handler(step, op));
    } else if (op.kind == op_kind::copy_2d_to_host) {
      std::memset(host_base, 0xA5, destination.extent());
      for (std::size_t r = 0; r < height; ++r) {
        op.reads.emplace_back(reinterpret_cast<const std::byte*>(host_base + destination.row(r)),
                              model_->expect(source_base + source.row(r), width));
      }
      gpu_.copy_2d(pitched_view(device_source(source_base), source.pitch, width, height, source.x, source.y),
                   pitched_view(host_ptr<std::uint8_t>(host_base), destination.pitch, width, height, destination.x,
                                destination.y),
                   stream, transfer_handler(step, op));
    } else {
      for (std::size_t r = 0; r < height; ++r) {
        model_->copy(source_base + source.row(r), destination_base + destination.row(r), width);
        note_write(op, destination_base + destination.row(r), width);
      }
      gpu_.copy_2d(
          pitched_view(device_source(source_base), source.pitch, width, height, source.x, source.y),
          pitched_view(device_at(destination_base), destination.pitch, width, height, destination.x, destination.y),
          stream, transfer_handler(step, op));
    }
    return true;
  }

  // A write to read back after the step; a cancelled op's write is unknown instead.
  void note_write(op_record& op, std::size_t at, std::size_t bytes) {
    if (op.cancel) {
      model_->forget(at, bytes);
    } else {
      writes_.emplace_back(at, at + bytes);
    }
  }

  void schedule_cancel(const std::shared_ptr<step_state>& step, const std::shared_ptr<op_record>& op) {
    totals_.cancel_requests.fetch_add(1, std::memory_order_relaxed);
    // A delayed emit may run after the step is over: it holds the op, and does nothing once it is done.
    auto emit = [op] {
      if (!op->done) op->signal.emit(asio::cancellation_type::terminal);
    };
    switch (below(3)) {
      case 0:  // at once, before the step's other ops are initiated
        emit();
        break;
      case 1:  // once the strand gets to it
        asio::post(executor_, [step, emit] { emit(); });
        break;
      default: {  // after up to half a millisecond
        auto& timer = step->cancel_timers.emplace_back(std::make_unique<asio::steady_timer>(executor_));
        timer->expires_after(std::chrono::microseconds(below(500)));
        timer->async_wait([step, emit](error_code) { emit(); });
      }
    }
  }

  asio::awaitable<void> wait_for(const std::shared_ptr<step_state>& step) {
    if (step->pending > 0) co_await step->join.async_wait(asio::as_tuple(asio::use_awaitable));
    step->join.expires_at(std::chrono::steady_clock::time_point::max());
  }

  asio::awaitable<void> step(std::size_t count, bool big) {
    auto step = std::make_shared<step_state>(executor_);
    writes_.clear();
    const auto& streams = state_->options.streams;
    // A run on one stream (ordered, any ranges), or ops given no stream on disjoint slots.
    const bool on_stream = big ? below(2) == 0 : below(10) < 6;
    const std::optional<stream_ref> stream =
        on_stream ? std::optional<stream_ref>(streams[below(streams.size())]) : std::nullopt;
    const std::size_t slot = on_stream ? arena_bytes_ : (arena_bytes_ / count) & ~std::size_t{15};
    host_cursor host;
    for (std::size_t i = 0; i < count; ++i) {
      auto& op = *step->ops.emplace_back(std::make_shared<op_record>());
      op.kind = draw_kind(on_stream);
      const std::size_t low = on_stream ? 0 : i * slot;
      ++step->pending;
      if (!issue(step, op, low, low + slot, big, stream, host)) {
        op.kind = op_kind::copy;  // the step's host memory is taken: a device-to-device op instead
        issue(step, op, low, low + slot, big, stream, host);
      }
      // Its handler runs on this strand, after this coroutine yields: the op is still outstanding.
      totals_.initiated(&op, op.description);
      if (op.cancel) schedule_cancel(step, step->ops.back());
    }
    if (big) ++big_ops_;
    co_await wait_for(step);
    for (auto& timer : step->cancel_timers) timer->cancel();
    co_await read_back(step);
  }

  // Reads back every byte the step wrote and compares it with the model.
  asio::awaitable<void> read_back(const std::shared_ptr<step_state>& step) {
    step->ops.clear();
    for (const auto& [begin, end] : merged(writes_)) {
      auto& op = *step->ops.emplace_back(std::make_shared<op_record>());
      op.kind = op_kind::peek_pinned;
      op.read_back = true;
      op.bytes = end - begin;
      op.description = "worker " + std::to_string(index_) + " step " + std::to_string(steps_) + ": read-back of " +
                       std::to_string(op.bytes) + " bytes at " + std::to_string(begin);
      op.reads.emplace_back(reinterpret_cast<const std::byte*>(read_back_.data() + begin), model_->expect(begin, op.bytes));
      ++step->pending;
      totals_.read_backs.fetch_add(1, std::memory_order_relaxed);
      gpu_.peek(device_source(begin), pinned_span(host_ptr<std::uint8_t>(read_back_.data() + begin), op.bytes), transfer_handler(step, op));
      totals_.initiated(&op, op.description);
    }
    co_await wait_for(step);
  }

  std::shared_ptr<workload_state> state_;
  engine& gpu_;
  context_ref context_;
  workload_totals& totals_;
  std::size_t index_;
  strand executor_;
  std::mt19937_64 random_;
  std::size_t max_bytes_;
  std::size_t arena_bytes_;
  device_buffer<std::uint8_t> arena_;
  std::vector<std::uint8_t> pageable_;
  pinned_buffer<std::uint8_t> pinned_;
  pinned_buffer<std::uint8_t> read_back_;
  std::optional<device_model> model_;
  std::vector<std::pair<std::size_t, std::size_t>> writes_;
  std::size_t next_big_;
  std::size_t big_ops_ = 0;
  std::size_t steps_ = 0;
};

}  // namespace

void workload_totals::fail(std::string message) {
  failures.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  if (messages_.size() < 10) messages_.push_back(std::move(message));
}

std::vector<std::string> workload_totals::failure_messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

void workload_totals::initiated(const void* op, const std::string& description) {
  std::lock_guard lock(mutex_);
  outstanding_[op] = description;
}

void workload_totals::completed(const void* op) {
  std::lock_guard lock(mutex_);
  outstanding_.erase(op);
}

std::vector<std::string> workload_totals::outstanding() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> descriptions;
  for (const auto& [op, description] : outstanding_) descriptions.push_back(description);
  return descriptions;
}

void spawn_workload(engine& gpu, asio::any_io_executor executor, const workload_options& options,
                    workload_totals& totals) {
  if (options.workers == 0) throw std::invalid_argument("spawn_workload: workers is 0 (at least 1)");
  if (options.streams.empty()) throw std::invalid_argument("spawn_workload: streams is empty (at least 1)");
  if (options.small_max_bytes < 16 || options.big_max_bytes < options.small_max_bytes) {
    throw std::invalid_argument("spawn_workload: small_max_bytes " + std::to_string(options.small_max_bytes) +
                                " and big_max_bytes " + std::to_string(options.big_max_bytes) +
                                " must satisfy 16 <= small_max_bytes <= big_max_bytes");
  }
  auto state = std::shared_ptr<workload_state>(new workload_state{gpu, options, totals});
  for (std::size_t i = 0; i < options.workers; ++i) {
    strand on = asio::make_strand(executor);
    asio::co_spawn(
        on,
        [state, i, on]() -> asio::awaitable<void> {
          worker w(state, i, on);
          co_await w.run();
        },
        [&totals, i](std::exception_ptr error) {
          if (error) {
            try {
              std::rethrow_exception(error);
            } catch (const std::exception& e) {
              totals.fail("worker " + std::to_string(i) + " stopped: " + e.what());
            }
          }
          totals.workers_done.fetch_add(1);
        });
  }
}

}  // namespace ferry::stress
