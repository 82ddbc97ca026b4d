// readme-block: #include "ferry/remote.hpp"
// ferry::remote's two sides, in a coroutine that has the names the block uses.
#include <boost/asio.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ferry/buffers.hpp"
// @readme-includes@

namespace asio = boost::asio;

asio::awaitable<void> remote_use(std::vector<std::byte>& buffer, ferry::device_buffer<std::byte>& dev,
                                 ferry::device_buffer<std::byte>& src, std::size_t n, std::string host,
                                 std::vector<std::byte> about_received, std::vector<std::byte> note) {
  // @readme-block@
}
