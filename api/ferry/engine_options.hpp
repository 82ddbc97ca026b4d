// The engine's options and what its planner reports: how completion is learnt, the transfer plans,
// engine_options, the per-call transfer_options and the plan counters (engine::plan_counts()).
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "ferry/stream.hpp"

namespace ferry {

// How the engine learns that GPU work is done (see docs/engine.md, "Completion policies").
enum class completion_policy {
  poll,           // a poller thread spins on cuEventQuery while work is young, backs off, then parks
  host_callback,  // cuLaunchHostFunc wakes the poller; the stream's status is checked after the callback
  blocking_sync,  // the poller sleeps in cuEventSynchronize on blocking-sync events
};

// How a transfer reaches the device. The engine's planner chooses per op (visible through
// engine_options::on_plan and engine::plan_counts()); a call can force one.
enum class transfer_plan {
  automatic,   // let the planner choose
  pinned,      // page-locked host memory (or device memory): one DMA, no staging
  registered,  // a pageable buffer registered once (the registration cache), then one DMA
  staged,      // pageable memory copied through the pinned staging pool, chunk by chunk
  batched,     // a small copy coalesced with concurrent ones into one cuMemcpyBatchAsync
  // A small copy from pageable memory handed to the driver as it is: cuMemcpyHtoDAsync copies it into
  // the driver's own staging memory and returns, without waiting for the stream.
  driver_staged,
  // A small page-locked copy given no stream, posted to the resident copier (engine_options::resident_copies):
  // a copy kernel's block that stays on the GPU while copies keep coming. The planner's choice only.
  resident,
};

std::string_view to_string(transfer_plan plan) noexcept;

// How a batch of small copies moves (engine_options::batching, transfer_options::batching).
enum class batch_path {
  automatic,    // the kernel for batches of many small copies (engine_options::batching), else the copy engine
  copy_engine,  // one cuMemcpyBatchAsync: the copy engines move the blocks, no SM is taken
  // One launch of a gather/scatter kernel that reads and writes the page-locked host memory directly
  // (mapped, through unified addressing): far less per copy than a copy engine's descriptor, but the
  // kernel's blocks take SMs from compute kernels while it runs (bench/engine_latency measures both).
  kernel,
};

std::string_view to_string(batch_path path) noexcept;

// Which thread puts a transfer's completion mark (its completion flag's write) on the stream under the
// poll policy (engine_options::marks).
enum class completion_mark {
  // The initiating call, right behind the work: the GPU writes the flag as soon as the work is done; the
  // initiating call pays a second driver call.
  by_submitter,
  // The poller thread, when it takes the work over (while it is awake; a parked poller leaves the mark to
  // the initiating call): the initiating call makes the transfer's driver call alone, and the flag is
  // written a little later, behind whatever reached the stream meanwhile.
  by_poller,
};

// How a copy between two contexts moves (engine::copy_peer; engine_options::peer, transfer_options::peer).
enum class peer_path {
  // split for copies of at least engine_options::peer_split_min_bytes between two devices, else
  // copy_engine. The kernel is never chosen on its own: it takes SMs from the caller's kernels.
  automatic,
  copy_engine,  // one cuMemcpyPeerAsync: one copy engine moves the bytes
  // The copy cut into engine_options::peer_split_ways pieces on as many streams (so that several copy
  // engines work at once), joined back into the op's stream by events: one op, one completion.
  split,
  // A copy kernel in the engine's context, reading or writing the other device's memory over the link
  // (NVLink) with 16-byte accesses. A side in another context must be on another device that is a peer
  // of the engine's (cuDeviceCanAccessPeer), with unified addressing; ferry enables the engine's
  // context's access to that context if it is not enabled yet. Memory of a second context on the
  // engine's own device is out of the kernel's reach: refused (invalid_argument).
  kernel,
};

std::string_view to_string(peer_path path) noexcept;

// Per-call choices: the stream, a forced plan, or both; how the copy moves if it is batched; how a
// peer copy moves. Given as a stream, a plan, a braced pair, a batch_path or a peer_path:
//   gpu.poke(host, dev, stream, token);
//   gpu.poke(host, dev, transfer_plan::staged, token);
//   gpu.poke(host, dev, {stream, transfer_plan::staged}, token);
//   gpu.poke(host, dev, batch_path::kernel, token);
//   gpu.copy_peer(src, src_ctx, dst, dst_ctx, n, peer_path::kernel, token);
struct transfer_options {
  // The stream the op runs on, in submission order with the stream's other work. None: a pool stream.
  std::optional<stream_ref> stream = std::nullopt;
  // A forced plan. Pageable transfers may force pinned, registered or staged (and pokes driver_staged);
  // transfers without a pageable side only pinned (what they do anyway); batching is the planner's
  // alone. Anything else is an invalid_argument naming the plan.
  transfer_plan plan = transfer_plan::automatic;
  // How the copy moves when the planner batches it (a small page-locked copy given no stream, arriving
  // while others do); automatic: engine_options::batching decides. A copy that cannot be batched (given
  // a stream, with a pageable side, not a plain 1-D copy) refuses any other value (invalid_argument).
  // kernel is refused where a device side (a block's, for a block list) is memory of another device than
  // the engine's, which the engine's kernel cannot reach: invalid_argument naming that side (or block),
  // its memory's device and the engine's.
  batch_path batching = batch_path::automatic;
  // How a copy_peer moves; automatic: engine_options::peer decides. Other operations refuse any other
  // value (invalid_argument), as does a path the devices cannot take (peer_path::kernel).
  peer_path peer = peer_path::automatic;

  transfer_options() = default;
  // From a stream_ref or a ferry::stream (anything that converts to a stream_ref).
  template <class Stream>
    requires std::is_convertible_v<const Stream&, stream_ref>
  transfer_options(const Stream& on, transfer_plan forced = transfer_plan::automatic)  // NOLINT: implicit
      : stream(stream_ref(on)), plan(forced) {}
  transfer_options(transfer_plan forced) : plan(forced) {}  // NOLINT: implicit
  transfer_options(batch_path path) : batching(path) {}      // NOLINT: implicit
  transfer_options(peer_path path) : peer(path) {}           // NOLINT: implicit
};

// The most copies engine_options::batch_most_copies may allow in one batch: the engine keeps room for a
// full batch from the start.
inline constexpr std::size_t batch_most_copies_limit = 65536;

// The most streams engine_options::pool_streams may ask for.
inline constexpr std::size_t pool_streams_limit = 1024;
inline constexpr std::chrono::microseconds resident_idle_stop_limit = std::chrono::hours(1);

struct engine_options {
  int device = 0;                                      // the engine works in this device's primary context
  // Streams for ops given no stream (1 to pool_streams_limit). Such an op takes the stream the one before
  // it took while none of the engine's work is left there (one op at a time then keeps to one stream,
  // where the GPU is done with it sooner), else an idle one, else the next in turn.
  std::size_t pool_streams = 4;
  completion_policy policy = completion_policy::poll;
  // poll: the poller spins this long after the last activity, then parks (a parked thread is slow to run
  // again once woken, above all on a virtual machine, which the next op would pay). Unset: 1 ms on
  // machines with at least 4 cores (the gaps of a request/response loop or of a benchmark's trials),
  // else 200 us (on 2 cores the spinning poller takes the core that the copy threads need).
  std::optional<std::chrono::microseconds> spin_window;
  // poll: the longest the poller's spin after activity grows to. Where ops keep coming after pauses
  // longer than spin_window but shorter than this (at least half of the last 8 such pauses), the poller
  // spins 5/4 of the longest of them, so that the next op after such a pause finds it awake rather than
  // paying its wake-up; the handler's io thread lingers as long once nothing is owed there
  // (executor_spin). Unset: 5 ms on machines with at least 4 cores, else spin_window (no growth). At
  // least spin_window.
  std::optional<std::chrono::microseconds> max_spin_window;
  completion_mark marks = completion_mark::by_submitter;  // poll: who writes a transfer's completion flag
  // poll: longest sleep between queries while work is pending (sleeps grow with the age of the oldest
  // pending work, 1/128 of it, so that a late look costs under 1% of a transfer's time).
  std::chrono::microseconds max_backoff{1000};
  // poll: keep querying, without sleeping, while the oldest pending work is younger than this; the
  // backoff sleeps start after it. A sleep on a virtual machine can end far later than asked, which a
  // transfer longer than spin_window would pay, while cuStreamSynchronize spins (docs/performance.md).
  // Unset: 20 ms on machines with at least 4 cores (a core spins while the GPU works, as the driver's
  // own waits do), else zero (on 2 cores the spinning poller would take the core that the copy threads
  // need). Idle, the poller still parks after spin_window.
  std::optional<std::chrono::microseconds> pending_spin;
  // While completions are owed to an io_context, one of its threads is kept running (a task that
  // re-queues itself) for at most this long after the last submission or completion there, so that a
  // handler is not delayed by the wake-up of a parked thread; once nothing is owed, as long as the poller
  // spins after activity (spin_window, or longer: max_spin_window), so that the next op of a thread that
  // submits one at a time finds it running. Zero: the io_context's threads park as usual. Unset: 5 ms on
  // machines with at least 4 cores, else zero (on 2 cores a spinning io thread takes the core that the
  // completion bridge and the copy threads need). See docs/engine.md, "Keeping the handler's io_context
  // awake".
  std::optional<std::chrono::microseconds> executor_spin;
  // Pageable transfers move through chunks of this size (bench/staging_sweep compares settings).
  std::size_t staging_chunk_bytes = std::size_t{8} << 20;
  std::size_t staging_chunks = 8;                      // the pool never holds more than this many chunks
  // Host threads that fill and drain staging chunks: each chunk is split among them, because one thread
  // copies host memory several times slower than the copy engine moves it. 0: the machine's cores, at
  // most 8.
  std::size_t copy_threads = 0;
  // Pageable buffers of at least this size that are transferred twice are registered (not staged);
  // registrations stay up to registration_cache_bytes in all (least recently used dropped first).
  std::size_t registration_threshold_bytes = std::size_t{32} << 20;
  std::size_t registration_cache_bytes = std::size_t{8} << 30;
  // Pokes and peeks of pageable memory of at most small_staged_max_bytes (plain 1-D copies, plan not
  // forced, smaller than registration_threshold_bytes) are staged through one of small_staging_slots
  // page-locked slots of that size, taken without a lock: the initiating call copies a poke's bytes into
  // the slot, the engine's thread that sees a peek's copy done copies them out, and the copy engine
  // moves the slot as it moves any page-locked memory. A small peek then costs about what a page-locked
  // one does, where the staging pool's hand-offs cost more than its copy; a small poke about what the
  // driver's own staging costs (bench/transfer_bandwidth: *_driver_staged rows). Reported as
  // transfer_plan::staged. The slots are allocated by the first such transfer; while every one is in
  // use, a poke is driver_staged and a peek takes the staging pool, as they do for the engine's life if
  // the driver cannot allocate the slots (on_failure says so). Either zero: off. At most 65536 slots.
  std::size_t small_staged_max_bytes = std::size_t{64} << 10;
  std::size_t small_staging_slots = 64;
  // Other pokes from pageable memory of at most driver_staged_max_bytes are driver_staged: the
  // initiating call copies the bytes into the driver's staging memory (a memcpy's time) and the copy
  // costs one driver call, where the staging pool's hand-offs cost more than the copy below this size
  // (bench/transfer_bandwidth's size sweep). Zero: every such poke is registered or staged. Peeks are
  // never driver_staged: the driver's pageable device-to-host copy returns only once the stream has
  // reached and finished it, which would block the initiating thread.
  std::size_t driver_staged_max_bytes = std::size_t{1} << 20;
  // Small copies (at most batch_max_bytes, page-locked or device memory, given no stream) that arrive
  // within batch_window of another are submitted together; none waits longer than the window.
  // A zero window turns batching off.
  std::chrono::microseconds batch_window{20};
  std::size_t batch_max_bytes = std::size_t{64} << 10;
  std::size_t batch_most_copies = 256;  // at most batch_most_copies_limit
  // How batches move. automatic takes the kernel for batches of at least batch_kernel_min_copies copies
  // that average at most batch_kernel_max_mean_bytes, where one launch costs less than the copy engine's
  // per-copy descriptors, and the copy engine for the others: a few copies, or large ones, which the copy
  // engine moves at the link's speed without taking SMs (the kernel gives each copy one block of threads).
  // A batched copy is at most batch_max_bytes, so the bound only matters for batches where that is raised
  // above it. The same rule picks the way of a block list (engine::poke_blocks), and of each chunk of one
  // that is staged (the chunk's pieces: small blocks beside a large one still take the kernel). The
  // kernel needs a device that reaches page-locked host memory at its host address (unified addressing
  // and CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM); elsewhere every batch takes the copy
  // engine, and an engine asked for batch_path::kernel refuses to start (invalid_argument). A launch the
  // driver refuses sends its batch through the copy engine and is reported to on_failure; after a refusal
  // that is not the context's failure (the kernels cannot be loaded) the engine stops trying the kernel.
  batch_path batching = batch_path::automatic;
  std::size_t batch_kernel_min_copies = 8;
  std::size_t batch_kernel_max_mean_bytes = std::size_t{64} << 10;  // zero: automatic never takes the kernel
  // The resident copier. With resident_copies on, a small copy between page-locked host memory and
  // device memory of the engine's context (at most resident_max_bytes) given no stream and not batched
  // is posted to a block of a copy kernel that stays on the GPU (transfer_plan::resident): the
  // initiating call writes the copy into a ring in mapped page-locked memory, with no copy call and no
  // flag write (one pointer-attribute query for the device side's context), and the kernel starts it as soon
  // as it reads the entry, without the copy engine's setup. The kernel is launched by the first such
  // copy and stopped when the poller parks (spin_window after the last activity), or once no copy was
  // posted to it for resident_idle_stop to twice that, whichever comes first, so an idle engine holds no
  // SM. While it runs it holds one block of 1024 threads on one SM, and work that waits for the whole
  // context (cuCtxSynchronize, context::synchronize, frees of memory) waits until it stops. Forcing
  // transfer_plan::pinned on a call keeps that copy on the copy engine. Needs the poll policy and a device
  // that reaches page-locked host memory at its host address (else the engine refuses to start:
  // invalid_argument).
  // Off by default; bench/transfer_bandwidth and bench/engine_latency measure it beside the copy engine.
  bool resident_copies = false;
  std::size_t resident_max_bytes = std::size_t{64} << 10;
  std::chrono::microseconds resident_idle_stop{10000};  // more than zero, at most resident_idle_stop_limit
  // How copy_peer moves when the call does not say (peer_path). automatic splits copies of at least
  // peer_split_min_bytes between two devices into peer_split_ways pieces (2 to 16), each on its own
  // stream; smaller ones, and copies between two contexts of one device, take one copy engine.
  // bench/peer_bandwidth measures every path beside cuMemcpyPeerAsync.
  peer_path peer = peer_path::automatic;
  std::size_t peer_split_min_bytes = std::size_t{8} << 20;
  std::size_t peer_split_ways = 4;
  // Called with each transfer's plan once it is final (the trace event): on the initiating thread, except
  // for a registered plan, which is final only once the memory is registered, on an engine thread. A
  // transfer whose registration the driver refuses (its range overlaps memory registered already, or the
  // pages cannot be locked) is staged instead, a forced transfer_plan::registered too, and reported as
  // staged. Each report is counted in engine::plan_counts() as it is made. It must not throw.
  std::function<void(std::string_view operation, transfer_plan plan, std::size_t bytes)> on_plan;
  // Called (on an engine thread) with the description of every failed operation: the operation, stream,
  // device, byte range and driver status. error_codes carry the status; this carries the context.
  std::function<void(const std::string&)> on_failure;
};

// How many transfers each plan took so far (engine::plan_counts()).
struct plan_counts {
  std::size_t pinned = 0;
  std::size_t registered = 0;
  std::size_t staged = 0;
  std::size_t batched = 0;
  std::size_t batch_refusals = 0;  // batches the driver refused whole (their copies then went one by one)
  std::size_t driver_staged = 0;
  std::size_t copy_engine_batches = 0;  // batches moved by one cuMemcpyBatchAsync (or copy by copy after a refusal)
  std::size_t kernel_batches = 0;       // batches moved by one launch of the gather/scatter kernel
  // Block lists (engine::poke_blocks / peek_blocks) moved by the kernel, and by the copy engine. A list
  // also counts as one pinned transfer.
  std::size_t kernel_block_lists = 0;
  std::size_t copy_engine_block_lists = 0;
  std::size_t resident = 0;  // copies posted to the resident copier (transfer_plan::resident)
};

// How many copy_peer ops took each peer_path so far (engine::peer_counts()), counted when the path is
// chosen (an op cancelled before it reached its stream is counted too).
struct peer_counts {
  std::size_t copy_engine = 0;
  std::size_t split = 0;
  std::size_t kernel = 0;
};

}  // namespace ferry
