// The second stage of `pipeline_load --stage-to-stage`, run in a process of its own, as it would be in a
// deployment (its own server on its own host): this program started again with --serve-as-next-stage.
// Two stages in one process would also measure something else: UCX does not use CUDA IPC between
// workers of one process (it cannot open memory handles the process exported itself), so device memory
// would go over TCP.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ferry::pipeline {

class next_stage_process {
 public:
  // Starts this program with `arguments` and waits (up to a minute) for the line "stage-port N" on its
  // standard output. Throws std::runtime_error, naming what happened, when the child cannot be started
  // or ends first.
  explicit next_stage_process(const std::vector<std::string>& arguments);
  next_stage_process(const next_stage_process&) = delete;
  next_stage_process& operator=(const next_stage_process&) = delete;
  // Closes the child's standard input (its sign to shut down), waits for it up to a minute, then kills it.
  ~next_stage_process();

  unsigned short stage_port() const noexcept { return port_; }

 private:
  void stop() noexcept;

  pid_t pid_ = -1;
  int to_child_ = -1;    // the child's standard input
  int from_child_ = -1;  // the child's standard output
  unsigned short port_ = 0;
};

// The child's side, once its server listens on `port`: prints "stage-port N" on standard output, then
// waits for standard input to close (the parent is done) before it returns.
void announce_and_wait(unsigned short port);

}  // namespace ferry::pipeline
