// readme-block: #include <boost/asio.hpp>
// Asynchronous use from a coroutine: the block runs as a function's body.
#include <cstddef>
#include <vector>
// @readme-includes@

void coroutine_use() {
  // @readme-block@
}
