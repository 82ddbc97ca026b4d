// ferry::remote: transfers between processes and hosts, over UCX. A worker (one per engine) registers
// memory and exports descriptors of it; an application sends a descriptor to its peer by any channel;
// the peer connects (a small TCP exchange of UCX worker addresses) and puts into or gets from the
// described memory, and both sides exchange small messages. Every transfer is an Asio initiating
// function that takes any completion token, with per-operation cancellation; UCX statuses arrive as
// error codes of ferry::remote::ucx_category().
//
// Progress: while only host transports are in flight, the worker waits on UCX's wakeup file descriptor
// through the executor's reactor (no thread spins); while an operation that touches device memory is in
// flight (UCX's CUDA transports signal completion through host callbacks), the worker polls UCX from
// the executor instead. progress_mode::polling makes it poll whenever anything is in flight. A handler
// whose op completes inside that progress runs right after it, on the same thread, when its executor
// is the io_context's own or one of Asio's system context (as asio::dispatch would run it); others are
// posted to their executor.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "ferry/detail/remote_operation.hpp"
#include "ferry/pointers.hpp"

namespace ferry::remote {

// The category of UCX statuses (ucs_status_t, negative values): name() is "ucx", message() is UCX's
// text ("Connection reset by remote peer"). A cancelled operation reports asio::error::operation_aborted.
const std::error_category& ucx_category() noexcept;
// `status` is a ucs_status_t.
std::error_code make_ucx_error_code(int status) noexcept;

// Where a registration's memory lives.
enum class memory_kind : std::uint8_t { host = 1, device = 2 };

// How the worker drives UCX's progress (see the file's comment).
enum class progress_mode { events, polling };

struct worker_options {
  // UCX's transport list (UCX_TLS), e.g. "tcp,sm,self" or "cuda_ipc,cuda_copy,tcp,self"; empty: UCX's
  // own choice (and the UCX_TLS environment variable).
  std::string transports;
  progress_mode progress = progress_mode::events;
};

// What a peer needs to reach a registered window of memory: its owner (the exporting worker), the
// registration's bounds, the window (address, size) and UCX's packed remote key. serialize() gives
// bytes to send by any channel; deserialize() checks them (format, bounds) and throws
// std::invalid_argument naming what is wrong.
class descriptor {
 public:
  descriptor() = default;

  std::uint64_t address() const noexcept { return address_; }
  std::uint64_t size() const noexcept { return size_; }
  memory_kind kind() const noexcept { return kind_; }
  std::uint64_t owner() const noexcept { return owner_; }
  std::uint64_t region_address() const noexcept { return region_address_; }
  std::uint64_t region_size() const noexcept { return region_size_; }
  const std::vector<std::byte>& packed_key() const noexcept { return key_; }

  // The part [offset, offset + size) of this window. Throws std::invalid_argument when it does not fit.
  descriptor window(std::uint64_t offset, std::uint64_t size) const;

  std::vector<std::byte> serialize() const;
  static descriptor deserialize(std::span<const std::byte> bytes);

  // For engine/remote, which makes descriptors of registrations: checked like deserialize().
  static descriptor make(std::uint64_t owner, memory_kind kind, std::uint64_t region_address, std::uint64_t region_size,
                         std::uint64_t address, std::uint64_t size, std::vector<std::byte> key);

 private:
  std::uint64_t owner_ = 0;
  memory_kind kind_ = memory_kind::host;
  std::uint64_t region_address_ = 0;
  std::uint64_t region_size_ = 0;
  std::uint64_t address_ = 0;
  std::uint64_t size_ = 0;
  std::vector<std::byte> key_;
};

// Memory registered with a worker's UCX context; unregistered when destroyed. Move-only.
class registration {
 public:
  registration() = default;
  registration(registration&&) noexcept;
  registration& operator=(registration&&) noexcept;
  ~registration();

  std::uint64_t address() const noexcept;
  std::uint64_t size() const noexcept;
  memory_kind kind() const noexcept;

  // A descriptor of all of it, or of [offset, offset + size) (std::invalid_argument when past its end).
  descriptor export_descriptor() const;
  descriptor export_descriptor(std::uint64_t offset, std::uint64_t size) const;

  struct state;  // engine/remote

 private:
  friend class worker;
  explicit registration(std::shared_ptr<state> owned) : state_(std::move(owned)) {}
  std::shared_ptr<state> state_;
};

// A span of local memory an operation reads or writes: host memory (pinned or pageable) from a span,
// device memory from a device pointer and a byte count.
struct local_bytes {
  local_bytes(std::span<std::byte> host) noexcept : address(host.data()), size(host.size()) {}
  local_bytes(std::span<const std::byte> host) noexcept
      : address(const_cast<std::byte*>(host.data())), size(host.size()), writable(false) {}
  template <class T>
  local_bytes(device_ptr<T> device, std::size_t bytes) noexcept
      : address(reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(device.get()))),
        size(bytes),
        kind(memory_kind::device) {}

  std::byte* address;
  std::size_t size;
  memory_kind kind = memory_kind::host;
  bool writable = true;
};

// A connection to one peer worker. Move-only; closing (or destroying) it ends its pending operations
// with operation_aborted. When the peer disappears (its process dies, its connection drops), every
// pending operation ends with the UCX status that says so, and later ones fail the same way.
//
// Every operation below documents, as Asio's do:
//   Completion signature: as named on each.
//   Per-operation cancellation: terminal and partial. A transfer UCX has started cannot be taken back:
//     the op then completes with operation_aborted once UCX is done with the caller's memory; a
//     message receive that has not matched is withdrawn at once.
//   Lifetime of arguments: the memory must stay valid until the handler runs; descriptors are copied.
//   Which thread runs the handler: the handler's associated executor (the worker's by default), never
//     inside the initiating call.
// Argument checks (std::invalid_argument, thrown by the initiating call before anything is sent): sizes
// that differ from the descriptor's, a descriptor exported by another worker than this endpoint's peer,
// a descriptor whose key UCX cannot unpack, read-only memory as a destination.
class endpoint {
 public:
  using executor_type = boost::asio::any_io_executor;

  endpoint() = default;
  endpoint(endpoint&&) noexcept;
  endpoint& operator=(endpoint&&) noexcept;
  ~endpoint();

  executor_type get_executor() const noexcept { return executor_; }
  bool is_open() const noexcept { return static_cast<bool>(core_); }
  // The peer worker's identity (descriptor::owner() of what it exports).
  std::uint64_t peer() const noexcept;
  void close() noexcept;

  // Writes `local` into the peer's memory at `remote` (sizes must be equal; remote.window() picks part of
  // a descriptor). Completes when the bytes are in the peer's memory.
  // Completion signature: void(boost::system::error_code, std::size_t bytes).
  template <class Token>
  auto async_put(local_bytes local, const descriptor& remote, Token&& token) {
    check_transfer("async_put", local, remote, false);
    return start<void(boost::system::error_code, std::size_t)>(
        std::forward<Token>(token), ferry::detail::deliver_bytes{},
        [local, remote](endpoint_core& core, const std::shared_ptr<detail::request>& op) {
          start_put(core, op, local, remote);
        });
  }

  // Reads the peer's memory at `remote` into `local` (sizes must be equal).
  // Completion signature: void(boost::system::error_code, std::size_t bytes).
  template <class Token>
  auto async_get(local_bytes local, const descriptor& remote, Token&& token) {
    check_transfer("async_get", local, remote, true);
    return start<void(boost::system::error_code, std::size_t)>(
        std::forward<Token>(token), ferry::detail::deliver_bytes{},
        [local, remote](endpoint_core& core, const std::shared_ptr<detail::request>& op) {
          start_get(core, op, local, remote);
        });
  }

  // Sends a message (a notification, a serialized descriptor) that the peer's async_receive takes, in
  // order. Completion signature: void(boost::system::error_code).
  template <class Token>
  auto async_send(std::span<const std::byte> message, Token&& token) {
    check_open("async_send");
    return start<void(boost::system::error_code)>(
        std::forward<Token>(token), ferry::detail::deliver_status{},
        [message](endpoint_core& core, const std::shared_ptr<detail::request>& op) { start_send(core, op, message); });
  }

  // Receives the next message from the peer into `buffer`; a longer message fails with
  // UCS_ERR_MESSAGE_TRUNCATED. Completion signature: void(boost::system::error_code, std::size_t bytes).
  template <class Token>
  auto async_receive(std::span<std::byte> buffer, Token&& token) {
    check_open("async_receive");
    return start<void(boost::system::error_code, std::size_t)>(
        std::forward<Token>(token), ferry::detail::deliver_bytes{},
        [buffer](endpoint_core& core, const std::shared_ptr<detail::request>& op) { start_receive(core, op, buffer); });
  }

 private:
  friend class worker;
  using endpoint_core = detail::endpoint_core;
  endpoint(std::shared_ptr<endpoint_core> core, executor_type executor);

  void check_open(const char* operation) const;
  void check_transfer(const char* operation, const local_bytes& local, const descriptor& remote,
                      bool writes_local) const;
  static std::shared_ptr<detail::request> prepare(endpoint_core& core, detail::completion_ptr done);
  static void start_put(endpoint_core&, const std::shared_ptr<detail::request>&, local_bytes, const descriptor&);
  static void start_get(endpoint_core&, const std::shared_ptr<detail::request>&, local_bytes, const descriptor&);
  static void start_send(endpoint_core&, const std::shared_ptr<detail::request>&, std::span<const std::byte>);
  static void start_receive(endpoint_core&, const std::shared_ptr<detail::request>&, std::span<std::byte>);

  template <class Signature, class Token, class Deliver, class Launch>
  auto start(Token&& token, Deliver deliver, Launch launch) {
    auto initiate = [core = core_, executor = executor_, deliver, launch](auto handler) mutable {
      auto slot = boost::asio::get_associated_cancellation_slot(handler);
      auto op = prepare(*core, detail::make_completion(std::move(handler), deliver, executor));
      detail::connect_cancellation(slot, op);
      launch(*core, op);
    };
    return boost::asio::async_initiate<Token, Signature>(
        ferry::detail::initiation<decltype(initiate)>(executor_, std::move(initiate)), token);
  }

  std::shared_ptr<endpoint_core> core_;
  executor_type executor_;
};

// A UCX context and worker, driven from an executor. Registrations and endpoints keep what they need
// of it alive; destroying the worker closes its endpoints and listener (their pending operations end
// with operation_aborted).
class worker {
 public:
  using executor_type = boost::asio::any_io_executor;

  // Throws std::system_error (ucx_category) when UCX cannot start (a transport list it cannot use).
  explicit worker(executor_type executor, worker_options options = {});
  worker(worker&&) noexcept;
  worker& operator=(worker&&) noexcept;
  ~worker();

  executor_type get_executor() const noexcept { return executor_; }
  // This worker's identity: descriptor::owner() of what it exports.
  std::uint64_t id() const noexcept;

  // Registers host memory (pinned or pageable). Throws std::invalid_argument for an empty span.
  registration register_memory(std::span<std::byte> host);
  // Registers device memory (UCX's CUDA memory type). Throws std::invalid_argument for a null pointer or
  // zero bytes, and on the sim backend, whose device memory is not host-addressable.
  template <class T>
  registration register_memory(device_ptr<T> device, std::size_t bytes) {
    return register_device(static_cast<std::uint64_t>(device.get()), bytes);
  }

  // Listens for peers on `address` ("127.0.0.1", "0.0.0.0", ...) and `port` (0: any); returns the port.
  unsigned short listen(std::string_view address, unsigned short port = 0);

  // Takes the next peer that connects to the listener.
  // Completion signature: void(boost::system::error_code, endpoint).
  // Per-operation cancellation: terminal and partial (the accept is withdrawn: operation_aborted).
  template <class Token>
  auto async_accept(Token&& token) {
    return start_wire_up<void(boost::system::error_code, endpoint)>(std::forward<Token>(token), std::string(), 0);
  }

  // Connects to a peer's listener. Completion signature: void(boost::system::error_code, endpoint).
  // Per-operation cancellation: terminal and partial (the connection attempt is abandoned).
  template <class Token>
  auto async_connect(std::string_view host, unsigned short port, Token&& token) {
    return start_wire_up<void(boost::system::error_code, endpoint)>(std::forward<Token>(token), std::string(host),
                                                                      port);
  }

  // A name for what UCX chose (its transports and devices), for reports.
  std::string describe_transports() const;

 private:
  registration register_device(std::uint64_t address, std::size_t bytes);

  // Delivers a connected endpoint core as an endpoint.
  struct deliver_endpoint {
    executor_type executor;
    std::shared_ptr<std::shared_ptr<detail::endpoint_core>> connected;
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, std::size_t) {
      std::move(handler)(error, error ? endpoint() : endpoint(std::move(*connected), executor));
    }
  };
  // host empty: accept; else connect to host:port.
  static std::shared_ptr<detail::request> wire_up(detail::worker_core& core, detail::completion_ptr done,
                                                  std::shared_ptr<std::shared_ptr<detail::endpoint_core>> connected,
                                                  std::string host, unsigned short port,
                                                  const std::function<void(const std::shared_ptr<detail::request>&)>& connect_slot);

  template <class Signature, class Token>
  auto start_wire_up(Token&& token, std::string host, unsigned short port) {
    if (!core_) throw std::invalid_argument("ferry::remote::worker: the worker was moved from");
    auto initiate = [core = core_, executor = executor_, host = std::move(host), port](auto handler) mutable {
      auto slot = boost::asio::get_associated_cancellation_slot(handler);
      auto connected = std::make_shared<std::shared_ptr<detail::endpoint_core>>();
      auto done = detail::make_completion(std::move(handler), deliver_endpoint{executor, connected}, executor);
      wire_up(*core, std::move(done), connected, std::move(host), port,
              [&slot](const std::shared_ptr<detail::request>& op) { detail::connect_cancellation(slot, op); });
    };
    return boost::asio::async_initiate<Token, Signature>(
        ferry::detail::initiation<decltype(initiate)>(executor_, std::move(initiate)), token);
  }

  std::shared_ptr<detail::worker_core> core_;
  executor_type executor_;
};

}  // namespace ferry::remote
