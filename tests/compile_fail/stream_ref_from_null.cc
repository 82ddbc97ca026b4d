// Nothing silently defaults to the legacy null stream: a stream_ref cannot be made from 0 or nullptr.
// expect-error: use of deleted function
#include "ferry/stream.hpp"

ferry::stream_ref misuse() { return ferry::stream_ref(nullptr); }
