// A pageable transfer through the staging pool, chunk by chunk.
#include "engine/async/engine_core_impl.hpp"

#include <cstring>
#include <string>

#include "engine/async/chunk_stager.hpp"
#include "engine/errors/check.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

// A pageable transfer: chunk k+1 is leased and filled while the GPU moves chunk k. Cancellation
// is checked before each chunk; chunks already on the stream finish, and the op reports the bytes moved.
// A transfer with a stager (a pageable block list) has it fill and empty each chunk; any other moves one
// range of host memory to one of device memory or back.
//
// A transfer of at most in_place_bytes skips both hand-offs to an engine worker (each a thread's wake-up,
// which costs more than such a transfer's copy): its chunk, when one is free, is filled and submitted on
// the thread that starts it, and a peek's bytes are copied out on the bridge thread that learns the DMA
// is done.
struct staged_state : std::enable_shared_from_this<staged_state> {
  // A copy of this size takes the bridge thread about as long as a look at the completion flags.
  static constexpr std::size_t in_place_bytes = std::size_t{64} << 10;

  engine_core::impl* engine;
  std::shared_ptr<operation> op;
  std::uint64_t sequence;
  std::shared_ptr<prepared_transfer> transfer;
  CUstream stream;
  bool sequenced;
  bool to_device;
  std::size_t next_offset = 0;          // touched only by the thread submitting the next chunk
  std::atomic<std::size_t> in_flight{0};
  std::atomic<bool> all_submitted{false};

  void maybe_finish() {
    if (all_submitted.load() && in_flight.load() == 0) engine->complete(op, sequence);
  }

  void stop_submitting() {
    all_submitted = true;
    // Finish (if the chunks are done) before the next op on the stream may be submitted: its completion
    // must not overtake this one's. If chunks are still in flight, the bridge reports this op's last
    // chunk before anything submitted after it, since it answers a stream's events in order.
    maybe_finish();
    if (sequenced) engine->sequencer.done(stream);
  }

  // Leases the next chunk (or stops). Runs on the thread that finished the previous step. With `fill_here`
  // (an engine worker, or a small transfer's starting thread), a chunk that is free now is returned to be
  // filled on this thread: handing it to a worker would cost a wake-up per chunk (long, above all on a
  // virtual machine). Otherwise the lease hands the chunk to a worker when it comes, and nullptr is
  // returned.
  staging_pool::chunk next(bool fill_here) {
    if (next_offset >= transfer->bytes || op->cancel_requested() || engine->sticky.load() != CUDA_SUCCESS) {
      if (int status = engine->sticky.load(); status != CUDA_SUCCESS && next_offset < transfer->bytes) {
        engine->fail(op, static_cast<CUresult>(status),
                     engine->where(*transfer, stream) + " (not submitted: the context failed earlier)");
      }
      stop_submitting();
      return nullptr;
    }
    try {
      if (fill_here) {
        if (staging_pool::chunk free_now = engine->staging->try_lease()) return free_now;
      }
      engine->staging->lease(op, [self = shared_from_this()](staging_pool::chunk chunk) {
        if (chunk == nullptr) {  // cancelled while waiting for a chunk
          self->stop_submitting();
          return;
        }
        self->engine->post_work([self, chunk] { self->submit(chunk); });
      });
    } catch (const cuda_error& error) {
      engine->fail(op, error.status(), engine->where(*transfer, stream) + " (staging pool allocation)");
      stop_submitting();
    } catch (const std::bad_alloc&) {
      engine->fail(op, CUDA_ERROR_OUT_OF_MEMORY, engine->where(*transfer, stream) + " (staging pool allocation)");
      stop_submitting();
    }
    return nullptr;
  }

  // On a worker: fills (or fetches into) chunk after chunk while they are free.
  void submit(staging_pool::chunk chunk) {
    while (chunk != nullptr) chunk = submit_chunk(chunk);
  }

  // Puts one chunk on the stream; returns the next chunk to fill on this thread, if any.
  staging_pool::chunk submit_chunk(staging_pool::chunk chunk) {
    if (op->cancel_requested()) {
      engine->staging->release(chunk);
      stop_submitting();
      return nullptr;
    }
    const std::size_t offset = next_offset;
    const std::size_t length = transfer->stager != nullptr
                                   ? transfer->stager->chunk_length(offset, engine->staging->chunk_bytes())
                                   : std::min(engine->staging->chunk_bytes(), transfer->bytes - offset);
    CUresult status;
    if (transfer->stager != nullptr) {
      status = transfer->stager->enqueue_chunk(chunk, offset, length, stream);
    } else if (to_device) {
      engine->parallel_copy(chunk, reinterpret_cast<const std::byte*>(transfer->source.address) + offset, length);
      status = engine->driver.cuMemcpyHtoDAsync(transfer->destination.address + offset, chunk, length, stream);
    } else {
      status = engine->driver.cuMemcpyDtoHAsync(chunk, transfer->source.address + offset, length, stream);
    }
    if (status != CUDA_SUCCESS) {
      engine->staging->release(chunk);
      engine->fail(op, status, engine->where(*transfer, stream) + " (enqueue of chunk at offset " + std::to_string(offset) + ")");
      stop_submitting();
      return nullptr;
    }
    op->mark_submitted();
    next_offset = offset + length;
    ++in_flight;
    status = engine->bridge->watch(stream, [self = shared_from_this(), chunk, offset, length](CUresult result) {
      self->chunk_done(chunk, offset, length, result);
    });
    if (status != CUDA_SUCCESS) {
      CUresult drained = engine->driver.cuStreamSynchronize(stream);
      chunk_done(chunk, offset, length, drained == CUDA_SUCCESS ? status : drained);
      stop_submitting();
      return nullptr;
    }
    return next(true);
  }

  // On the bridge thread: the GPU is done with the chunk.
  void chunk_done(staging_pool::chunk chunk, std::size_t offset, std::size_t length, CUresult result) {
    if (result != CUDA_SUCCESS) {
      engine->fail(op, result, engine->where(*transfer, stream) + " (chunk at offset " + std::to_string(offset) + ")");
      engine->staging->release(chunk);
      --in_flight;
      maybe_finish();
      return;
    }
    if (to_device) {
      op->add_bytes(length);
      engine->staging->release(chunk);
      --in_flight;
      maybe_finish();
      return;
    }
    if (length <= in_place_bytes) {
      unpack(chunk, offset, length);
      op->add_bytes(length);
      engine->staging->release(chunk);
      --in_flight;
      maybe_finish();
      return;
    }
    // Copying out a large chunk is host work for the copy threads: not on the bridge thread.
    engine->post_work([self = shared_from_this(), chunk, offset, length] {
      self->unpack(chunk, offset, length);
      self->op->add_bytes(length);
      self->engine->staging->release(chunk);
      --self->in_flight;
      self->maybe_finish();
    });
  }

  // A peek's bytes [offset, offset + length), from the chunk to the caller's memory: a small chunk's on
  // this thread, a large one's shared by the copy threads.
  void unpack(const std::byte* chunk, std::size_t offset, std::size_t length) {
    if (transfer->stager != nullptr) {
      transfer->stager->unpack_chunk(chunk, offset, length);
    } else if (length <= in_place_bytes) {
      std::memcpy(reinterpret_cast<std::byte*>(transfer->destination.address) + offset, chunk, length);
    } else {
      engine->parallel_copy(reinterpret_cast<std::byte*>(transfer->destination.address) + offset, chunk, length);
    }
  }
};

void engine_core::impl::run_staged(std::shared_ptr<operation> op, std::uint64_t sequence,
                                   std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  auto state = std::make_shared<staged_state>();
  state->engine = this;
  state->op = std::move(op);
  state->sequence = sequence;
  state->transfer = std::move(transfer);
  state->stream = stream;
  state->sequenced = sequenced;
  state->to_device = state->transfer->source.kind == memory_kind::pageable_host;
  if (state->transfer->bytes <= staged_state::in_place_bytes) {
    state->submit(state->next(true));  // small: filled and submitted here when a chunk is free
  } else {
    state->next(false);  // the first chunk is filled by a worker, not on the caller's thread
  }
}

}  // namespace ferry::detail
