// readme-block: gpu.poke(span, dev, asio::use_awaitable);
// The completion-token forms of one operation, in a coroutine that has the names the block uses.
#include <boost/asio.hpp>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "ferry/engine.hpp"

namespace asio = boost::asio;

asio::awaitable<void> completion_tokens(ferry::engine& gpu, std::span<float> span, ferry::device_ptr<float> dev,
                                        std::vector<float> vector) {
  // @readme-block@
}
