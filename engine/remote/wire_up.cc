// The wire-up: two workers exchange their UCX addresses (and identities, and the tags their messages
// carry) over a TCP connection, then each creates a UCX endpoint to the other. UCX moves all data; the
// TCP connection stays open only as a liveness signal (endpoint_core).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <cstring>
#include <random>

#include "engine/remote/endpoint_core.hpp"

namespace ferry::remote {
namespace {

namespace ip = boost::asio::ip;
using error_code = boost::system::error_code;

// "FRYWIRE1", then the sender's worker id, the tag its messages must carry to reach it, the length of
// its UCX address; then the address.
constexpr std::uint64_t hello_tag = 0x3145524957595246ull;
constexpr std::size_t hello_words = 4;
constexpr std::uint64_t longest_address = 1 << 20;

std::uint64_t random_tag() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

class wire_up_op final : public detail::request, public std::enable_shared_from_this<wire_up_op> {
 public:
  wire_up_op(std::shared_ptr<detail::worker_core> worker, detail::completion_ptr done,
             std::shared_ptr<std::shared_ptr<detail::endpoint_core>> out)
      : worker_(std::move(worker)),
        strand_(boost::asio::make_strand(worker_->executor())),
        socket_(worker_->executor()),
        resolver_(worker_->executor()),
        done_(std::move(done)),
        out_(std::move(out)),
        receive_tag_(random_tag()) {}

  void cancel() noexcept override {
    boost::asio::post(strand_, [self = shared_from_this()] {
      self->cancelled_ = true;
      error_code ignored;
      self->resolver_.cancel();
      self->socket_.close(ignored);
      if (self->accepting_) {
        std::lock_guard guard(self->worker_->lock());
        if (auto* acceptor = self->worker_->acceptor()) acceptor->cancel(ignored);
      }
    });
  }

  void accept() {
    boost::asio::post(strand_, [self = shared_from_this()] {
      ip::tcp::acceptor* acceptor = nullptr;
      {
        std::lock_guard guard(self->worker_->lock());
        acceptor = self->worker_->acceptor();
      }
      if (acceptor == nullptr) {
        self->finish(boost::asio::error::not_connected);  // listen() was not called
        return;
      }
      self->accepting_ = true;
      acceptor->async_accept(self->socket_, boost::asio::bind_executor(self->strand_, [self](error_code error) {
                               self->accepting_ = false;
                               if (error) return self->finish(error);
                               self->exchange();
                             }));
    });
  }

  void connect(std::string host, unsigned short port) {
    boost::asio::post(strand_, [self = shared_from_this(), host = std::move(host), port] {
      self->resolver_.async_resolve(
          host, std::to_string(port),
          boost::asio::bind_executor(self->strand_, [self](error_code error, ip::tcp::resolver::results_type found) {
            if (error) return self->finish(error);
            boost::asio::async_connect(self->socket_, found,
                                       boost::asio::bind_executor(self->strand_, [self](error_code error, const auto&) {
                                         if (error) return self->finish(error);
                                         self->exchange();
                                       }));
          }));
    });
  }

 private:
  void exchange() {
    if (cancelled_) return finish(boost::asio::error::operation_aborted);
    error_code ignored;
    socket_.set_option(ip::tcp::no_delay(true), ignored);
    std::vector<std::byte> address;
    try {
      address = worker_->address();
    } catch (const std::system_error& failure) {
      return finish(error_code(failure.code()));
    }
    std::array<std::uint64_t, hello_words> words{hello_tag, worker_->id(), receive_tag_, address.size()};
    mine_.resize(sizeof words);
    std::memcpy(mine_.data(), words.data(), sizeof words);
    mine_.insert(mine_.end(), address.begin(), address.end());
    boost::asio::async_write(
        socket_, boost::asio::buffer(mine_), boost::asio::bind_executor(strand_, [self = shared_from_this()](error_code error, std::size_t) {
          if (error) return self->finish(error);
          boost::asio::async_read(self->socket_, boost::asio::buffer(self->theirs_),
                                  boost::asio::bind_executor(self->strand_, [self](error_code error, std::size_t) {
                                    if (error) return self->finish(error);
                                    self->read_address();
                                  }));
        }));
  }

  void read_address() {
    if (theirs_[0] != hello_tag || theirs_[3] == 0 || theirs_[3] > longest_address) {
      return finish(boost::asio::error::invalid_argument);  // not a ferry::remote peer
    }
    peer_address_.resize(theirs_[3]);
    boost::asio::async_read(socket_, boost::asio::buffer(peer_address_),
                            boost::asio::bind_executor(strand_, [self = shared_from_this()](error_code error, std::size_t) {
                              if (error) return self->finish(error);
                              self->open();
                            }));
  }

  void open() {
    if (cancelled_) return finish(boost::asio::error::operation_aborted);
    auto endpoint = std::make_shared<detail::endpoint_core>(worker_, std::move(socket_), theirs_[1], theirs_[2],
                                                            receive_tag_);
    try {
      endpoint->connect(peer_address_);
    } catch (const std::system_error& failure) {
      return finish(error_code(failure.code()));
    }
    worker_->add_endpoint(endpoint);
    *out_ = std::move(endpoint);
    finish({});
  }

  void finish(error_code error) {
    if (!done_) return;
    if (cancelled_ && error) error = boost::asio::error::operation_aborted;
    auto done = std::move(done_);
    done->complete(error, 0);
  }

  std::shared_ptr<detail::worker_core> worker_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  ip::tcp::socket socket_;
  ip::tcp::resolver resolver_;
  detail::completion_ptr done_;
  std::shared_ptr<std::shared_ptr<detail::endpoint_core>> out_;
  std::uint64_t receive_tag_;
  std::vector<std::byte> mine_;
  std::array<std::uint64_t, hello_words> theirs_{};
  std::vector<std::byte> peer_address_;
  // On the strand:
  bool cancelled_ = false;
  bool accepting_ = false;
};

}  // namespace

std::shared_ptr<detail::request> worker::wire_up(
    detail::worker_core& core, detail::completion_ptr done,
    std::shared_ptr<std::shared_ptr<detail::endpoint_core>> connected, std::string host, unsigned short port,
    const std::function<void(const std::shared_ptr<detail::request>&)>& connect_slot) {
  auto op = std::make_shared<wire_up_op>(core.shared_from_this(), std::move(done), std::move(connected));
  connect_slot(op);
  if (host.empty()) {
    op->accept();
  } else {
    op->connect(std::move(host), port);
  }
  return op;
}

}  // namespace ferry::remote
