// readme-block: module.launch(scale_kernel, shape, params, s);
// The program's own kernel on a ferry stream, waited for by the engine, in a coroutine.
#include <boost/asio.hpp>

#include <cstddef>

#include "ferry/engine.hpp"
#include "ferry/kernel_module.hpp"

namespace asio = boost::asio;

asio::awaitable<void> stream_wait(ferry::engine& gpu, const ferry::kernel_module& module, std::size_t scale_kernel,
                                  ferry::launch_shape shape, void** params, ferry::stream_ref s) {
  // @readme-block@
}
