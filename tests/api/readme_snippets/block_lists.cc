// readme-block: std::vector<ferry::block_pair<ferry::pinned_span<const float>, float>> blocks;
// A block list of page-locked pieces into a device cache's slots, with the names the block uses.
#include <boost/asio.hpp>

#include <cstddef>
#include <vector>

#include "ferry/blocks.hpp"
#include "ferry/engine.hpp"

namespace asio = boost::asio;

asio::awaitable<void> block_lists(ferry::engine& gpu, ferry::pinned_span<const float> staging,
                                  ferry::device_buffer<float>& cache, std::size_t n, std::size_t block,
                                  const std::vector<std::size_t>& slot) {
  // @readme-block@
}
