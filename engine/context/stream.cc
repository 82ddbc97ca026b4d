#include <utility>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "ferry/stream.hpp"

namespace ferry {
namespace {

std::string describe(CUstream handle) { return handle ? "stream " + detail::hex(handle) : "the legacy default stream"; }

}  // namespace

void stream_ref::synchronize() const {
  detail::check(detail::driver().cuStreamSynchronize(handle_), "cuStreamSynchronize", describe(handle_));
}

bool stream_ref::ready() const {
  CUresult status = detail::driver().cuStreamQuery(handle_);
  if (status == CUDA_ERROR_NOT_READY) return false;
  detail::check(status, "cuStreamQuery", describe(handle_));
  return true;
}

stream stream::create(stream_flags flags) {
  CUstream handle = nullptr;
  detail::check(detail::driver().cuStreamCreate(&handle, static_cast<unsigned>(flags)), "cuStreamCreate");
  return stream(handle);
}

stream& stream::operator=(stream&& other) noexcept {
  stream moved(std::move(other));
  std::swap(handle_, moved.handle_);
  return *this;
}

stream::~stream() {
  if (handle_ != nullptr) detail::driver().cuStreamDestroy(handle_);
}

CUstream stream::release() noexcept { return std::exchange(handle_, nullptr); }

void stream::destroy() {
  if (handle_ == nullptr) return;
  CUstream handle = release();
  detail::check(detail::driver().cuStreamDestroy(handle), "cuStreamDestroy", describe(handle));
}

}  // namespace ferry
