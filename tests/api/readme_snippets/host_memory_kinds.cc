// readme-block: gpu.poke(pinned.span(), dev, asio::use_awaitable);
// Host memory of each kind, a stream, a forced plan and a 2-D copy, with the names the block uses.
#include <boost/asio.hpp>

#include <cstddef>
#include <span>

#include "ferry/engine.hpp"

namespace asio = boost::asio;

asio::awaitable<void> host_memory_kinds(ferry::engine& gpu, ferry::pinned_buffer<float>& pinned, std::span<float> span,
                                        ferry::device_ptr<float> dev, ferry::stream_ref stream,
                                        ferry::host_ptr<float> src, ferry::device_ptr<float> dst, std::size_t src_pitch,
                                        std::size_t dst_pitch, std::size_t width, std::size_t height, std::size_t x,
                                        std::size_t y) {
  auto token = [](boost::system::error_code, std::size_t) {};
  // @readme-block@
}
