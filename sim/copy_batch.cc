// cuMemcpyBatchAsync: many pointer-to-pointer copies (host or device, told apart by address as with
// UVA) that run as one stream operation. Sources marked CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL are
// read before the call returns, as the driver promises for them. A batch that writes pageable host
// memory returns only once it has run, as the driver's copies to pageable memory do.
#include <cstring>
#include <memory>
#include <vector>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/copy_engine.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

struct batch_entry {
  resolved destination;
  resolved source;
  std::size_t bytes = 0;
  // The source bytes as they were during the call, for DURING_API_CALL sources.
  std::shared_ptr<const std::vector<std::byte>> snapshot;
};

struct batch {
  std::vector<batch_entry> entries;
  std::size_t total = 0;

  void operator()() const {
    const engine_run run;
    for (const batch_entry& e : entries) {
      const std::byte* from = e.snapshot ? e.snapshot->data() : e.source.host;
      std::memmove(e.destination.host, from, e.bytes);
    }
    run.pace(total);
  }
};

bool valid_attributes(const CUmemcpyAttributes& a) {
  const bool order_known = a.srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
                           a.srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
                           a.srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
  return order_known && (a.flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) == 0;
}

// attrsIdxs must start at 0, increase, and stay below count.
bool valid_attribute_indices(const std::size_t* indices, std::size_t attributes, std::size_t count) {
  if (attributes == 0 || attributes > count || indices[0] != 0) return false;
  for (std::size_t i = 1; i < attributes; ++i) {
    if (indices[i] <= indices[i - 1]) return false;
  }
  return indices[attributes - 1] < count;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                            CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, CUstream hStream) {
  if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr || attrs == nullptr ||
      attrsIdxs == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The legacy stream is refused by the driver for batches.
  if (hStream == nullptr || hStream == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(hStream, s));
  if (!valid_attribute_indices(attrsIdxs, numAttrs, count)) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < numAttrs; ++i) {
    if (!valid_attributes(attrs[i])) return CUDA_ERROR_INVALID_VALUE;
  }
  batch work;
  work.entries.reserve(count);
  bool writes_pageable = false;
  std::size_t attribute = 0;
  for (std::size_t i = 0; i < count; ++i) {
    while (attribute + 1 < numAttrs && attrsIdxs[attribute + 1] <= i) ++attribute;
    if (sizes[i] == 0) continue;
    batch_entry& e = work.entries.emplace_back();
    e.bytes = sizes[i];
    FERRY_SIM_TRY(resolve_unified(dsts[i], sizes[i], e.destination));
    FERRY_SIM_TRY(resolve_unified(srcs[i], sizes[i], e.source));
    writes_pageable = writes_pageable || e.destination.keep == nullptr;
    if (attrs[attribute].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
      e.snapshot = std::make_shared<const std::vector<std::byte>>(e.source.host, e.source.host + e.bytes);
    }
    work.total += sizes[i];
  }
  if (work.entries.empty()) return CUDA_SUCCESS;
  std::uint64_t sequence = 0;
  FERRY_SIM_TRY(enqueue(*s, {std::move(work)}, &sequence));
  if (writes_pageable) {
    s->wait_until_run(sequence);
    return s->owner().sticky();
  }
  return CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
