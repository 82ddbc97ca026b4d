// readme-block: #include "ferry/ferry.hpp"
// Synchronous use, as the seed: the block runs as a function's body.
#include <vector>
// @readme-includes@

void synchronous_use() {
  // @readme-block@
}
