// The batched-copy executor's side in the engine: a small page-locked copy offered to the copy batcher
// (copy_batcher.hpp), which submits it with the copies that arrive beside it, and its end.
#include "engine/async/engine_core_impl.hpp"

#include <string>

#include "engine/transfer/plans.hpp"

namespace ferry::detail {

bool engine_core::impl::offer_to_batcher(const std::shared_ptr<operation>& op, std::uint64_t sequence,
                                         const std::shared_ptr<prepared_transfer>& transfer) {
  copy_batcher::copy item{transfer->destination.address,
                          transfer->source.address,
                          transfer->bytes,
                          copy_direction(transfer->source, transfer->destination),
                          transfer->batching,
                          transfer->kernels_reach,
                          op,
                          sequence,
                          transfer};
  return batcher->offer(item);
}

void engine_core::impl::batched_copy_done(copy_batcher::copy& item, CUresult result) {
  const std::shared_ptr<operation>& op = item.op;
  prepared_transfer& transfer = *item.transfer;
  if (result == CUDA_SUCCESS) {
    op->add_bytes(transfer.bytes);
  } else if (result != copy_batcher::not_submitted) {
    fail(op, result, transfer.label() + " (batched) of device " + std::to_string(ordinal));
  }
  transfer.counted.reset();  // before the caller hears
  complete(op, item.sequence);
}

}  // namespace ferry::detail
