// Streams: an owning type and a non-owning stream_ref. Operations take a stream_ref explicitly; the
// legacy null stream is used only when asked for by name (stream_ref::legacy_default()).
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <cstddef>

namespace ferry {

class stream_ref {
 public:
  stream_ref(std::nullptr_t) = delete;
  stream_ref(int) = delete;
  explicit stream_ref(CUstream handle) noexcept : handle_(handle) {}

  // The context's legacy default stream (the seed's `Nothing`): synchronizes with other blocking streams.
  static stream_ref legacy_default() noexcept { return stream_ref(static_cast<CUstream>(nullptr), 0); }

  CUstream get() const noexcept { return handle_; }
  // Blocks until all work on the stream is done (cuStreamSynchronize); throws cuda_error.
  void synchronize() const;
  // True when all work on the stream is done (cuStreamQuery); throws cuda_error on failure.
  bool ready() const;
  friend bool operator==(stream_ref, stream_ref) = default;

 private:
  stream_ref(CUstream handle, int) noexcept : handle_(handle) {}
  CUstream handle_;
};

enum class stream_flags : unsigned {
  non_blocking = CU_STREAM_NON_BLOCKING,  // does not synchronize with the legacy default stream
  blocking = CU_STREAM_DEFAULT,
};

// Owns a stream of the current context. Destroying it does not wait: work already queued still runs
// (as cuStreamDestroy promises). Move-only; move-assignment destroys what was held.
class stream {
 public:
  static stream create(stream_flags flags = stream_flags::non_blocking);
  // Takes ownership of a stream handle created elsewhere.
  static stream adopt(CUstream handle) noexcept { return stream(handle); }

  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  stream(stream&& other) noexcept : handle_(other.release()) {}
  stream& operator=(stream&& other) noexcept;
  ~stream();

  stream_ref ref() const noexcept { return stream_ref(handle_); }
  operator stream_ref() const noexcept { return ref(); }
  CUstream get() const noexcept { return handle_; }
  void synchronize() const { ref().synchronize(); }
  bool ready() const { return ref().ready(); }
  // Gives up ownership without destroying the stream.
  CUstream release() noexcept;
  // Destroys the stream now (cuStreamDestroy), throwing cuda_error on failure.
  void destroy();

 private:
  explicit stream(CUstream handle) noexcept : handle_(handle) {}
  CUstream handle_ = nullptr;
};

}  // namespace ferry
