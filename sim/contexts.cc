#include "sim/contexts.hpp"

#include <unordered_set>

#include "sim/runtime.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

struct registry {
  // Guards `known` and `all`; only ever held briefly.
  std::mutex lookup;
  std::unordered_set<const context*> known;
  std::vector<std::unique_ptr<context>> all;
  // Serializes retain/release/create/destroy, across a dying context's teardown, so that a primary
  // context cannot come back to life while its old streams drain.
  std::mutex lifecycle;
  std::vector<context*> primaries;  // by device; guarded by lifecycle
};

// Leaked: contexts outlive every handle the application may still hold, to the very end.
registry& state() {
  static registry* const instance = new registry();
  return *instance;
}

thread_local std::vector<context*> current_stack;

context& make_context(registry& r, CUdevice device, bool primary) {
  auto made = std::make_unique<context>(device, primary);
  context& ctx = *made;
  std::lock_guard lock(r.lookup);
  r.known.insert(&ctx);
  r.all.push_back(std::move(made));
  return ctx;
}

// Caller holds the lifecycle lock.
context& primary_of(registry& r, CUdevice device) {
  if (r.primaries.size() < static_cast<std::size_t>(device_count())) {
    r.primaries.resize(static_cast<std::size_t>(device_count()), nullptr);
  }
  context*& slot = r.primaries[static_cast<std::size_t>(device)];
  if (slot == nullptr) slot = &make_context(r, device, true);
  return *slot;
}

}  // namespace

void context::poison(CUresult status) {
  CUresult expected = CUDA_SUCCESS;
  if (!sticky_.compare_exchange_strong(expected, status, std::memory_order_acq_rel)) return;
  for (const std::shared_ptr<stream>& s : streams()) s->wake();
}

std::shared_ptr<stream> context::legacy_stream() {
  std::lock_guard lock(mutex_);
  if (!alive()) return nullptr;
  if (legacy_ == nullptr) {
    legacy_ = std::make_shared<stream>(*this, stream::kind::legacy);
    streams_.push_back(legacy_);
  }
  return legacy_;
}

std::shared_ptr<stream> context::per_thread_stream() {
  std::lock_guard lock(mutex_);
  if (!alive()) return nullptr;
  std::shared_ptr<stream>& slot = per_thread_[std::this_thread::get_id()];
  if (slot == nullptr) {
    slot = std::make_shared<stream>(*this, stream::kind::per_thread);
    streams_.push_back(slot);
  }
  return slot;
}

std::shared_ptr<stream> context::legacy_stream_if_made() {
  std::lock_guard lock(mutex_);
  return legacy_;
}

void context::track(const std::shared_ptr<stream>& s) {
  std::lock_guard lock(mutex_);
  std::erase_if(streams_, [](const std::weak_ptr<stream>& w) { return w.expired(); });
  streams_.push_back(s);
}

std::vector<std::shared_ptr<stream>> context::streams() {
  std::vector<std::shared_ptr<stream>> result;
  std::lock_guard lock(mutex_);
  result.reserve(streams_.size());
  for (const std::weak_ptr<stream>& w : streams_) {
    if (std::shared_ptr<stream> s = w.lock()) result.push_back(std::move(s));
  }
  return result;
}

CUresult context::enable_peer_access(const context& peer) {
  std::lock_guard lock(mutex_);
  return peers_.insert(&peer).second ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

CUresult context::disable_peer_access(const context& peer) {
  std::lock_guard lock(mutex_);
  return peers_.erase(&peer) != 0 ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

void context::forget_peer(const context* peer) {
  std::lock_guard lock(mutex_);
  peers_.erase(peer);
}

void context::activate() {
  static std::atomic<unsigned long long> next_id{1};
  std::lock_guard lock(mutex_);
  id_.store(next_id.fetch_add(1), std::memory_order_release);
  sticky_.store(CUDA_SUCCESS, std::memory_order_release);
  alive_.store(true, std::memory_order_release);
}

std::vector<std::shared_ptr<stream>> context::deactivate() {
  std::vector<std::shared_ptr<stream>> result;
  std::lock_guard lock(mutex_);
  alive_.store(false, std::memory_order_release);
  for (const std::weak_ptr<stream>& w : streams_) {
    if (std::shared_ptr<stream> s = w.lock()) result.push_back(std::move(s));
  }
  streams_.clear();
  legacy_.reset();
  per_thread_.clear();
  peers_.clear();
  return result;
}

context* find_context(CUcontext handle) noexcept {
  auto* ctx = reinterpret_cast<context*>(handle);
  registry& r = state();
  std::lock_guard lock(r.lookup);
  return r.known.contains(ctx) && ctx->alive() ? ctx : nullptr;
}

std::vector<context*> live_contexts() {
  std::vector<context*> result;
  registry& r = state();
  std::lock_guard lock(r.lookup);
  for (const auto& ctx : r.all) {
    if (ctx->alive()) result.push_back(ctx.get());
  }
  return result;
}

std::size_t held_context_count() {
  // A primary context is alive exactly while it is retained.
  return live_contexts().size();
}

CUresult retain_primary(CUdevice device, CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  registry& r = state();
  std::lock_guard lifecycle(r.lifecycle);
  context& ctx = primary_of(r, device);
  if (ctx.primary_references++ == 0) ctx.activate();
  *out = ctx.handle();
  return CUDA_SUCCESS;
}

CUresult release_primary(CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  registry& r = state();
  std::lock_guard lifecycle(r.lifecycle);
  context& ctx = primary_of(r, device);
  if (ctx.primary_references == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--ctx.primary_references == 0) tear_down(ctx, ctx.deactivate());
  return CUDA_SUCCESS;
}

CUresult create_context(CUdevice device, CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  registry& r = state();
  std::lock_guard lifecycle(r.lifecycle);
  context& ctx = make_context(r, device, false);
  ctx.activate();
  push_current(&ctx);
  *out = ctx.handle();
  return CUDA_SUCCESS;
}

CUresult destroy_context(CUcontext handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  registry& r = state();
  std::lock_guard lifecycle(r.lifecycle);
  context* ctx = find_context(handle);
  if (ctx == nullptr || ctx->primary()) return CUDA_ERROR_INVALID_CONTEXT;
  tear_down(*ctx, ctx->deactivate());
  drop_from_this_thread(ctx);
  return CUDA_SUCCESS;
}

context* top_of_stack() noexcept { return current_stack.empty() ? nullptr : current_stack.back(); }

void push_current(context* ctx) { current_stack.push_back(ctx); }

context* pop_current() noexcept {
  if (current_stack.empty()) return nullptr;
  context* top = current_stack.back();
  current_stack.pop_back();
  return top;
}

void set_current(context* ctx) {
  if (ctx == nullptr) {
    pop_current();
  } else if (current_stack.empty()) {
    current_stack.push_back(ctx);
  } else {
    current_stack.back() = ctx;
  }
}

void drop_from_this_thread(const context* ctx) noexcept {
  if (!current_stack.empty() && current_stack.back() == ctx) current_stack.pop_back();
}

CUresult current_context_even_if_poisoned(context*& out) noexcept {
  context* top = top_of_stack();
  if (top == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!top->alive()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  out = top;
  return CUDA_SUCCESS;
}

CUresult current_context(context*& out) noexcept {
  if (CUresult status = current_context_even_if_poisoned(out); status != CUDA_SUCCESS) return status;
  return out->sticky();
}

}  // namespace ferry::sim::detail
