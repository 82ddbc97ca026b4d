// Peer access between device 0 and device 1 for tests: whether the devices are peers, enabling from one
// context to another, and a scope that enables both ways and disables again at its end (primary
// contexts outlive a test case, and the next case must find them as the driver made them).
#pragma once

#include <boost/test/unit_test.hpp>

#include <exception>

#include "ferry/context.hpp"

namespace ferry::testing {

inline bool devices_are_peers() {
  return can_access_peer(device::get(0), device::get(1)) && can_access_peer(device::get(1), device::get(0));
}

// Lets `from` access `to`'s memory (enable_peer_access with `from` current).
inline peer_access enable_from(context_ref from, context_ref to) {
  context_guard in_from(from);
  return enable_peer_access(to);
}

inline void disable_from(context_ref from, context_ref to) {
  context_guard in_from(from);
  disable_peer_access(to);
}

class peer_access_both_ways {
 public:
  peer_access_both_ways(context_ref a, context_ref b) : a_(a), b_(b) {
    BOOST_TEST((enable_from(a_, b_) == peer_access::enabled));
    BOOST_TEST((enable_from(b_, a_) == peer_access::enabled));
  }
  peer_access_both_ways(const peer_access_both_ways&) = delete;
  peer_access_both_ways& operator=(const peer_access_both_ways&) = delete;
  ~peer_access_both_ways() {
    try {
      disable_from(a_, b_);
      disable_from(b_, a_);
    } catch (const std::exception& error) {
      BOOST_ERROR("disabling peer access failed: " << error.what());
    }
  }

 private:
  context_ref a_, b_;
};

}  // namespace ferry::testing
