// Random verified operations against one engine, from many coroutines at once (the stress test, the
// soak benchmark and the shutdown-under-load child all run it).
//
// Each worker owns an arena of device memory, a host model of it (device_model) and host buffers
// (pageable and pinned). A step is one of: a single op given no stream; a batch of ops given no stream
// on disjoint ranges (they may overlap in time); or a run of ops on one shared stream_ref, initiated
// together and ordered by the stream. Ops: poke and peek (pageable span, pinned host_ptr, an owned
// vector; a quarter of the pinned ones given no stream force the copy engine or the kernel should they
// be batched), poke_blocks and peek_blocks (1 to 16 blocks of up to 4 KiB each, pageable or pinned,
// scattered over the op's range, by the batch path drawn), copy, memset (1 to 16-byte elements),
// copy_2d (pinned to device, device to pinned, device to device). Sizes run from 1 B to the worker's
// maximum (64 MiB for the big worker), most of them small. Some ops are cancelled (at once, after a
// post, or after a short delay): their destination is unknown in the model until written again. Every
// peek is compared with the model when it completes, and after each step the bytes the step wrote are
// read back and compared, so every completed transfer is verified.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/stream.hpp"

namespace ferry::stress {

struct workload_options {
  std::size_t workers = 32;
  // Worker 0 is the big worker: its ops reach big_max_bytes, one in every big_every_ops ops of the
  // whole workload (the first of them exactly big_max_bytes); the others' ops reach small_max_bytes.
  std::size_t small_max_bytes = std::size_t{256} << 10;
  std::size_t big_max_bytes = std::size_t{64} << 20;
  std::size_t big_every_ops = 10000;
  std::size_t max_ops = 1000000;  // the workload stops after this many ops (0: no limit)
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  double cancel_probability = 0.01;
  std::uint64_t seed = 1;
  std::vector<stream_ref> streams;  // shared by all workers for their stream runs (at least one)
};

// Totals over all workers; updated as ops complete.
struct workload_totals {
  std::atomic<std::size_t> ops{0};             // random ops completed (the read-backs are not counted)
  std::atomic<std::size_t> bytes_moved{0};     // bytes of those ops
  std::atomic<std::size_t> bytes_verified{0};  // bytes compared with the model (peeks and read-backs)
  std::atomic<std::size_t> read_backs{0};      // ops that read back what a step wrote
  std::atomic<std::size_t> block_lists{0};     // poke_blocks and peek_blocks among the ops
  std::atomic<std::size_t> cancel_requests{0};
  std::atomic<std::size_t> aborted{0};         // ops that completed with operation_aborted
  std::atomic<std::size_t> failures{0};        // wrong bytes, unexpected errors, wrong byte counts
  std::atomic<std::size_t> workers_started{0};  // workers past their set-up, issuing ops
  std::atomic<std::size_t> workers_done{0};

  void fail(std::string message);
  std::vector<std::string> failure_messages() const;  // the first few

  // The ops initiated and not yet completed, by description: what a run that stops making progress
  // names (an op whose handler never runs).
  void initiated(const void* op, const std::string& description);
  void completed(const void* op);
  std::vector<std::string> outstanding() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
  std::map<const void*, std::string> outstanding_;
};

// Spawns options.workers coroutines on `executor` (each on a strand of it) running random verified
// steps on `gpu` until options.max_ops ops were issued or options.deadline passed; totals.workers_done
// reaches options.workers when all have finished. The caller runs the executor's io_context; gpu,
// options.streams and totals must outlive the workers. Throws std::invalid_argument for bad options.
void spawn_workload(engine& gpu, boost::asio::any_io_executor executor, const workload_options& options,
                    workload_totals& totals);

}  // namespace ferry::stress
