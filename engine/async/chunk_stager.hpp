// How a staged transfer whose host bytes are not one range (a pageable block list) moves through the
// staging pool: the engine leases chunks and counts bytes as for any staged transfer (staged_transfer.cc),
// and asks the transfer's stager to fill and empty each chunk. The transfer's bytes are taken in the order
// the transfer lists them, and a chunk holds the next of them, whatever blocks they belong to: as many as
// the stager says fit (a chunk may also carry what the GPU needs to find them).
#pragma once

#include <cuda.h>

#include <cstddef>

namespace ferry::detail {

class chunk_stager {
 public:
  virtual ~chunk_stager() = default;

  // How many of the transfer's bytes from `offset` on the next chunk, of `chunk_bytes`, carries: at least
  // one (offset is short of the transfer's end). Called once per chunk, before its enqueue_chunk: the
  // stager may decide there how that chunk moves.
  virtual std::size_t chunk_length(std::size_t offset, std::size_t chunk_bytes) = 0;

  // Puts bytes [offset, offset + length) of the transfer (length as chunk_length gave it) between
  // `chunk` (page-locked, chunk_bytes) and device memory on `stream`: a poke's host bytes are copied into
  // the chunk first. A status other than success means nothing of the chunk is left on the stream.
  virtual CUresult enqueue_chunk(std::byte* chunk, std::size_t offset, std::size_t length, CUstream stream) = 0;

  // A peek's bytes [offset, offset + length), from `chunk` to the host, once the GPU is done with it.
  virtual void unpack_chunk(const std::byte* chunk, std::size_t offset, std::size_t length) = 0;
};

}  // namespace ferry::detail
