// Memory kinds live in the types: a device pointer is not a host destination.
// expect-error: cannot convert 'ferry::device_ptr<int>' to
#include "ferry/marshal.hpp"

void misuse(ferry::device_ptr<int> source, ferry::device_ptr<int> destination) {
  ferry::peek_array(16, source, destination);
}
