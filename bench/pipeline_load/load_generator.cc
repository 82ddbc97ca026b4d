#include "bench/pipeline_load/load_generator.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "examples/pipeline_server/kernels/host_transform.hpp"
#include "examples/pipeline_server/kernels/transform.hpp"
#include "examples/pipeline_server/protocol.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace ferry::pipeline {
namespace {

constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t verify_chunk_bytes = std::size_t{1} << 20;  // a multiple of 8: chunks hold whole words
constexpr std::size_t payload_offsets = 4096;  // payloads start anywhere in the first 4 KiB of the source
constexpr std::size_t message_bytes = 4096;     // of an error reply's message, the most that is read
// After a failed write, how long the server's answer may take to be read. It is normally there already
// (it came before the reset that failed the write); the bound is for a peer that sent nothing whole.
constexpr std::chrono::seconds answer_patience{1};

// Word j of `bytes` bytes at `data`, zero-padded past the end. Whole words take the constant-size copy,
// which compiles to one load: checking replies must keep up with the server.
inline std::uint64_t word_at(const std::uint8_t* data, std::size_t bytes, std::uint64_t j) {
  std::uint64_t word = 0;
  const std::size_t start = 8 * j;
  if (bytes - start >= 8) {
    std::memcpy(&word, data + start, 8);
  } else {
    std::memcpy(&word, data + start, bytes - start);
  }
  return word;
}

struct run_state {
  explicit run_state(const load_options& o) : options(o) {}
  const load_options& options;
  std::vector<std::uint8_t> source;  // random bytes every payload is cut from
  clock_type::time_point end;
  std::atomic<std::size_t> requests{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> payload_bytes{0};
  std::mutex mutex;
  std::vector<double> latencies;
  std::size_t failures = 0;
  std::vector<std::string> messages;

  void fail(std::size_t connection, const std::string& what) {
    std::lock_guard lock(mutex);
    ++failures;
    if (messages.size() < 8) messages.push_back("connection " + std::to_string(connection) + ": " + what);
  }
};

std::size_t pick_size(const load_options& o, std::mt19937_64& generator) {
  if (o.min_bytes == o.max_bytes) return o.min_bytes;
  std::uniform_real_distribution<double> exponent(std::log2(static_cast<double>(o.min_bytes)),
                                                  std::log2(static_cast<double>(o.max_bytes)));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::exp2(exponent(generator))), o.min_bytes, o.max_bytes);
}

// GCC 12's false -Wmismatched-new-delete on Asio's coroutine frames, which depends on what the inliner
// does (examples/pipeline_server/request_loop.cc says more): the client's coroutines are covered together.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// Reads an ok reply's body in chunks and checks every word against the payload; returns the checksum
// the reply should carry, or a failure message in `why`.
asio::awaitable<std::uint64_t> check_body(tcp::socket& socket, operation op, const std::uint8_t* payload,
                                          std::size_t bytes, std::vector<std::uint8_t>& chunk, std::string& why) {
  // A forward's reply has no body: the next stage summed the transformed payload.
  if (op == operation::forward) co_return kernels::transformed_checksum(reinterpret_cast<const std::byte*>(payload), bytes);
  std::uint64_t sum = 0;
  if (op == operation::checksum) {
    const std::uint64_t words = (bytes + 7) / 8;
    for (std::uint64_t j = 0; j < words; ++j) sum += kernels::checksum_term(word_at(payload, bytes, j), j);
    co_return sum;
  }
  for (std::size_t at = 0; at < bytes; at += verify_chunk_bytes) {
    const std::size_t length = std::min(verify_chunk_bytes, bytes - at);
    auto [error, read] = co_await asio::async_read(socket, asio::buffer(chunk.data(), length), awaitable_tuple);
    if (error) {
      why = "reply body cut short at byte " + std::to_string(at + read) + " of " + std::to_string(bytes) + ": " +
            error.message();
      co_return 0;
    }
    // Whole words without a branch each (differences are or-ed together and looked at per chunk), then
    // the last, partial word of the reply.
    const std::uint64_t first = at / 8;
    const std::size_t words = length / 8;
    std::uint64_t differences = 0;
    for (std::size_t k = 0; k < words; ++k) {
      const std::uint64_t expected = kernels::transform_word(word_at(payload + at, length, k), first + k);
      differences |= word_at(chunk.data(), length, k) ^ expected;
      sum += kernels::checksum_term(expected, first + k);
    }
    if (length % 8 != 0) {
      const std::uint64_t expected = kernels::transform_word(word_at(payload + at, length, words), first + words) &
                                     kernels::partial_word_mask(length % 8);
      differences |= word_at(chunk.data(), length, words) ^ expected;
      sum += kernels::checksum_term(expected, first + words);
    }
    if (differences != 0) {
      why = "the result differs from the transform of the payload in bytes [" + std::to_string(at) + ", " +
            std::to_string(at + length) + ") of " + std::to_string(bytes);
      co_return 0;
    }
  }
  co_return sum;
}

// An error reply's message: at most `message_bytes` of its `length`, fewer when the connection ends first.
// Its callers await it in a statement of its own: GCC 12 destroys a temporary twice when a co_await sits
// in a braced initializer or among a call's arguments.
asio::awaitable<std::string> read_message(tcp::socket& socket, std::uint64_t length, asio::cancellation_slot slot) {
  std::string message(std::min<std::uint64_t>(length, message_bytes), '\0');
  auto [error, read] =
      co_await asio::async_read(socket, asio::buffer(message), asio::bind_cancellation_slot(slot, awaitable_tuple));
  message.resize(read);
  co_return message;
}

struct server_answer {
  status code;
  std::string message;
};

// What the server sent before the connection broke under a write. A server that refuses a request
// (busy, too_large, deadline_exceeded mid-payload, shutting_down) answers and closes without reading the
// rest, so the client's write fails (EPIPE, ECONNRESET) while the answer waits in its receive queue, ahead
// of the reset. Nothing when no whole error reply can be read within `answer_patience`.
asio::awaitable<std::optional<server_answer>> read_answer(tcp::socket& socket) {
  // Shared with the timer's handler, which may run after this coroutine is gone. Both run on the
  // connection's strand, so `reading` tells the handler whether a read is still there to cancel.
  struct bound {
    explicit bound(const asio::any_io_executor& executor) : timer(executor, answer_patience) {}
    asio::steady_timer timer;
    asio::cancellation_signal signal;
    bool reading = true;
  };
  const auto limit = std::make_shared<bound>(co_await asio::this_coro::executor);
  limit->timer.async_wait([limit](boost::system::error_code error) {
    if (!error && limit->reading) limit->signal.emit(asio::cancellation_type::terminal);
  });
  std::optional<server_answer> answer;
  std::array<std::byte, reply_header_bytes> head;
  auto [error, read] = co_await asio::async_read(socket, asio::buffer(head),
                                                 asio::bind_cancellation_slot(limit->signal.slot(), awaitable_tuple));
  if (!error) {
    const reply_header reply = decode_reply(head);
    if (reply.magic == reply_magic && reply.status != status::ok) {
      std::string message = co_await read_message(socket, reply.length, limit->signal.slot());
      answer = server_answer{reply.status, std::move(message)};
    }
  }
  limit->reading = false;
  limit->timer.cancel();
  co_return answer;
}

std::string answered(std::size_t request, std::size_t bytes, status code, const std::string& message) {
  return "request " + std::to_string(request) + " (" + std::to_string(bytes) + " bytes): the server answered " +
         std::string(to_string(code)) + ": " + message;
}

asio::awaitable<void> client(run_state& state, std::size_t index) {
  const load_options& o = state.options;
  tcp::socket socket(co_await asio::this_coro::executor);
  if (auto [error] = co_await socket.async_connect(o.server, awaitable_tuple); error) {
    state.fail(index, "cannot connect to " + o.server.address().to_string() + ":" + std::to_string(o.server.port()) +
                          ": " + error.message());
    co_return;
  }
  socket.set_option(tcp::no_delay(true));
  std::mt19937_64 generator(o.seed * 1000003 + index);
  std::vector<std::uint8_t> chunk(verify_chunk_bytes);
  std::vector<double> latencies;
  for (std::size_t i = 0; o.requests_per_connection ? i < o.requests_per_connection : clock_type::now() < state.end; ++i) {
    const std::size_t bytes = pick_size(o, generator);
    const std::uint8_t* payload = state.source.data() + generator() % payload_offsets;
    const operation op = o.checksum_every && i % o.checksum_every == o.checksum_every - 1 ? operation::checksum
                         : o.forward                                                     ? operation::forward
                                                                                         : operation::transform;
    const auto head = encode(request_header{request_magic, static_cast<std::uint32_t>(op), bytes});
    const auto started = clock_type::now();
    auto [write_error, written] = co_await asio::async_write(
        socket, std::array<asio::const_buffer, 2>{asio::buffer(head), asio::buffer(payload, bytes)}, awaitable_tuple);
    if (write_error) {
      // The server's answer says why it stopped reading; the write's error only that it did.
      if (const std::optional<server_answer> answer = co_await read_answer(socket)) {
        state.fail(index, answered(i, bytes, answer->code, answer->message));
      } else {
        state.fail(index, "request " + std::to_string(i) + " not sent: " + write_error.message());
      }
      break;
    }
    std::array<std::byte, reply_header_bytes> reply_bytes;
    if (auto [error, n] = co_await asio::async_read(socket, asio::buffer(reply_bytes), awaitable_tuple); error) {
      state.fail(index, "no reply to request " + std::to_string(i) + ": " + error.message());
      break;
    }
    const reply_header reply = decode_reply(reply_bytes);
    if (reply.magic != reply_magic) {
      state.fail(index, "reply to request " + std::to_string(i) + " has a bad magic");
      break;
    }
    if (reply.status != status::ok) {
      const std::string message = co_await read_message(socket, reply.length, {});
      state.fail(index, answered(i, bytes, reply.status, message));
      break;
    }
    if (reply.length != reply_body_length(op, bytes)) {
      state.fail(index, "reply to request " + std::to_string(i) + " carries " + std::to_string(reply.length) +
                            " bytes, expected " + std::to_string(reply_body_length(op, bytes)));
      break;
    }
    std::string why;
    // A forward's reply has no body: the next stage summed the transformed payload.
    const std::uint64_t expected = co_await check_body(socket, op, payload, bytes, chunk, why);
    if (!why.empty()) {
      state.fail(index, "request " + std::to_string(i) + ": " + why);
      break;
    }
    if (reply.checksum != expected) {
      state.fail(index, "request " + std::to_string(i) + " (" + std::to_string(bytes) + " bytes, " +
                            std::string(to_string(op)) + "): checksum " + std::to_string(reply.checksum) +
                            ", expected " + std::to_string(expected));
      break;
    }
    latencies.push_back(std::chrono::duration<double>(clock_type::now() - started).count());
    state.requests.fetch_add(1);
    state.bytes.fetch_add(bytes + reply.length);
    state.payload_bytes.fetch_add(bytes);
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  std::lock_guard lock(state.mutex);
  state.latencies.insert(state.latencies.end(), latencies.begin(), latencies.end());
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

double load_report::latency_percentile(double p) const {
  if (latencies.empty()) return 0;
  return latencies[static_cast<std::size_t>(p * static_cast<double>(latencies.size() - 1))];
}

load_report run_load(const load_options& o) {
  if (o.connections == 0 || o.threads == 0) {
    throw std::invalid_argument("run_load: connections (" + std::to_string(o.connections) + ") and threads (" +
                                std::to_string(o.threads) + ") must be positive");
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) {
    throw std::invalid_argument("run_load: payload sizes [" + std::to_string(o.min_bytes) + ", " +
                                std::to_string(o.max_bytes) + "] are not a range of positive sizes");
  }
  if (o.requests_per_connection == 0 && o.duration.count() <= 0) {
    throw std::invalid_argument("run_load: neither requests_per_connection nor a positive duration is given");
  }
  run_state state(o);
  state.source.resize(o.max_bytes + payload_offsets);
  std::mt19937_64 generator(o.seed);
  for (std::size_t i = 0; i < state.source.size(); i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(state.source.data() + i, &word, std::min<std::size_t>(8, state.source.size() - i));
  }

  asio::io_context io;
  const auto started = clock_type::now();
  state.end = started + o.duration;
  for (std::size_t i = 0; i < o.connections; ++i) asio::co_spawn(asio::make_strand(io), client(state, i), asio::detached);

  std::mutex progress_mutex;
  std::condition_variable progress_wake;
  bool finished = false;
  std::thread progress([&] {
    if (o.label.empty()) return;
    std::unique_lock lock(progress_mutex);
    while (!progress_wake.wait_for(lock, std::chrono::seconds(1), [&] { return finished; })) {
      const double seconds = std::chrono::duration<double>(clock_type::now() - started).count();
      std::fprintf(stderr, "\r  %s: %5.1f s, %zu requests, %.2f GB/s   ", o.label.c_str(), seconds, state.requests.load(),
                   static_cast<double>(state.bytes.load()) / seconds / 1e9);
    }
    std::fprintf(stderr, "\r%80s\r", "");
  });
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < o.threads; ++i) threads.emplace_back([&io] { io.run(); });
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  {
    std::lock_guard lock(progress_mutex);
    finished = true;
  }
  progress_wake.notify_all();
  progress.join();

  load_report report;
  report.requests = state.requests.load();
  report.bytes = state.bytes.load();
  report.payload_bytes = state.payload_bytes.load();
  report.seconds = seconds;
  report.latencies = std::move(state.latencies);
  std::sort(report.latencies.begin(), report.latencies.end());
  report.failures = state.failures;
  report.failure_messages = std::move(state.messages);
  return report;
}

}  // namespace ferry::pipeline
