#include "examples/pipeline_server/request_loop.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>

#include "examples/pipeline_server/awaitable_tuple.hpp"
#include "examples/pipeline_server/deadline.hpp"
#include "examples/pipeline_server/next_stage.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {
namespace {

// What a status means for the connection: bad input and failures of the connection itself end it.
bool closes_connection(status s) {
  return s != status::ok && s != status::deadline_exceeded && s != status::gpu_error && s != status::no_next_stage &&
         s != status::next_stage_failed;
}

error_kind kind_of(status s) {
  switch (s) {
    case status::unknown_operation: return error_kind::unknown_operation;
    case status::too_large: return error_kind::too_large;
    case status::bad_magic: return error_kind::bad_magic;
    case status::truncated: return error_kind::truncated;
    case status::deadline_exceeded: return error_kind::deadline_exceeded;
    case status::shutting_down: return error_kind::shutting_down;
    case status::no_next_stage: return error_kind::no_next_stage;
    case status::next_stage_failed: return error_kind::next_stage_failed;
    default: return error_kind::gpu_error;
  }
}

// What a growing payload leases at most, in times the bytes that arrived (server.hpp): each pair is the
// class of this many times the last one's, so the bytes copied from pair to pair add up to less than a
// third of the payload.
constexpr std::size_t lease_growth = 4;
// What every step of a payload gets on top of its bytes at the minimum rate: a pause of the network or
// the client's own scheduling is not a stall.
constexpr std::chrono::seconds step_slack{1};
// What close_without_reset() discards at most of what the client sent and the server did not read.
constexpr std::size_t drain_limit_bytes = std::size_t{1} << 20;

// The room a payload of `bytes` reserves to grow to (its class, and the last pair before it while the
// bytes are copied over), or 0 when its first lease is its whole class: it never grows.
std::size_t growth_room(std::size_t bytes, std::size_t first_lease_bytes) {
  const std::size_t whole = buffer_pool::class_of(bytes);
  if (buffer_pool::class_of(first_lease_bytes) >= whole) return 0;
  return whole + whole / lease_growth;
}

std::string hex_of(std::uint32_t magic) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", magic);
  return std::string(hex);
}

}  // namespace

// A request past its header's checks. Its deadline runs from here to its result; its lease (once it has
// one) is given back when the request is gone, after its reply.
struct server::request_loop::request {
  request(asio::any_io_executor strand, std::chrono::milliseconds limit_after, operation op, std::size_t bytes,
          clock_type::time_point started)
      : op(op), bytes(bytes), started(started), limit(std::move(strand), limit_after) {}
  const operation op;
  const std::size_t bytes;
  const clock_type::time_point started;
  deadline limit;
  gate_pass large_payload_pass;  // for a large payload (server_options::large_payloads_at_once), until the reply
  gate_pass growth_room;         // what a growing payload reserved, until all of it is in
  buffer_lease lease;            // after limit: given back before the deadline goes
};

server::request_loop::request_loop(server& owner, connection& c)
    : owner_(owner), connection_(c), socket_(c.socket), strand_(c.socket.get_executor()) {}

// Asio allocates and frees a coroutine's frame with the matching pair of awaitable_frame_base (its
// frame recycling: aligned_alloc and free underneath). On aarch64, GCC 12 at -O2 may inline a
// coroutine's operator new but not its operator delete, and -Wmismatched-new-delete then takes the
// class's own operator delete for a mismatch with aligned_alloc: a false positive that -Werror makes
// fatal. Which coroutines it hits depends on the inliner, so the connection's coroutines are covered
// together.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
asio::awaitable<void> server::serve(std::shared_ptr<connection> c) {
  struct on_exit {
    server& s;
    connection& c;
    ~on_exit() {
      c.finished = true;
      s.metrics_.connection_closed();
      // The last connection of a shutdown: the grace period need not run out.
      if (s.stopping_) asio::post(s.control_, [&s = s] { s.close_connections(true); });
    }
  } closed{*this, *c};
  request_loop requests(*this, *c);
  co_await requests.run();
}

// Once the server is stopping, a request the client already sent is still read, to be answered
// shutting_down (check()): the reply answers it, instead of a reset that would drop the replies before.
asio::awaitable<void> server::request_loop::run() {
  // Not `while (... && co_await serve_one())`: GCC 12 builds that coroutine wrong once code follows the
  // loop (its frame is resumed in a state it never set).
  for (;;) {
    if (owner_.stopping_ && !request_waiting()) break;
    const bool more = co_await serve_one();
    if (!more) break;
  }
  close_without_reset();
}

// Closing a socket with unread bytes makes the kernel reset the connection, and a reset discards what
// the client has not read yet: the end of the last reply. So the sending side is shut down first (the
// client reads to the end of the stream) and what the client sent that was not read is discarded
// (bounded; without waiting: what is still on its way may yet cause a reset) before the close.
void server::request_loop::close_without_reset() noexcept {
  boost::system::error_code error;
  if (!socket_.is_open()) return;
  socket_.shutdown(tcp::socket::shutdown_send, error);
  socket_.non_blocking(true, error);
  std::vector<std::byte> discarded(16384);
  for (std::size_t drained = 0; !error && drained < drain_limit_bytes;) {
    const std::size_t read = socket_.receive(asio::buffer(discarded), 0, error);
    if (read == 0) break;  // the end of the stream, or nothing more has arrived (would_block)
    drained += read;
  }
  socket_.close(error);
}

bool server::request_loop::request_waiting() {
  boost::system::error_code error;
  return socket_.is_open() && socket_.available(error) > 0 && !error;
}

asio::awaitable<bool> server::request_loop::serve_one() {
  const std::optional<request_header> header = co_await read_header();
  if (!header) co_return false;
  const auto started = clock_type::now();
  const std::optional<operation> op = co_await check(*header, started);
  if (!op) co_return false;
  request r(strand_, owner_.options_.request_deadline, *op, header->length, started);
  if (!co_await read_payload(r)) co_return false;
  const stage_outcome outcome = co_await run_on_gpu(r);
  r.limit.disarm();
  co_return co_await reply(r, outcome);
}

// Within the header deadline, from connecting or from the previous reply. Nothing (the connection ends)
// when the client closed it, broke it, or did not send a whole header in time; a header cut short by
// the client's close gets a reply first.
asio::awaitable<std::optional<request_header>> server::request_loop::read_header() {
  std::array<std::byte, request_header_bytes> head_bytes;
  connection_.idle = true;
  deadline header_limit(strand_, owner_.options_.header_deadline);
  auto [read_error, head_read] = co_await asio::async_read(
      socket_, asio::buffer(head_bytes), asio::bind_cancellation_slot(header_limit.slot(), awaitable_tuple));
  header_limit.disarm();
  connection_.idle = false;
  if (read_error) {
    if (header_limit.expired()) {
      owner_.metrics_.record_error(error_kind::header_timeout);  // closed without a reply: the client is not talking
    } else if (read_error == asio::error::eof && head_read > 0) {
      co_await error_reply(status::truncated, "request header truncated: the connection ended after " +
                                                  std::to_string(head_read) + " of " +
                                                  std::to_string(request_header_bytes) + " bytes");
    } else if (read_error != asio::error::eof && !owner_.stopping_) {
      owner_.metrics_.record_error(error_kind::disconnected);
    }
    co_return std::nullopt;
  }
  owner_.metrics_.add_bytes_in(head_read);
  co_return decode_request(head_bytes);
}

// The header's checks, in the order the protocol answers them. The request's operation, or nothing (the
// connection ends, after the error reply) when the request is not run.
asio::awaitable<std::optional<operation>> server::request_loop::check(const request_header& header,
                                                                 clock_type::time_point started) {
  if (owner_.stopping_) {
    co_await error_reply(status::shutting_down, "the server is shutting down: the request was not run");
    co_return std::nullopt;
  }
  if (header.magic != request_magic) {
    co_await error_reply(status::bad_magic,
                         "not a request frame: magic 0x" + hex_of(header.magic) + ", expected 0x31515246 (\"FRQ1\")");
    co_return std::nullopt;
  }
  const std::optional<operation> op = known_operation(header.operation);
  if (!op) {
    co_await error_reply(status::unknown_operation, "unknown operation " + std::to_string(header.operation) +
                                                        " (known: 1 transform, 2 checksum, 3 forward)");
    co_return std::nullopt;
  }
  if (header.length > owner_.options_.max_payload_bytes) {
    const bool answered = co_await error_reply(status::too_large, "payload length " + std::to_string(header.length) +
                                                    " bytes is over the server's maximum of " +
                                                    std::to_string(owner_.options_.max_payload_bytes) + " bytes");
    if (answered) {
      record(*op, started, status::too_large);
    }
    co_return std::nullopt;
  }
  co_return op;
}

// The prefix first: until it is here the request holds no budget, however long it announced. Then a
// lease of at most lease_growth times the prefix, the prefix copied into its host buffer, and the rest
// of the payload read after it in steps, each filling the pair leased so far before a pair lease_growth
// times larger takes its place. False when the request ended on the way (answered if the client can
// still hear it).
asio::awaitable<bool> server::request_loop::read_payload(request& r) {
  const std::size_t prefix_bytes = std::min(r.bytes, owner_.options_.payload_prefix_bytes);
  if (prefix_.size() < prefix_bytes) prefix_.resize(prefix_bytes);
  auto [prefix_error, prefix_read] =
      co_await asio::async_read(socket_, asio::buffer(prefix_.data(), prefix_bytes),
                                asio::bind_cancellation_slot(r.limit.slot(), awaitable_tuple));
  owner_.metrics_.add_bytes_in(prefix_read);
  if (prefix_error) {
    co_await payload_failed(r, prefix_error, prefix_read);
    co_return false;
  }
  if (!co_await pass_gate(r)) co_return false;
  std::size_t first_lease_bytes = std::min(r.bytes, lease_growth * prefix_bytes);
  const std::size_t room = growth_room(r.bytes, first_lease_bytes);
  if (room > owner_.options_.memory_budget_bytes) {
    first_lease_bytes = r.bytes;  // no room to grow within the budget: leased whole, as it arrives here
  } else if (room > 0) {
    if (!co_await reserve_growth(r, room)) co_return false;
  }
  const lease_turn turn = r.growth_room ? lease_turn::before_new_requests : lease_turn::in_arrival_order;
  if (!co_await lease_buffers(r, first_lease_bytes, turn, r.lease)) co_return false;
  std::copy_n(prefix_.data(), prefix_bytes, r.lease.pair().host.get());
  for (std::size_t arrived = prefix_bytes;;) {
    const std::size_t until = std::min(r.bytes, r.lease.pair().class_bytes);
    if (!co_await read_step(r, arrived, until)) co_return false;
    arrived = until;
    if (arrived == r.bytes) break;
    if (!co_await grow_lease(r, arrived)) co_return false;
  }
  r.growth_room = gate_pass{};  // all of it is in: its lease no longer grows
  co_return true;
}

asio::awaitable<bool> server::request_loop::read_step(request& r, std::size_t from, std::size_t until) {
  using std::chrono::duration_cast;
  const auto request_left = r.started + owner_.options_.request_deadline - clock_type::now();
  auto allowed = request_left;
  if (const std::size_t rate = owner_.options_.min_payload_bytes_per_second; rate > 0) {
    const auto at_rate = duration_cast<clock_type::duration>(
        step_slack + std::chrono::duration<double>(static_cast<double>(until - from) / static_cast<double>(rate)));
    allowed = std::min(allowed, at_rate);
  }
  deadline step_limit(strand_, allowed);
  auto [error, read] = co_await asio::async_read(socket_, asio::buffer(r.lease.pair().host.get() + from, until - from),
                                                 asio::bind_cancellation_slot(step_limit.slot(), awaitable_tuple));
  step_limit.disarm();
  owner_.metrics_.add_bytes_in(read);
  if (!error) co_return true;
  co_await payload_failed(r, error, from + read, step_limit.expired() && allowed < request_left);
  co_return false;
}

// The next pair, lease_growth times the last (or the payload's class), before every request that holds
// nothing (lease_turn); what arrived is copied into it and the last pair goes back.
asio::awaitable<bool> server::request_loop::grow_lease(request& r, std::size_t arrived) {
  buffer_lease next;
  if (!co_await lease_buffers(r, std::min(r.bytes, lease_growth * r.lease.pair().class_bytes),
                              lease_turn::before_new_requests, next)) {
    co_return false;
  }
  std::copy_n(r.lease.pair().host.get(), arrived, next.pair().host.get());
  r.lease = std::move(next);
  co_return true;
}

// The room a growing payload may grow to, reserved in arrival order before it leases anything: growing
// requests then never all hold part of the budget while each waits for more. False, after the error
// reply, when the deadline passed first.
asio::awaitable<bool> server::request_loop::reserve_growth(request& r, std::size_t bytes) {
  r.growth_room = co_await owner_.growth_gate_->enter(r.limit.slot(), [&r] { return r.limit.expired(); }, bytes);
  if (r.growth_room) co_return true;
  const bool answered = co_await error_reply(status::deadline_exceeded,
                           "the request's deadline passed while it waited for room in the memory budget to grow its "
                           "buffers as its payload arrives (payload unread)");
  if (answered) {
    record(r.op, r.started, status::deadline_exceeded);
  }
  co_return false;
}

// A large payload's turn (server_options::large_payloads_at_once), waited for under the request's deadline
// once its prefix is here. False, after the error reply, when the deadline passed first.
asio::awaitable<bool> server::request_loop::pass_gate(request& r) {
  if (!owner_.large_gate_ || r.bytes < owner_.options_.large_payload_bytes) co_return true;
  r.large_payload_pass = co_await owner_.large_gate_->enter(r.limit.slot(), [&r] { return r.limit.expired(); });
  if (r.large_payload_pass) co_return true;
  const bool answered = co_await error_reply(status::deadline_exceeded, "the request's deadline passed while it waited for its turn "
                                                      "among large payloads (payload unread)");
  if (answered) {
    record(r.op, r.started, status::deadline_exceeded);
  }
  co_return false;
}

// Buffers from the pool, waiting (under the request's deadline) while the budget is spent.
asio::awaitable<bool> server::request_loop::lease_buffers(request& r, std::size_t bytes, lease_turn turn,
                                                          buffer_lease& lease) {
  std::string allocation_failure;
  try {
    lease = co_await owner_.pool_->acquire(bytes, r.limit.slot(), [&r] { return r.limit.expired(); }, turn);
  } catch (const std::exception& error) {  // out of host or device memory: nothing more is held
    allocation_failure = error.what();
  }
  if (!allocation_failure.empty()) {
    const bool answered = co_await error_reply(status::gpu_error, "no memory for the request (payload unread): " + allocation_failure);
    if (answered) {
      record(r.op, r.started, status::gpu_error);
    }
  } else if (!lease) {
    const bool answered = co_await error_reply(status::deadline_exceeded,
                             "the request's deadline passed while it waited for staging memory (payload unread)");
    if (answered) {
      record(r.op, r.started, status::deadline_exceeded);
    }
  }
  co_return static_cast<bool>(lease);
}

// Why the payload's reading stopped after `read` of its bytes, answered when the client can hear it.
asio::awaitable<void> server::request_loop::payload_failed(request& r, boost::system::error_code error, std::size_t read,
                                                          bool too_slow) {
  if (error == asio::error::eof) {
    const bool answered = co_await error_reply(status::truncated, "payload truncated: the connection ended after " +
                                                    std::to_string(read) + " of " + std::to_string(r.bytes) + " bytes");
    if (answered) {
      record(r.op, r.started, status::truncated);
    }
  } else if (too_slow) {
    const std::string message = "the payload arrived slower than the server's minimum of " +
                                std::to_string(owner_.options_.min_payload_bytes_per_second) +
                                " bytes per second (after " + std::to_string(step_slack.count()) + " s of slack): " +
                                std::to_string(read) + " of " + std::to_string(r.bytes) + " bytes arrived (payload unread)";
    owner_.metrics_.record_error(error_kind::payload_too_slow);
    const bool answered = co_await write_reply(reply_header{reply_magic, status::deadline_exceeded, message.size(), 0},
                                               asio::buffer(message));
    if (answered) {
      record(r.op, r.started, status::deadline_exceeded);
    }
  } else if (r.limit.expired()) {
    const bool answered = co_await error_reply(status::deadline_exceeded, "the request's deadline passed while its payload was read");
    if (answered) {
      record(r.op, r.started, status::deadline_exceeded);
    }
  } else {
    owner_.metrics_.record_error(error_kind::disconnected);
  }
}

// A lane is borrowed for the GPU step only, and given back when this returns: the reply's write, however
// slow, holds no lane. A forward gives its lane back before it waits for the next stage.
asio::awaitable<stage_outcome> server::request_loop::run_on_gpu(request& r) {
  const std::shared_ptr<next_stage>& next = owner_.next_stage_;
  if (r.op == operation::forward) {
    if (!next) {
      co_return stage_outcome{status::no_next_stage, "this server has no next stage (--next-stage) to forward to", 0};
    }
    if (auto why = next->failure()) co_return stage_outcome{status::next_stage_failed, *why, 0};
  }
  const bool window_on_host = next && next->window_kind() == remote::memory_kind::host;
  stage_outcome outcome;
  {
    std::pair<lane_loan, stage_outcome> borrowed = co_await borrow_within(*owner_.lanes_, r.limit);
    if (!borrowed.first) co_return std::move(borrowed.second);
    gpu_lane& lane = *borrowed.first;
    try {
      // Not a co_await in each arm of a conditional expression: GCC 12 destroys the result twice.
      if (r.op == operation::forward) {
        outcome = co_await lane.transform_for_next_stage(r.lease.pair(), r.bytes, window_on_host, r.limit);
      } else {
        outcome = co_await lane.run(r.op, r.lease.pair(), r.bytes, r.limit);
      }
    } catch (const std::exception& error) {  // thrown before anything reached the GPU
      outcome = {status::gpu_error, std::string("the GPU step could not start: ") + error.what(), 0};
    }
  }
  if (r.op != operation::forward || outcome.status != status::ok) co_return outcome;
  staging_pair& pair = r.lease.pair();
  const remote::local_bytes result =
      window_on_host ? remote::local_bytes(std::as_bytes(std::span<const std::uint8_t>(pair.host.get(), r.bytes)))
                     : remote::local_bytes(pair.device.get(), r.bytes);
  try {
    outcome = co_await next->forward(result, r.limit);
  } catch (const std::exception& error) {  // refused before anything was sent
    outcome = {status::next_stage_failed, std::string("the put to the next stage could not start: ") + error.what(), 0};
  }
  co_return outcome;
}

// The result, or why there is none. True when the connection goes on.
asio::awaitable<bool> server::request_loop::reply(request& r, const stage_outcome& outcome) {
  bool written;
  if (outcome.status == status::ok) {
    const std::size_t body = reply_body_length(r.op, r.bytes);
    written = co_await write_reply(reply_header{reply_magic, status::ok, body, outcome.checksum},
                                   asio::buffer(r.lease.pair().host.get(), body));
  } else {
    written = co_await error_reply(outcome.status, outcome.message);
  }
  if (written) record(r.op, r.started, outcome.status);
  co_return written && !closes_connection(outcome.status);
}

asio::awaitable<bool> server::request_loop::write_reply(const reply_header& header, asio::const_buffer body) {
  const auto head = encode(header);
  deadline limit(strand_, owner_.options_.write_deadline);
  auto [error, written] =
      co_await asio::async_write(socket_, std::array<asio::const_buffer, 2>{asio::buffer(head), body},
                                 asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  owner_.metrics_.add_bytes_out(written);
  if (error) owner_.metrics_.record_error(limit.expired() ? error_kind::write_timeout : error_kind::disconnected);
  co_return !error;
}

asio::awaitable<bool> server::request_loop::error_reply(status s, const std::string& message) {
  owner_.metrics_.record_error(kind_of(s));
  co_return co_await write_reply(reply_header{reply_magic, s, message.size(), 0}, asio::buffer(message));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void server::request_loop::record(operation op, clock_type::time_point started, status s) {
  owner_.metrics_.record_request(op, s, clock_type::now() - started);
}

}  // namespace ferry::pipeline
