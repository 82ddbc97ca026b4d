// One connection to a peer worker: UCX's endpoint for the data, the wire-up's TCP socket kept open as a
// liveness signal (a peer process that dies closes it at once, sooner than UCX's keepalive would
// notice), the ops in flight, and the remote keys unpacked so far.
#pragma once

#include <ucp/api/ucp.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/remote/worker_core.hpp"
#include "ferry/remote.hpp"

namespace ferry::remote::detail {

class endpoint_core;

// An op in UCX's hands. Its four states are not_started -> in_flight -> completed, with
// cancel_requested marked beside in_flight; every field is read and written under the worker's lock.
class request_state final : public request {
 public:
  request_state(completion_ptr done, std::shared_ptr<endpoint_core> owner)
      : done_(std::move(done)), owner_(std::move(owner)) {}
  void cancel() noexcept override;

  completion_ptr done_;
  std::shared_ptr<endpoint_core> owner_;  // released when the op completes
  void* ucx = nullptr;                    // UCX's request while one is outstanding
  bool withdraw_on_cancel = false;        // UCX can take it back (an unmatched receive)
  bool touches_device = false;
  bool cancel_requested = false;
  bool completed = false;
  std::size_t bytes = 0;
};

class endpoint_core : public std::enable_shared_from_this<endpoint_core> {
 public:
  endpoint_core(std::shared_ptr<worker_core> worker, boost::asio::ip::tcp::socket socket, std::uint64_t peer,
                std::uint64_t send_tag, std::uint64_t receive_tag);
  ~endpoint_core();

  // Creates UCX's endpoint to the peer's address and starts watching the socket (under no lock).
  void connect(const std::vector<std::byte>& peer_address);
  void close() noexcept;

  std::uint64_t peer() const noexcept { return peer_; }
  worker_core& worker() noexcept { return *worker_; }

  // The ops; each is entered under no lock, with the request made by prepare().
  std::shared_ptr<request_state> prepare(completion_ptr done);
  void put(const std::shared_ptr<request_state>& op, local_bytes local, const descriptor& remote);
  void get(const std::shared_ptr<request_state>& op, local_bytes local, const descriptor& remote);
  void send(const std::shared_ptr<request_state>& op, std::span<const std::byte> message);
  void receive(const std::shared_ptr<request_state>& op, std::span<std::byte> buffer);

  // The remote key of a descriptor this endpoint's peer exported (std::invalid_argument naming `where`
  // otherwise); null once the endpoint has failed.
  ucp_rkey_h key_for(const descriptor& remote, std::string_view where);

  // Completes `op` (under the lock): operation_aborted when cancellation was asked for, else the
  // endpoint's failure when it has failed, else `status`.
  void finish(request_state& op, ucs_status_t status, std::size_t bytes);
  // The peer is gone or the endpoint closed (under the lock): every pending op ends, UCX's endpoint
  // is closed, and later ops fail with `why`.
  void fail(boost::system::error_code why);

 private:
  void watch_peer();
  // Destroys the remote keys and force-closes UCX's endpoint (under the lock, or when nothing else
  // can reach this endpoint).
  void release_endpoint() noexcept;
  // Hands `op` to UCX's result `status` (a request, an immediate completion or an error), under the lock.
  void track(const std::shared_ptr<request_state>& op, ucs_status_ptr_t status, std::size_t bytes);
  // Takes `op` into the endpoint's pending ops (under the lock), or completes it with the endpoint's
  // failure and returns false when the endpoint has failed or closed.
  bool admit(const std::shared_ptr<request_state>& op, bool touches_device);
  // Puts complete once a flush behind them has completed. One flush serves every put initiated before
  // it: a put joins unflushed_, and the flush goes out from the executor, after the handler that
  // initiated the put (and any others it initiated) has returned.
  void flush_unflushed();
  // Completes the unflushed puts with the endpoint's failure (under the lock).
  void fail_unflushed();

  std::shared_ptr<worker_core> worker_;
  boost::asio::ip::tcp::socket socket_;
  std::uint64_t peer_;
  std::uint64_t send_tag_;
  std::uint64_t receive_tag_;
  // Under the worker's lock:
  ucp_ep_h endpoint_ = nullptr;
  boost::system::error_code failure_;
  std::unordered_map<request_state*, std::shared_ptr<request_state>> pending_;
  std::vector<request_state*> unflushed_;  // puts given to UCX that no flush covers yet (all in pending_)
  bool flush_scheduled_ = false;
  std::map<std::vector<std::byte>, ucp_rkey_h> keys_;
  char liveness_byte_ = 0;
};

}  // namespace ferry::remote::detail
