#include "sim/streams.hpp"

#include <chrono>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/contexts.hpp"
#include "sim/status.hpp"

namespace ferry::sim::detail {
namespace {

// Workers waiting on something outside their own stream re-check sticky errors this often: a poisoned
// context has no one to notify them.
constexpr auto poll_interval = std::chrono::milliseconds(1);

struct user_streams {
  std::mutex mutex;
  std::unordered_map<const stream*, std::shared_ptr<stream>> live;
  // Destroyed streams whose workers may still be draining; joined once finished.
  std::vector<std::shared_ptr<stream>> retiring;
};

// Leaked: streams the application never destroyed keep their workers until the process ends, and those
// must never touch a destroyed registry.
user_streams& registry() {
  static user_streams* const instance = new user_streams();
  return *instance;
}

// Caller holds the registry lock.
void join_finished(user_streams& r) {
  std::erase_if(r.retiring, [](const std::shared_ptr<stream>& s) {
    if (!s->finished()) return false;
    s->join();
    return true;
  });
}

}  // namespace

stream::stream(context& owner, kind type) : owner_(owner), type_(type) {
  worker_ = std::thread([this] { run(); });
}

stream::~stream() {
  close();
  join();
}

void stream::run() {
  for (;;) {
    stream_op op;
    CUresult failure = CUDA_SUCCESS;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return !queue_.empty() || closing_; });
      if (queue_.empty()) {
        finished_ = true;
        work_done_.notify_all();
        return;
      }
      op = std::move(queue_.front());
      queue_.pop_front();
      failure = std::exchange(pending_failure_, CUDA_SUCCESS);
    }
    if (failure != CUDA_SUCCESS) owner_.poison(failure);
    if (!owner_.poisoned() || op.runs_when_poisoned) {
      try {
        op.work();
      } catch (...) {
        owner_.poison(CUDA_ERROR_LAUNCH_FAILED);
      }
    }
    // What the operation captured (user data, allocations it kept alive) goes before anyone can see
    // it complete.
    op = {};
    {
      std::lock_guard lock(mutex_);
      ++completed_;
    }
    work_done_.notify_all();
  }
}

std::uint64_t stream::push(stream_op op) {
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(mutex_);
    if (closing_) return 0;
    queue_.push_back(std::move(op));
    sequence = ++submitted_;
  }
  work_ready_.notify_one();
  return sequence;
}

std::uint64_t stream::submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

bool stream::reached(std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  return completed_ >= sequence;
}

bool stream::wait(std::uint64_t sequence) {
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [&] { return completed_ >= sequence || owner_.poisoned(); });
  return completed_ >= sequence;
}

void stream::wait_from_worker(std::uint64_t sequence, const context& waiter) {
  std::unique_lock lock(mutex_);
  while (completed_ < sequence && !owner_.poisoned() && !waiter.poisoned()) {
    work_done_.wait_for(lock, poll_interval);
  }
}

void stream::wait_until_run(std::uint64_t sequence) {
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [&] { return completed_ >= sequence; });
}

void stream::wait_idle() {
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return completed_ >= submitted_; });
}

void stream::wake() {
  // Taking the lock orders the sticky store before any waiter's next predicate check.
  { std::lock_guard lock(mutex_); }
  work_done_.notify_all();
}

void stream::fail_next(CUresult status) {
  std::lock_guard lock(mutex_);
  pending_failure_ = status;
}

void stream::clear_failure() {
  std::lock_guard lock(mutex_);
  pending_failure_ = CUDA_SUCCESS;
}

void stream::close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  work_ready_.notify_all();
}

bool stream::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

void stream::join() {
  std::lock_guard lock(join_mutex_);
  if (!worker_.joinable()) return;
  // A host function that destroys the last reference to its own stream cannot join itself.
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();
    return;
  }
  worker_.join();
}

CUresult resolve_stream(CUstream handle, std::shared_ptr<stream>& out) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    context* ctx = nullptr;
    FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
    out = handle == CU_STREAM_PER_THREAD ? ctx->per_thread_stream() : ctx->legacy_stream();
    return out ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  user_streams& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<const stream*>(handle));
  if (it == r.live.end()) return CUDA_ERROR_INVALID_HANDLE;
  out = it->second;
  return CUDA_SUCCESS;
}

CUresult stream_for_memory_call(CUstream handle, std::shared_ptr<stream>& out) {
  context* current = nullptr;
  FERRY_SIM_TRY(current_context(current));
  FERRY_SIM_TRY(resolve_stream(handle, out));
  return out->owner().sticky();
}

CUresult enqueue(stream& s, stream_op op, std::uint64_t* sequence) {
  context& ctx = s.owner();
  std::lock_guard order(ctx.ordering());
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> waits;
  auto wait_for_tail = [&waits](const std::shared_ptr<stream>& other) {
    const std::uint64_t tail = other->submitted();
    if (!other->reached(tail)) waits.emplace_back(other, tail);
  };
  if (s.type() == stream::kind::legacy) {
    for (const std::shared_ptr<stream>& other : ctx.streams()) {
      if (other->orders_with_legacy()) wait_for_tail(other);
    }
  } else if (s.orders_with_legacy()) {
    if (std::shared_ptr<stream> legacy = ctx.legacy_stream_if_made()) wait_for_tail(legacy);
  }
  if (!waits.empty()) {
    auto barrier = [waits = std::move(waits), &ctx] {
      for (const auto& [other, sequence] : waits) other->wait_from_worker(sequence, ctx);
    };
    if (s.push({std::move(barrier)}) == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  const std::uint64_t pushed = s.push(std::move(op));
  if (sequence != nullptr) *sequence = pushed;
  return pushed == 0 ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
}

CUresult drain_legacy_order(context& ctx) {
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> tails;
  {
    std::lock_guard order(ctx.ordering());
    for (const std::shared_ptr<stream>& s : ctx.streams()) {
      if (s->type() == stream::kind::legacy || s->orders_with_legacy()) tails.emplace_back(s, s->submitted());
    }
  }
  for (const auto& [s, tail] : tails) {
    if (!s->wait(tail)) break;
  }
  return ctx.sticky();
}

CUresult run_synchronously(context& ctx, const std::function<void()>& work) {
  FERRY_SIM_TRY(drain_legacy_order(ctx));
  work();
  return ctx.sticky();
}

CUresult synchronize_context(context& ctx) {
  for (const std::shared_ptr<stream>& s : ctx.streams()) {
    if (!s->wait(s->submitted())) break;
  }
  return ctx.sticky();
}

std::shared_ptr<stream> create_user_stream(context& ctx, stream::kind type) {
  auto s = std::make_shared<stream>(ctx, type);
  ctx.track(s);
  user_streams& r = registry();
  std::lock_guard lock(r.mutex);
  join_finished(r);
  r.live.emplace(s.get(), s);
  return s;
}

CUresult destroy_user_stream(CUstream handle) {
  user_streams& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<const stream*>(handle));
  if (handle == nullptr || it == r.live.end()) return CUDA_ERROR_INVALID_HANDLE;
  // As on the driver, work already queued still runs; the worker is joined once it has.
  it->second->close();
  r.retiring.push_back(std::move(it->second));
  r.live.erase(it);
  join_finished(r);
  return CUDA_SUCCESS;
}

void forget_user_streams_of(const context* ctx) {
  user_streams& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.live, [ctx](const auto& entry) { return &entry.second->owner() == ctx; });
  join_finished(r);
}

std::size_t user_stream_count() {
  user_streams& r = registry();
  std::lock_guard lock(r.mutex);
  return r.live.size();
}

}  // namespace ferry::sim::detail
