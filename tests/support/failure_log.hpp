// What an engine reported through engine_options::on_failure, kept for a test to read. The engine calls
// the hook from its own threads, so the log takes a lock.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace ferry::testing {

class failure_log {
 public:
  // For engine_options::on_failure; the log must outlive the engine it is given to.
  std::function<void(const std::string&)> recorder() {
    return [this](const std::string& message) {
      std::lock_guard lock(mutex_);
      messages_.push_back(message);
    };
  }

  // The messages so far, in the order they came.
  std::vector<std::string> seen() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

}  // namespace ferry::testing
