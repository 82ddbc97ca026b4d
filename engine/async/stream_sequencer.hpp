// Keeps submission order on caller-given streams. Most ops put all their work on the stream at once,
// but a staged transfer submits chunk after chunk; an op given the same stream later must not slip its
// work in between. Each stream has a queue of submitters: one runs at a time, and calls done() when all
// its work is on the stream.
#pragma once

#include <cuda.h>

#include <deque>
#include <functional>
#include <map>
#include <mutex>

namespace ferry::detail {

class stream_sequencer {
 public:
  using submitter = std::function<void()>;
  // Posts a submitter that had to wait to where it can run (never inline on the releasing thread,
  // which may be the completion bridge).
  using scheduler = std::function<void(submitter)>;

  explicit stream_sequencer(scheduler schedule) : schedule_(std::move(schedule)) {}

  // Runs `submit` now if nothing is submitting on `stream`, else after the submitters before it.
  void submit(CUstream stream, submitter submit);
  // Claims `stream` for a submission the caller makes itself, now, if nothing is submitting on it (the
  // caller then calls done()); false if something is.
  bool try_claim(CUstream stream);
  // The running submitter of `stream` has put all its work on the stream.
  void done(CUstream stream);

 private:
  struct queue {
    bool busy = false;
    std::deque<submitter> waiting;
  };
  // A stream's queue is kept while idle (most ops find theirs without allocating one) until this many
  // streams have queues.
  static constexpr std::size_t kept_idle_queues = 64;

  scheduler schedule_;
  std::mutex mutex_;
  std::map<CUstream, queue> queues_;
};

}  // namespace ferry::detail
