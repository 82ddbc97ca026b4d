// engine::wait: an op that moves nothing and completes once the work queued on a stream before it has
// completed, whoever queued it (ferry's ops, the program's kernels, other libraries). It is a single
// submission of no bytes: only its completion mark goes on the stream, and the bridge watches it as it
// watches any op, so a kernel's completion reaches the caller's executor without a thread that waits.
#include "engine/async/engine_core_impl.hpp"

#include <memory>
#include <string>
#include <utility>

#include "engine/errors/check.hpp"
#include "ferry/detail/op_blocks.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

void engine_core::check_stream(std::string_view operation, CUstream stream) {
  impl& engine = *impl_;
  caller_context in_engine(engine.driver, engine.context);
  CUcontext owner = nullptr;
  const CUresult status = engine.driver.cuStreamGetCtx(stream, &owner);
  // After a sticky error the driver answers every call with it: the wait then fails as any op does.
  if (is_sticky(status)) return;
  if (status == CUDA_ERROR_INVALID_HANDLE || status == CUDA_ERROR_INVALID_CONTEXT ||
      status == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
    throw_invalid_argument(operation, "stream " + hex(stream) +
                                          " is no live stream the driver knows (cuStreamGetCtx: " +
                                          status_name(status) + ")");
  }
  check(status, "cuStreamGetCtx", hex(stream));
  if (owner != engine.context) {
    // A mark written on another context's stream would fail, and a failed mark turns the flags off.
    throw_invalid_argument(operation, "stream " + hex(stream) + " belongs to context " + hex(owner) +
                                          ", not to the engine's context " + hex(engine.context) + " (device " +
                                          std::to_string(engine.ordinal) + ")");
  }
}

void engine_core::wait_stream(std::shared_ptr<operation> op, CUstream stream) {
  impl& engine = *impl_;
  auto marker = std::allocate_shared<prepared_transfer>(op_blocks::allocator<prepared_transfer>());
  marker->operation = "engine::wait";
  marker->extra = "the work queued before it";
  const std::uint64_t sequence = engine.admit();
  // In the stream's submission order: behind a staged transfer still putting its chunks on the stream.
  engine.sequencer.submit(stream, [&engine, op = std::move(op), sequence, marker = std::move(marker), stream] {
    caller_context in_engine(engine.driver, engine.context);
    engine.run_single(op, sequence, marker, stream, true);
  });
}

}  // namespace ferry::detail
