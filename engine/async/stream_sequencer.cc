#include "engine/async/stream_sequencer.hpp"

namespace ferry::detail {

void stream_sequencer::submit(CUstream stream, submitter submit) {
  {
    std::lock_guard lock(mutex_);
    queue& q = queues_[stream];
    if (q.busy) {
      q.waiting.push_back(std::move(submit));
      return;
    }
    q.busy = true;
  }
  submit();
}

bool stream_sequencer::try_claim(CUstream stream) {
  std::lock_guard lock(mutex_);
  queue& q = queues_[stream];
  if (q.busy) return false;
  q.busy = true;
  return true;
}

void stream_sequencer::done(CUstream stream) {
  submitter next;
  {
    std::lock_guard lock(mutex_);
    auto it = queues_.find(stream);
    if (it == queues_.end()) return;
    if (it->second.waiting.empty()) {
      it->second.busy = false;
      if (queues_.size() > kept_idle_queues) queues_.erase(it);
      return;
    }
    next = std::move(it->second.waiting.front());
    it->second.waiting.pop_front();
  }
  schedule_(std::move(next));
}

}  // namespace ferry::detail
