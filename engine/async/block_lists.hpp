// Vectored transfers (engine::poke_blocks / peek_blocks): a list of blocks moved as one operation, by one
// launch of the gather/scatter kernel (ferry_copy_blocks), which reads and writes page-locked host memory
// in place through unified addressing, or by one cuMemcpyBatchAsync (the copy engine). A driver call per
// block costs far more than a small block's bytes take on the link; one launch moves many small blocks in
// about the time the link needs for their bytes. The checks read the caller's list where it lies and write
// a page-locked list's copies, as the three arrays both paths take, where they are read: into a free
// descriptor slab where the list may take the kernel in one launch, else into arrays of the list's own. The
// GPU waits for the initiating call, and each pass over a long list is a good part of the call. Pageable
// blocks are packed into a staging chunk first: a poke's at the call, a peek's copied out once the GPU is
// done, before the caller hears. Pageable blocks that one chunk cannot hold, or that find no chunk free at
// the call, are staged as a pageable transfer is, chunk by chunk (leased when the list's turn comes, never
// waiting on a thread), each chunk's pieces moved by one launch (their descriptors in the chunk, after
// their bytes) where the list chose the kernel and the chunk's pieces suit it (as many and as small as the
// engine's rule asks), otherwise by one cuMemcpyBatchAsync.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/async/chunk_stager.hpp"
#include "engine/async/descriptor_slabs.hpp"
#include "engine/async/kernel_choice.hpp"
#include "engine/async/staging_pool.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::detail {

struct copy_arrays;    // engine/transfer/plans.hpp
struct foreign_block;  // engine/transfer/plans.hpp
struct checked_blocks;  // engine/transfer/plans.hpp

class block_lists {
 public:
  struct settings {
    int ordinal;                    // the device, for the copy engine's location hints
    bool kernel_usable;             // the device reaches page-locked host memory at its host address
    kernel_choice automatic;        // where batch_path::automatic takes the kernel
  };

  // Copies host memory (packing and unpacking pageable blocks): the engine's copy threads share large runs.
  using host_copy = std::function<void(std::byte* destination, const std::byte* source, std::size_t bytes)>;

  block_lists(const driver_table& driver, settings chosen, staging_pool& staging, host_copy copy,
              std::function<void(const std::string&)> report);
  block_lists(const block_lists&) = delete;
  block_lists& operator=(const block_lists&) = delete;

  // Checks the blocks (std::invalid_argument naming the block) and the options, and holds what the list
  // needs (descriptor slabs, a staging chunk) until the GPU is done with it: a free slab may be taken
  // before the checks, for them to write into; nothing is allocated before them. Call in the engine's
  // context.
  prepared_transfer prepare(std::string_view operation, bool to_device, memory_kind host_kind,
                            const block_source& blocks, std::size_t element_size, batch_path path,
                            transfer_plan plan);

  std::size_t kernel_lists() const noexcept { return kernel_lists_.load(); }
  std::size_t copy_engine_lists() const noexcept { return copy_engine_lists_.load(); }

  // At process exit: forgets the slabs without calling the driver.
  void abandon() noexcept { slabs_.abandon(); }

  // Blocks one launch carries: one slab holds their three descriptor arrays.
  static constexpr std::size_t blocks_per_launch = 4096;
  // The kernel takes no staged chunk smaller than this: beside a piece's descriptors (24 bytes) it would
  // hold a few bytes at most. Lists staged through such chunks go through the copy engine.
  static constexpr std::size_t kernel_chunk_min_bytes = 64;

 private:
  struct list;  // one vectored transfer's blocks, slabs and staging, kept until the GPU is done

  // The checks (plan_blocks) of a list's blocks: a page-locked list's copies written into a free slab
  // where it may take the kernel in one launch, else into memory of the list's own; a pageable list's
  // blocks kept in the list.
  checked_blocks check_into(list& blocks, std::string_view operation, memory_kind host_kind,
                            const block_source& sides, std::size_t element_size, batch_path path);
  // A pageable list packed into one staging chunk (copies written, a poke's bytes copied in): false where
  // it does not fit or no chunk is free, the list then set up to be staged chunk by chunk.
  bool pack_into_chunk(list& blocks, std::string_view operation, batch_path path, std::size_t bytes);
  // The prepared transfer of a checked list, which holds the list until the GPU is done.
  prepared_transfer transfer_of(std::shared_ptr<list> held, std::string_view operation, memory_kind host_kind,
                                const block_source& sides, std::size_t bytes, bool staged);
  // The way of a list of `count` blocks (none empty), before the bound on their mean (which applies to what
  // one launch moves). `foreign_device_block`: the first block in memory of another device (plan_blocks),
  // which only the copy engine reaches.
  batch_path choose_path(std::string_view operation, batch_path path, std::size_t count,
                         const std::optional<foreign_block>& foreign_device_block) const;
  // Whether a list of `count` blocks asked to go by `path` may take the kernel (its checks then write its
  // copies into a free slab).
  bool may_take_kernel(batch_path path, std::size_t count) const noexcept;
  // Puts the kernel's launches of a list that moves in one go in slabs; false (and says so) when no slab can
  // be had: the copy engine takes the list.
  bool place_launches(list& blocks);
  // A list that the copy engine takes gives back the slab its checks wrote into (its copies moved to
  // memory of its own): slabs are for the kernel's lists in flight.
  void keep_copies_off_slabs(list& blocks);
  CUresult enqueue(list& blocks, CUstream stream);
  // Falls back to the copy engine (and says so in blocks.path) when the driver refuses the first launch.
  CUresult launch_kernel(list& blocks, CUstream stream);
  // After the driver refused a launch for good: says so, and the kernel is not tried again.
  void stop_using_kernel(const std::string& what, CUresult refused);
  // One cuMemcpyBatchAsync for the first `count` copies (a call per copy where the driver refuses the
  // batch).
  CUresult enqueue_copy_engine(bool to_device, const copy_arrays& copies, std::size_t count, CUstream stream);
  void report(const std::string& message) const;

  const driver_table& driver_;
  const settings settings_;
  staging_pool& staging_;
  host_copy copy_;
  std::function<void(const std::string&)> report_;
  std::atomic<bool> kernel_usable_;  // cleared when the driver refuses a launch for good
  descriptor_slabs slabs_;
  std::atomic<std::size_t> kernel_lists_{0};
  std::atomic<std::size_t> copy_engine_lists_{0};
};

}  // namespace ferry::detail
