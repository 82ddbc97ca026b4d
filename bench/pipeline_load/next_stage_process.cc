#include "bench/pipeline_load/next_stage_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace ferry::pipeline {
namespace {

constexpr auto patience = std::chrono::seconds(60);

std::string system_error(const std::string& what, int error) { return what + ": " + std::strerror(error); }

// Waits until `pid` ends or `limit` passes; true when it ended.
bool reaped_within(pid_t pid, std::chrono::steady_clock::duration limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

next_stage_process::next_stage_process(const std::vector<std::string>& arguments) {
  int input[2], output[2];
  if (::pipe2(input, O_CLOEXEC) != 0) throw std::runtime_error(system_error("next stage: pipe", errno));
  if (::pipe2(output, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(input[0]);
    ::close(input[1]);
    throw std::runtime_error(system_error("next stage: pipe", error));
  }
  to_child_ = input[1];
  from_child_ = output[0];
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<std::string> words = {self};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  const int error = posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(input[0]);
  ::close(output[1]);
  if (error != 0) {
    pid_ = -1;
    stop();
    throw std::runtime_error(system_error("next stage: posix_spawn " + self, error));
  }
  // The announcement, a line at most this long.
  std::string line;
  const auto until = std::chrono::steady_clock::now() + patience;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd readable{from_child_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) == 0) {
      stop();
      throw std::runtime_error("next stage: no \"stage-port N\" line from the child within 60 s");
    }
    char buffer[64];
    const ssize_t got = ::read(from_child_, buffer, sizeof buffer);
    if (got <= 0) {
      stop();
      throw std::runtime_error("next stage: the child ended before it announced its stage port (its errors are above)");
    }
    line.append(buffer, static_cast<std::size_t>(got));
  }
  unsigned port = 0;
  if (std::sscanf(line.c_str(), "stage-port %u", &port) != 1 || port == 0 || port > 65535) {
    stop();
    throw std::runtime_error("next stage: the child announced '" + line.substr(0, line.find('\n')) +
                             "', not \"stage-port N\"");
  }
  port_ = static_cast<unsigned short>(port);
}

next_stage_process::~next_stage_process() { stop(); }

void next_stage_process::stop() noexcept {
  if (to_child_ >= 0) ::close(std::exchange(to_child_, -1));
  if (pid_ > 0 && !reaped_within(pid_, patience)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  if (from_child_ >= 0) ::close(std::exchange(from_child_, -1));
}

void announce_and_wait(unsigned short port) {
  std::printf("stage-port %u\n", static_cast<unsigned>(port));
  std::fflush(stdout);
  char buffer[256];
  while (::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
}

}  // namespace ferry::pipeline
