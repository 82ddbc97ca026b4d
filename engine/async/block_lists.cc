#include "engine/async/block_lists.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/async/caller_context.hpp"
#include "engine/async/engine_core_impl.hpp"
#include "engine/errors/check.hpp"
#include "engine/kernels/launch.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/trace/stage_marks.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {
namespace {

// ferry_copy_blocks reads three arrays of 64-bit words, one word per copy in each: the sources, the
// destinations and the sizes.
constexpr std::size_t descriptor_words = 3;
// The kernel's widest access (kernels/copy_block.cuh): a piece moves that wide where its two ends are
// aligned alike modulo this.
constexpr std::size_t copy_alignment = 16;

// The three arrays of `stride` copies each that lie one after another from `words` (a slab, or a staged
// chunk past its bytes): raw page-locked memory, whose words the arrays' types give their meaning.
copy_arrays arrays_at(std::uint64_t* words, std::size_t stride) {
  static_assert(sizeof(CUdeviceptr) == sizeof(std::uint64_t) && sizeof(std::size_t) == sizeof(std::uint64_t));
  return {reinterpret_cast<CUdeviceptr*>(words), reinterpret_cast<CUdeviceptr*>(words + stride),
          reinterpret_cast<std::size_t*>(words + 2 * stride)};
}

// Writes `blocks` into `to` as copies, the first at index 0.
void write_copies(const copy_arrays& to, std::span<const checked_block> blocks, bool to_device) {
  for (std::size_t j = 0; j < blocks.size(); ++j) {
    to.put(j, blocks[j].host, blocks[j].device, blocks[j].bytes, to_device);
  }
}

// One launch of the kernel for the first `count` copies of `copies`. Their host address is their device
// address (unified addressing; kernel_usable says the device reaches page-locked memory there), so the
// kernel reads the arrays and the host blocks in place.
CUresult launch_copies(const copy_arrays& copies, std::size_t count, CUstream stream) {
  return launch_copy_blocks(reinterpret_cast<CUdeviceptr>(copies.sources),
                            reinterpret_cast<CUdeviceptr>(copies.destinations),
                            reinterpret_cast<CUdeviceptr>(copies.sizes), count, stream);
}

// Copies in memory of the list's own: for the copy engine, or until they are copied into slabs.
struct own_copies {
  explicit own_copies(std::size_t count)
      : addresses(std::make_unique_for_overwrite<CUdeviceptr[]>(2 * count)),
        sizes(std::make_unique_for_overwrite<std::size_t[]>(count)),
        arrays{addresses.get(), addresses.get() + count, sizes.get()} {}
  std::unique_ptr<CUdeviceptr[]> addresses;
  std::unique_ptr<std::size_t[]> sizes;
  copy_arrays arrays;
};

}  // namespace

struct block_lists::list final : chunk_stager {
  list(block_lists& owner, bool to_device) : owner(owner), to_device(to_device) {}
  list(const list&) = delete;
  list& operator=(const list&) = delete;
  // The GPU is done with the list (or it never reached a stream): a packed peek's bytes go to the
  // caller's memory before the caller hears, and the slabs and the chunk go back.
  ~list() {
    if (enqueued) copy_runs(unpacks, owner.copy_);
    for (std::uint64_t* slab : slabs) owner.slabs_.release(slab);
    if (chunk != nullptr) owner.staging_.release(chunk);
  }

  // Where a packed peek's block lies in the chunk, and where the caller wants it (or a poke's, the
  // other way).
  struct piece {
    std::byte* to;
    const std::byte* from;
    std::size_t bytes;
  };
  // Copies the pieces, each run of pieces that lie back to back on both sides as one copy (a list made
  // from one buffer is one run), so that the engine's copy threads share the large ones.
  static void copy_runs(const std::vector<piece>& pieces, const host_copy& copy) {
    for (std::size_t i = 0; i < pieces.size();) {
      piece run = pieces[i];
      for (++i; i < pieces.size() && pieces[i].to == run.to + run.bytes && pieces[i].from == run.from + run.bytes; ++i) {
        run.bytes += pieces[i].bytes;
      }
      copy(run.to, run.from, run.bytes);
    }
  }

  // Staged chunk by chunk (a list no chunk packed at its call). A list that chose the kernel moves a chunk
  // by one launch where the chunk's pieces suit the kernel by the engine's rule (or the caller forced the
  // kernel), the chunk carrying its pieces' descriptors right after their bytes (at the next 8-byte
  // boundary), so that a chunk in flight holds nothing else of the engine's; otherwise by the copy engine,
  // the chunk all bytes (a chunk of a few pieces, or of large ones: a launch gives each piece one block of
  // threads).
  std::size_t chunk_length(std::size_t offset, std::size_t chunk_bytes) override {
    const std::size_t left = bytes - offset;
    chunk_path = batch_path::copy_engine;
    if (path == batch_path::kernel && !owner.kernel_usable_.load(std::memory_order_relaxed)) {
      path = batch_path::copy_engine;  // another list found the kernel refused for good
    }
    if (path != batch_path::kernel) return std::min(chunk_bytes, left);
    std::size_t length = 0;
    std::size_t pieces = 0;
    std::size_t i = block_at(offset);
    std::size_t skip = offset - starts[i];
    while (length < left) {
      const std::size_t room = room_for(pieces + 1, chunk_bytes);
      if (room <= length) break;
      const std::size_t in_block = blocks[i].bytes - skip;
      const std::size_t take = std::min(in_block, room - length);
      length += take;
      ++pieces;
      if (take < in_block) break;
      ++i;
      skip = 0;
    }
    if (!kernel_forced && !owner.settings_.automatic.suits(pieces, length)) return std::min(chunk_bytes, left);
    // Where the list goes on, the next chunk begins at a multiple of 16 bytes of the list, as its bytes
    // would lie in one packed chunk: the kernel's accesses are as wide as a piece's two ends allow.
    const std::size_t past_alignment = (offset + length) % copy_alignment;
    if (length < left && length > past_alignment) length -= past_alignment;
    chunk_path = batch_path::kernel;
    return length;
  }

  // The bytes a chunk of `chunk_bytes` has for the bytes of `pieces` pieces beside their descriptors.
  static std::size_t room_for(std::size_t pieces, std::size_t chunk_bytes) {
    const std::size_t descriptors = descriptor_words * sizeof(std::uint64_t) * pieces + alignof(std::uint64_t) - 1;
    return chunk_bytes > descriptors ? chunk_bytes - descriptors : 0;
  }

  // Bytes [offset, offset + length) of the list, in its order, between the chunk and the device. A block
  // may span two chunks or more.
  CUresult enqueue_chunk(std::byte* chunk, std::size_t offset, std::size_t length, CUstream stream) override {
    std::vector<checked_block> pieces;
    std::vector<piece> packs;
    for_each_piece(offset, length, [&](const checked_block& part, std::size_t at) {
      auto* const place = chunk + at;
      if (to_device) packs.push_back({place, reinterpret_cast<const std::byte*>(part.host), part.bytes});
      pieces.push_back({reinterpret_cast<std::uintptr_t>(place), part.device, part.bytes});
    });
    copy_runs(packs, owner.copy_);
    CUresult status = CUDA_SUCCESS;
    if (chunk_path == batch_path::kernel) {
      const auto after_bytes = reinterpret_cast<std::uintptr_t>(chunk + length);
      auto* const words = reinterpret_cast<std::uint64_t*>((after_bytes + 7) & ~std::uintptr_t{7});
      const copy_arrays copies = arrays_at(words, pieces.size());
      write_copies(copies, pieces, to_device);
      status = launch_copies(copies, pieces.size(), stream);
      if (status != CUDA_SUCCESS && !is_sticky(status)) {
        // Refused, and nothing of the chunk is on the stream: the copy engine takes this chunk, and the
        // rest, which find the kernel given up.
        owner.stop_using_kernel("a staged chunk of " + std::to_string(pieces.size()) +
                                    " pieces (this chunk and the rest of its list too)",
                                status);
        chunk_path = batch_path::copy_engine;
      }
    }
    if (chunk_path == batch_path::copy_engine) {
      own_copies piece_copies(pieces.size());
      write_copies(piece_copies.arrays, pieces, to_device);
      status = owner.enqueue_copy_engine(to_device, piece_copies.arrays, pieces.size(), stream);
    }
    if (status == CUDA_SUCCESS && offset == 0) {  // a staged list is counted by its first chunk's path
      (chunk_path == batch_path::kernel ? owner.kernel_lists_ : owner.copy_engine_lists_)++;
    }
    return status;
  }

  void unpack_chunk(const std::byte* chunk, std::size_t offset, std::size_t length) override {
    std::vector<piece> out;
    for_each_piece(offset, length, [&](const checked_block& part, std::size_t at) {
      out.push_back({reinterpret_cast<std::byte*>(part.host), chunk + at, part.bytes});
    });
    copy_runs(out, owner.copy_);
  }

  // The block that holds byte `offset` of the list: the last that starts at or before it (starts[0] is 0,
  // and no block is empty).
  std::size_t block_at(std::size_t offset) const {
    return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), offset) - starts.begin()) - 1;
  }

  // Calls take(part, at) for each block's part within bytes [offset, offset + length) of the list:
  // `part` the block's host and device addresses and bytes in that range, `at` where they begin after
  // `offset`.
  template <class Take>
  void for_each_piece(std::size_t offset, std::size_t length, Take take) const {
    std::size_t i = block_at(offset);
    for (std::size_t done = 0; done < length; ++i) {
      const checked_block& b = blocks[i];
      const std::size_t skip = offset + done - starts[i];
      const std::size_t bytes = std::min(b.bytes - skip, length - done);
      take(checked_block{b.host + skip, b.device + skip, bytes}, done);
      done += bytes;
    }
  }

  // One launch of the kernel: `count` copies, whose arrays lie in a slab.
  struct launch {
    copy_arrays copies;
    std::size_t count;
  };

  block_lists& owner;
  const bool to_device;
  batch_path path = batch_path::copy_engine;   // kernel or copy_engine, chosen at the call
  bool kernel_forced = false;                  // the caller chose batch_path::kernel
  batch_path chunk_path = batch_path::copy_engine;  // staged: the path of the chunk being submitted
  std::vector<checked_block> blocks;           // pageable lists (packed: host addresses in the chunk)
  std::vector<std::size_t> starts;             // staged chunk by chunk: where each block begins in the list
  std::size_t bytes = 0;                       // staged chunk by chunk: the list's bytes
  // A list that moves in one go (page-locked, or packed): its `count` copies, in slabs[0] where the checks
  // wrote them into a free slab, else in `own`.
  copy_arrays copies;
  std::size_t count = 0;
  std::optional<own_copies> own;
  std::vector<launch> launches;                // the kernel's, where it takes the list
  std::vector<std::uint64_t*> slabs;           // held until the GPU is done
  staging_pool::chunk chunk = nullptr;         // pageable blocks, packed
  std::vector<piece> unpacks;
  bool enqueued = false;
};

block_lists::block_lists(const driver_table& driver, settings chosen, staging_pool& staging, host_copy copy,
                         std::function<void(const std::string&)> report)
    : driver_(driver),
      settings_(chosen),
      staging_(staging),
      copy_(std::move(copy)),
      report_(std::move(report)),
      kernel_usable_(chosen.kernel_usable),
      slabs_(driver, descriptor_words * blocks_per_launch) {}

batch_path block_lists::choose_path(std::string_view operation, batch_path path, std::size_t count,
                                    const std::optional<foreign_block>& foreign_device_block) const {
  if (path != batch_path::automatic && path != batch_path::copy_engine && path != batch_path::kernel) {
    throw_invalid_argument(operation, "transfer_options::batching " + std::to_string(static_cast<int>(path)) +
                                          " is not a batch_path");
  }
  const bool usable = kernel_usable_.load(std::memory_order_relaxed);
  if (path == batch_path::kernel && !settings_.kernel_usable) {
    throw_invalid_argument(operation, "transfer_options::batching is kernel, but device " +
                                          std::to_string(settings_.ordinal) +
                                          " cannot reach page-locked host memory at its host address (no unified "
                                          "addressing, or CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 0): choose "
                                          "automatic or copy_engine");
  }
  if (foreign_device_block) {
    if (path == batch_path::kernel) {
      const foreign_block& block = *foreign_device_block;
      throw_invalid_argument(operation, "transfer_options::batching is kernel, but " +
                                            memory_of_another_device("blocks[" + std::to_string(block.index) +
                                                                         "].device",
                                                                     block.device, block.ordinal, settings_.ordinal) +
                                            "; the engine's kernel cannot reach another device's memory (the copy "
                                            "engine can): choose automatic or copy_engine");
    }
    return batch_path::copy_engine;
  }
  if (path == batch_path::copy_engine || !usable) return batch_path::copy_engine;
  if (path == batch_path::automatic && count < settings_.automatic.min_copies) return batch_path::copy_engine;
  return batch_path::kernel;
}

prepared_transfer block_lists::prepare(std::string_view operation, bool to_device, memory_kind host_kind,
                                       const block_source& sides, std::size_t element_size, batch_path path,
                                       transfer_plan plan) {
  if (plan != transfer_plan::automatic) {
    throw_invalid_argument(operation, "transfer_options::plan is " + std::string(to_string(plan)) +
                                          "; a block list chooses its own way (transfer_options::batching picks "
                                          "kernel or copy engine)");
  }
  auto held = std::make_shared<list>(*this, to_device);
  list& blocks = *held;
  const checked_blocks checked = check_into(blocks, operation, host_kind, sides, element_size, path);
  blocks.count = checked.copies;
  batch_path chosen = choose_path(operation, path, blocks.count, checked.foreign_device_block);
  bool staged = false;
  if (host_kind == memory_kind::pageable_host && !blocks.blocks.empty()) {
    staged = !pack_into_chunk(blocks, operation, path, checked.bytes);
    if (staged && staging_.chunk_bytes() < kernel_chunk_min_bytes) chosen = batch_path::copy_engine;
  }
  // The automatic rule's bound on the mean block applies to what one launch would move: the whole list
  // where it moves in one go, each chunk's pieces where it is staged (chunk_length), which may be small
  // where the list's mean is not (many small blocks beside one large one).
  if (path == batch_path::automatic && chosen == batch_path::kernel && !staged &&
      !settings_.automatic.suits(blocks.count, checked.bytes)) {
    chosen = batch_path::copy_engine;
  }
  if (chosen == batch_path::kernel && !staged && !place_launches(blocks)) chosen = batch_path::copy_engine;
  if (chosen != batch_path::kernel && !blocks.slabs.empty()) keep_copies_off_slabs(blocks);
  blocks.path = chosen;
  blocks.kernel_forced = path == batch_path::kernel;
  return transfer_of(std::move(held), operation, host_kind, sides, checked.bytes, staged);
}

checked_blocks block_lists::check_into(list& blocks, std::string_view operation, memory_kind host_kind,
                                       const block_source& sides, std::size_t element_size, batch_path path) {
  if (host_kind != memory_kind::pinned_host) {
    checked_blocks checked = plan_blocks(operation, blocks.to_device, host_kind, sides, element_size);
    blocks.blocks = std::move(checked.blocks);  // without the empty blocks (moved, not copied)
    return checked;
  }
  // The checks write the copies where the GPU reads them: into a free slab where the list may take the
  // kernel in one launch (none is allocated before the checks), else into memory of the list's own.
  blocks.slabs.reserve(1);  // taking a slab never throws after it
  std::uint64_t* slab = sides.size() <= blocks_per_launch && may_take_kernel(path, sides.size())
                            ? slabs_.try_acquire_free()
                            : nullptr;
  if (slab != nullptr) {
    blocks.slabs.push_back(slab);
    blocks.copies = arrays_at(slab, sides.size());
  } else {
    blocks.copies = blocks.own.emplace(sides.size()).arrays;
  }
  return plan_blocks(operation, blocks.to_device, host_kind, sides, element_size, &blocks.copies);
}

bool block_lists::pack_into_chunk(list& blocks, std::string_view operation, batch_path path, std::size_t bytes) {
  // Packed into one staging chunk where they fit and one is free (never the pool's last, which a staged
  // transfer ahead of the list on its stream may be waiting for); otherwise staged chunk by chunk when
  // the list's turn comes, as a pageable transfer is.
  if (path == batch_path::kernel && bytes > staging_.chunk_bytes() && staging_.chunk_bytes() < kernel_chunk_min_bytes) {
    throw_invalid_argument(operation, "transfer_options::batching is kernel, but the pageable blocks hold " +
                                          std::to_string(bytes) + " bytes, more than a staging chunk of " +
                                          std::to_string(staging_.chunk_bytes()) +
                                          " bytes (engine_options::staging_chunk_bytes), and the kernel takes "
                                          "no chunk of fewer than " + std::to_string(kernel_chunk_min_bytes) +
                                          " bytes (its descriptors take 24 bytes a piece)");
  }
  if (bytes <= staging_.chunk_bytes()) blocks.chunk = staging_.try_lease_ahead();
  if (blocks.chunk == nullptr) {
    blocks.bytes = bytes;
    blocks.starts.reserve(blocks.blocks.size());
    std::size_t start = 0;
    for (const checked_block& b : blocks.blocks) {
      blocks.starts.push_back(start);
      start += b.bytes;
    }
    return false;
  }
  std::size_t offset = 0;
  std::vector<list::piece> packs;
  for (checked_block& b : blocks.blocks) {
    std::byte* place = blocks.chunk + offset;
    auto* host = reinterpret_cast<std::byte*>(b.host);
    if (blocks.to_device) {
      packs.push_back({place, host, b.bytes});
    } else {
      blocks.unpacks.push_back({host, place, b.bytes});
    }
    b.host = reinterpret_cast<std::uintptr_t>(place);
    offset += b.bytes;
  }
  list::copy_runs(packs, copy_);
  blocks.copies = blocks.own.emplace(blocks.count).arrays;
  write_copies(blocks.copies, blocks.blocks, blocks.to_device);
  return true;
}

prepared_transfer block_lists::transfer_of(std::shared_ptr<list> held, std::string_view operation,
                                           memory_kind host_kind, const block_source& sides, std::size_t bytes,
                                           bool staged) {
  const bool to_device = held->to_device;
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  if (block_sides first{}; sides.read(0, std::span(&first, 1)) == 1) {
    const endpoint host{host_kind, first.host, "blocks[0].host"};
    const endpoint device{memory_kind::device, first.device, "blocks[0].device"};
    transfer.source = to_device ? host : device;
    transfer.destination = to_device ? device : host;
  }
  transfer.extra = " (" + std::to_string(sides.size()) + " blocks, from the first block's)";
  list* raw = held.get();  // the transfer holds the list until the GPU is done: the pointer stays valid
  if (staged) {
    // The planner takes a pageable transfer with its plan set as forced: through the staging pool.
    transfer.pageable = true;
    transfer.plan = transfer_plan::staged;
    transfer.stager = raw;
  }
  transfer.enqueue = [this, raw](const prepared_transfer&, CUstream stream) { return enqueue(*raw, stream); };
  transfer.hold = std::move(held);
  return transfer;
}

bool block_lists::may_take_kernel(batch_path path, std::size_t count) const noexcept {
  if (path == batch_path::copy_engine || !kernel_usable_.load(std::memory_order_relaxed)) return false;
  return path == batch_path::kernel || count >= settings_.automatic.min_copies;
}

void block_lists::keep_copies_off_slabs(list& blocks) {
  if (!blocks.own) {  // the checks wrote the copies into slabs[0]
    const copy_arrays own = blocks.own.emplace(blocks.count).arrays;
    blocks.copies.copy_to(own, 0, blocks.count);
    blocks.copies = own;
  }
  for (std::uint64_t* slab : blocks.slabs) slabs_.release(slab);
  blocks.slabs.clear();
}

bool block_lists::place_launches(list& blocks) {
  if (!blocks.slabs.empty()) {  // the checks wrote the copies into a slab
    blocks.launches.push_back({blocks.copies, blocks.count});
    return true;
  }
  const std::size_t launches = (blocks.count + blocks_per_launch - 1) / blocks_per_launch;
  blocks.slabs.reserve(launches);  // a slab taken is always held
  blocks.launches.reserve(launches);
  for (std::size_t first = 0; first < blocks.count; first += blocks_per_launch) {
    CUresult status = CUDA_SUCCESS;
    std::uint64_t* slab = slabs_.acquire(status);
    if (slab == nullptr) {  // no page-locked memory for the kernel's arrays now: the copy engine needs none
      report("no page-locked memory for the copy kernel's descriptors (" + status_name(status) + "); a list of " +
             std::to_string(blocks.count) + " blocks submitted through the copy engine");
      blocks.launches.clear();
      return false;
    }
    blocks.slabs.push_back(slab);
    const std::size_t count = std::min(blocks_per_launch, blocks.count - first);
    const copy_arrays to = arrays_at(slab, count);
    blocks.copies.copy_to(to, first, count);
    blocks.launches.push_back({to, count});
  }
  return true;
}

CUresult block_lists::enqueue(list& blocks, CUstream stream) {
  const CUresult status = blocks.path == batch_path::kernel
                              ? launch_kernel(blocks, stream)
                              : enqueue_copy_engine(blocks.to_device, blocks.copies, blocks.count, stream);
  if (status == CUDA_SUCCESS) (blocks.path == batch_path::kernel ? kernel_lists_ : copy_engine_lists_)++;
  blocks.enqueued = status == CUDA_SUCCESS;
  return status;
}

CUresult block_lists::launch_kernel(list& blocks, CUstream stream) {
  for (std::size_t k = 0; k < blocks.launches.size(); ++k) {
    const CUresult launched = launch_copies(blocks.launches[k].copies, blocks.launches[k].count, stream);
    if (launched == CUDA_SUCCESS) continue;
    if (k == 0 && !is_sticky(launched)) {
      // Refused before anything ran (the kernels cannot be loaded, say): the copy engine takes the list.
      stop_using_kernel("a list of " + std::to_string(blocks.count) + " blocks", launched);
      blocks.path = batch_path::copy_engine;
      return enqueue_copy_engine(blocks.to_device, blocks.copies, blocks.count, stream);
    }
    // Part of the list is on the stream: the op fails, but only once that part is done with the memory.
    driver_.cuStreamSynchronize(stream);
    return launched;
  }
  return CUDA_SUCCESS;
}

CUresult block_lists::enqueue_copy_engine(bool to_device, const copy_arrays& copies, std::size_t count,
                                          CUstream stream) {
  // One attribute for every copy: they all go the same way. Stream order is all they need.
  CUmemcpyAttributes attributes{};
  attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attributes.srcLocHint.type = to_device ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  attributes.srcLocHint.id = to_device ? 0 : settings_.ordinal;
  attributes.dstLocHint.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  attributes.dstLocHint.id = to_device ? settings_.ordinal : 0;
  std::size_t first_attribute = 0;
  CUresult status = driver_.cuMemcpyBatchAsync(copies.destinations, copies.sources, copies.sizes, count, &attributes,
                                               &first_attribute, 1, stream);
  if (status == CUDA_SUCCESS || is_sticky(status)) return status;
  // A driver without batched copies, or a batch it refuses whole (it enqueues nothing then): a call per block.
  report("cuMemcpyBatchAsync refused a batch of " + std::to_string(count) + " block copies (" +
         status_name(status) + "); submitted copy by copy");
  status = CUDA_SUCCESS;
  std::size_t i = 0;
  for (; i < count && status == CUDA_SUCCESS; ++i) {
    const CUdeviceptr source = copies.sources[i];
    const CUdeviceptr destination = copies.destinations[i];
    const std::size_t bytes = copies.sizes[i];
    status = to_device ? driver_.cuMemcpyHtoDAsync(destination, reinterpret_cast<const void*>(source), bytes, stream)
                       : driver_.cuMemcpyDtoHAsync(reinterpret_cast<void*>(destination), source, bytes, stream);
  }
  if (status != CUDA_SUCCESS && i > 1) driver_.cuStreamSynchronize(stream);  // part of the list is on the stream
  return status;
}

void block_lists::stop_using_kernel(const std::string& what, CUresult refused) {
  kernel_usable_.store(false, std::memory_order_relaxed);
  report("the copy kernel (ferry_copy_blocks) could not take " + what + " (" + status_name(refused) +
         "); submitted through the copy engine");
}

void block_lists::report(const std::string& message) const {
  if (report_) report_(message);
}

transfer_request engine_core::prepare_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                                             const block_list& blocks, std::size_t element_size, batch_path path,
                                             transfer_plan plan) {
  stage_trace::mark(stage_trace::stage::prepare_begins);
  caller_context in_engine(impl_->driver, impl_->context);
  transfer_request transfer = transfer_request_access::make(
      impl_->blocks->prepare(operation, to_device, host_kind, block_source(blocks), element_size, path, plan));
  stage_trace::mark(stage_trace::stage::prepare_ends);
  return transfer;
}

}  // namespace ferry::detail
