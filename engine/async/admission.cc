// Which ops are still in flight (sequence numbers, for wait_all), how an op is completed or failed,
// and wait_all itself.
#include "engine/async/engine_core_impl.hpp"

#include <string>

#include "engine/errors/check.hpp"
#include "ferry/error.hpp"
#include "engine/transfer/stream_names.hpp"

namespace ferry::detail {

std::uint64_t engine_core::impl::admit() {
  std::lock_guard lock(live_mutex);
  const std::uint64_t sequence = next_sequence++;
  live.insert(sequence);
  return sequence;
}

void engine_core::impl::retire(std::uint64_t sequence) {
  std::vector<std::shared_ptr<operation>> ready;
  {
    std::lock_guard lock(live_mutex);
    live.erase(sequence);
    const std::uint64_t oldest_live = live.empty() ? next_sequence : live.oldest();
    // A wait_all admitted as sequence s is satisfied when nothing older than s is live.
    for (auto it = waiters.begin(); it != waiters.end() && it->first <= oldest_live;) {
      ready.push_back(std::move(it->second));
      it = waiters.erase(it);
    }
  }
  live_changed.notify_all();
  for (auto& op : ready) finish_wait(op);
}

void engine_core::impl::finish_wait(const std::shared_ptr<operation>& op) {
  // After a sticky error nothing submitted earlier has run as asked: the wait reports it too.
  if (int status = sticky.load(); status != CUDA_SUCCESS) {
    fail(op, static_cast<CUresult>(status), "engine::wait_all on device " + std::to_string(ordinal) +
                                                " (the context failed)");
  }
  op->finish();
}

void engine_core::impl::complete(const std::shared_ptr<operation>& op, std::uint64_t sequence) {
  if (op->finish()) retire(sequence);
}

std::string engine_core::impl::where(const prepared_transfer& transfer, CUstream stream) const {
  return transfer.label() + " on stream " + hex(stream) + " of device " + std::to_string(ordinal);
}

void engine_core::impl::fail(const std::shared_ptr<operation>& op, CUresult status, const std::string& detail) {
  if (is_sticky(status)) {
    int expected = CUDA_SUCCESS;
    sticky.compare_exchange_strong(expected, status);
  }
  std::string message = detail + ": " + status_name(status);
  op->record_error(boost::system::error_code(make_error_code(status)), message);
  if (options.on_failure) options.on_failure(message);
}

void engine_core::wait_all(std::shared_ptr<operation> op) {
  impl& engine = *impl_;
  bool ready = false;
  {
    std::lock_guard lock(engine.live_mutex);
    const std::uint64_t sequence = engine.next_sequence;
    ready = engine.live.empty() || engine.live.oldest() >= sequence;
    if (!ready) engine.waiters.emplace(sequence, op);
  }
  if (ready) engine.finish_wait(op);
}

}  // namespace ferry::detail
