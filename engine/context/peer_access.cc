#include <string>

#include "engine/driver/driver_table.hpp"
#include "ferry/context.hpp"
#include "engine/errors/check.hpp"

namespace ferry {

bool can_access_peer(ferry::device from, ferry::device to) {
  int can = 0;
  detail::check(detail::driver().cuDeviceCanAccessPeer(&can, from.handle(), to.handle()), "cuDeviceCanAccessPeer",
                "devices " + std::to_string(from.ordinal()) + " -> " + std::to_string(to.ordinal()));
  return can != 0;
}

peer_access enable_peer_access(context_ref peer) {
  if (context_ref::current().device() == peer.device()) return peer_access::same_device;
  CUresult status = detail::driver().cuCtxEnablePeerAccess(peer.get(), 0);
  // Already enabled is a status, not a failure, and leaves nothing behind that later calls would see.
  if (status == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return peer_access::already_enabled;
  detail::check(status, "cuCtxEnablePeerAccess", "peer context " + detail::hex(peer.get()));
  return peer_access::enabled;
}

void disable_peer_access(context_ref peer) {
  if (context_ref::current().device() == peer.device()) return;
  detail::check(detail::driver().cuCtxDisablePeerAccess(peer.get()), "cuCtxDisablePeerAccess",
                "peer context " + detail::hex(peer.get()));
}

}  // namespace ferry
