// The *_async host transfers take page-locked memory (host_ptr), as the seed's take HostPtr.
// expect-error: no matching function for call to 'poke_array_async
#include "ferry/marshal.hpp"

void misuse(int* pageable, ferry::device_ptr<int> destination, ferry::stream_ref stream) {
  ferry::poke_array_async(16, pageable, destination, stream);
}
