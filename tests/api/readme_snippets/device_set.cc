// readme-block: ferry::device_set gpus{io.get_executor()};
// An engine per device, in a coroutine that has the names the block uses.
#include <boost/asio.hpp>

#include <cstddef>

#include "ferry/device_set.hpp"

namespace asio = boost::asio;

asio::awaitable<void> device_set_use(asio::io_context& io, std::size_t n) {
  // @readme-block@
}
