// An engine on device 0 for a test, with staging sized by the suite (small chunks make staged
// transfers span several of them): engine_fixture<chunk_bytes, chunks>.
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstddef>

#include "ferry/engine.hpp"
#include "tests/support/device_fixture.hpp"

namespace ferry::testing {

template <std::size_t ChunkBytes, std::size_t Chunks>
struct engine_fixture : device_fixture {
  static engine_options options() {
    engine_options settings;
    settings.staging_chunk_bytes = ChunkBytes;
    settings.staging_chunks = Chunks;
    return settings;
  }
  boost::asio::io_context io;
  engine gpu{io.get_executor(), options()};
};

}  // namespace ferry::testing
