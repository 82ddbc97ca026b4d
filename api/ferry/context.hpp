// Devices and contexts. Marshal operations, like the driver calls under them, act in the calling thread's
// current context: make one current with context_guard (or context_ref::make_current).
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <cstddef>
#include <string>

namespace ferry {

// A device ordinal, checked against the devices present.
class device {
 public:
  // Throws std::invalid_argument when `ordinal` is not in [0, count()).
  static device get(int ordinal);
  static int count();

  CUdevice handle() const noexcept { return handle_; }
  int ordinal() const noexcept { return ordinal_; }
  std::string name() const;
  std::size_t total_memory() const;
  int attribute(CUdevice_attribute attribute) const;
  friend bool operator==(device, device) = default;

 private:
  device(CUdevice handle, int ordinal) noexcept : handle_(handle), ordinal_(ordinal) {}
  CUdevice handle_;
  int ordinal_;
};

// A non-owning view of a context.
class context_ref {
 public:
  context_ref(std::nullptr_t) = delete;
  explicit context_ref(CUcontext handle) noexcept : handle_(handle) {}

  CUcontext get() const noexcept { return handle_; }
  // The device the context belongs to.
  ferry::device device() const;
  void make_current() const;
  // Waits for all work in the context (cuCtxSynchronize).
  void synchronize() const;
  friend bool operator==(context_ref, context_ref) = default;

  // The calling thread's current context; throws std::logic_error when there is none.
  static context_ref current();

 private:
  CUcontext handle_;
};

// Owns a context: a retained primary context (released on destruction) or a created one (destroyed).
// Move-only; move-assignment releases what was held.
class context {
 public:
  // The device's primary context, the one the CUDA runtime shares (retained; released on destruction).
  static context primary(ferry::device device);
  // A new context of its own on `device`, e.g. a second context on one GPU for peer copies.
  static context create(ferry::device device);

  context(const context&) = delete;
  context& operator=(const context&) = delete;
  context(context&& other) noexcept;
  context& operator=(context&& other) noexcept;
  ~context();

  context_ref ref() const noexcept { return context_ref(handle_); }
  operator context_ref() const noexcept { return ref(); }
  CUcontext get() const noexcept { return handle_; }
  ferry::device device() const noexcept { return device_; }
  bool is_primary() const noexcept { return primary_; }

 private:
  context(CUcontext handle, ferry::device device, bool primary) noexcept
      : handle_(handle), device_(device), primary_(primary) {}
  void reset() noexcept;
  CUcontext handle_;
  ferry::device device_;
  bool primary_;
};

// Makes a context current for a scope (cuCtxPushCurrent / cuCtxPopCurrent).
class context_guard {
 public:
  explicit context_guard(context_ref context);
  context_guard(const context_guard&) = delete;
  context_guard& operator=(const context_guard&) = delete;
  ~context_guard();
};

// Whether contexts on `from` may access memory on `to` directly (cuDeviceCanAccessPeer). A device is not
// its own peer: contexts on one device share its memory without peer access.
bool can_access_peer(ferry::device from, ferry::device to);

enum class peer_access { enabled, already_enabled, same_device };

// Lets the current context access `peer`'s memory (cuCtxEnablePeerAccess). Enabling twice is harmless
// (already_enabled); contexts on one device need nothing (same_device). Throws cuda_error when the
// devices cannot be peers.
peer_access enable_peer_access(context_ref peer);
void disable_peer_access(context_ref peer);

}  // namespace ferry
