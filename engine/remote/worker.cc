// ferry::remote::worker: the public face of worker_core.
#include <stdexcept>

#include "engine/remote/worker_core.hpp"

namespace ferry::remote {

worker::worker(executor_type executor, worker_options options)
    : core_(std::make_shared<detail::worker_core>(executor, std::move(options))), executor_(std::move(executor)) {
  core_->start();
}

worker::worker(worker&&) noexcept = default;
worker& worker::operator=(worker&& other) noexcept {
  worker moved(std::move(other));  // what this held is released with `moved`
  std::swap(core_, moved.core_);
  std::swap(executor_, moved.executor_);
  return *this;
}

worker::~worker() {
  if (core_) core_->shutdown();
}

std::uint64_t worker::id() const noexcept { return core_ ? core_->id() : 0; }

unsigned short worker::listen(std::string_view address, unsigned short port) {
  if (!core_) throw std::invalid_argument("ferry::remote::worker::listen: the worker was moved from");
  return core_->listen(address, port);
}

std::string worker::describe_transports() const {
  if (!core_) return "none";
  return core_->options().transports.empty() ? "UCX default" : core_->options().transports;
}

}  // namespace ferry::remote
