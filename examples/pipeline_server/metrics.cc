#include "examples/pipeline_server/metrics.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>

namespace ferry::pipeline {
namespace {

// The series of what render is given (buffer and lane occupancy, the large payloads' gate, the planner's
// decisions).
void write_staging(std::ostream& out, const std::string& label, const buffer_pool::occupancy& memory) {
  out << "# HELP pipeline_staging_bytes Host and device buffer bytes (each counted once per pair), by state.\n"
      << "# TYPE pipeline_staging_bytes gauge\n"
      << "pipeline_staging_bytes{" << label << ",state=\"leased\"} " << memory.leased_bytes << "\n"
      << "pipeline_staging_bytes{" << label << ",state=\"idle\"} " << memory.idle_bytes << "\n"
      << "# HELP pipeline_staging_budget_bytes The bound on leased plus idle staging bytes.\n"
      << "# TYPE pipeline_staging_budget_bytes gauge\n"
      << "pipeline_staging_budget_bytes{" << label << "} " << memory.budget_bytes << "\n"
      << "# HELP pipeline_staging_waiting Requests waiting for staging memory (back-pressure).\n"
      << "# TYPE pipeline_staging_waiting gauge\n"
      << "pipeline_staging_waiting{" << label << "} " << memory.waiting << "\n";
}

void write_large_payloads(std::ostream& out, const std::string& label, const payload_gate::occupancy& gate) {
  out << "# HELP pipeline_large_payloads Requests with large payloads past their prefix, and their bound.\n"
      << "# TYPE pipeline_large_payloads gauge\n"
      << "pipeline_large_payloads{" << label << "} " << gate.inside << "\n"
      << "# HELP pipeline_large_payloads_limit The bound on requests with large payloads past their prefix.\n"
      << "# TYPE pipeline_large_payloads_limit gauge\n"
      << "pipeline_large_payloads_limit{" << label << "} " << gate.size << "\n"
      << "# HELP pipeline_large_payloads_waiting Requests with large payloads waiting to go past their prefix.\n"
      << "# TYPE pipeline_large_payloads_waiting gauge\n"
      << "pipeline_large_payloads_waiting{" << label << "} " << gate.waiting << "\n";
}

void write_lanes(std::ostream& out, const std::string& label, const lane_pool::occupancy& lanes) {
  out << "# HELP pipeline_gpu_lanes GPU lanes (streams) opened, by state.\n"
      << "# TYPE pipeline_gpu_lanes gauge\n"
      << "pipeline_gpu_lanes{" << label << ",state=\"busy\"} " << lanes.busy << "\n"
      << "pipeline_gpu_lanes{" << label << ",state=\"idle\"} " << lanes.opened - lanes.busy << "\n"
      << "# HELP pipeline_gpu_lanes_limit The bound on GPU lanes opened.\n"
      << "# TYPE pipeline_gpu_lanes_limit gauge\n"
      << "pipeline_gpu_lanes_limit{" << label << "} " << lanes.size << "\n"
      << "# HELP pipeline_gpu_lanes_waiting Requests waiting for a GPU lane.\n"
      << "# TYPE pipeline_gpu_lanes_waiting gauge\n"
      << "pipeline_gpu_lanes_waiting{" << label << "} " << lanes.waiting << "\n";
}

void write_plans(std::ostream& out, const std::string& label, const ferry::plan_counts& plans) {
  out << "# HELP pipeline_transfer_plans_total ferry's planner decisions for the server's transfers.\n"
      << "# TYPE pipeline_transfer_plans_total counter\n"
      << "pipeline_transfer_plans_total{" << label << ",plan=\"pinned\"} " << plans.pinned << "\n"
      << "pipeline_transfer_plans_total{" << label << ",plan=\"registered\"} " << plans.registered << "\n"
      << "pipeline_transfer_plans_total{" << label << ",plan=\"staged\"} " << plans.staged << "\n"
      << "pipeline_transfer_plans_total{" << label << ",plan=\"batched\"} " << plans.batched << "\n"
      << "pipeline_transfer_plans_total{" << label << ",plan=\"driver_staged\"} " << plans.driver_staged << "\n";
}

}  // namespace

std::string_view to_string(error_kind kind) noexcept {
  switch (kind) {
    case error_kind::truncated: return "truncated";
    case error_kind::bad_magic: return "bad_magic";
    case error_kind::unknown_operation: return "unknown_operation";
    case error_kind::too_large: return "too_large";
    case error_kind::disconnected: return "disconnected";
    case error_kind::write_timeout: return "write_timeout";
    case error_kind::deadline_exceeded: return "deadline_exceeded";
    case error_kind::gpu_error: return "gpu_error";
    case error_kind::shutting_down: return "shutting_down";
    case error_kind::header_timeout: return "header_timeout";
    case error_kind::no_next_stage: return "no_next_stage";
    case error_kind::next_stage_failed: return "next_stage_failed";
    case error_kind::payload_too_slow: return "payload_too_slow";
    case error_kind::count: break;
  }
  return "unknown";
}

std::string_view to_string(accept_port port) noexcept {
  switch (port) {
    case accept_port::requests: return "requests";
    case accept_port::metrics: return "metrics";
    case accept_port::count: break;
  }
  return "unknown";
}

std::string_view to_string(accept_failure failure) noexcept {
  switch (failure) {
    case accept_failure::descriptors: return "descriptors";
    case accept_failure::memory: return "memory";
    case accept_failure::other: return "other";
    case accept_failure::count: break;
  }
  return "unknown";
}

void server_metrics::write_accepts(std::ostream& out, const std::string& label) const {
  out << "# HELP pipeline_accept_errors_total Accepts that failed, by port and cause; the loop waits before the next.\n"
      << "# TYPE pipeline_accept_errors_total counter\n";
  for (std::size_t p = 0; p < static_cast<std::size_t>(accept_port::count); ++p) {
    for (std::size_t f = 0; f < accept_failures; ++f) {
      const auto port = static_cast<accept_port>(p);
      const auto failure = static_cast<accept_failure>(f);
      out << "pipeline_accept_errors_total{" << label << ",port=\"" << to_string(port) << "\",reason=\""
          << to_string(failure) << "\"} " << accept_errors(port, failure) << "\n";
    }
  }
  out << "# HELP pipeline_metrics_connections_open Connections to the metrics port being answered.\n"
      << "# TYPE pipeline_metrics_connections_open gauge\n"
      << "pipeline_metrics_connections_open{" << label << "} " << scrapes_open_.load() << "\n"
      << "# HELP pipeline_metrics_connections_refused_total Connections to the metrics port answered 503 and closed.\n"
      << "# TYPE pipeline_metrics_connections_refused_total counter\n"
      << "pipeline_metrics_connections_refused_total{" << label << "} " << scrapes_refused_.load() << "\n";
}

void server_metrics::record_request(operation op, status outcome, std::chrono::steady_clock::duration latency) noexcept {
  const std::size_t o = static_cast<std::size_t>(op) - 1;
  const std::size_t s = std::min<std::size_t>(static_cast<std::size_t>(outcome), statuses - 1);
  requests_[o * statuses + s].fetch_add(1);
  const double seconds = std::chrono::duration<double>(latency).count();
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(latency_bounds.begin(), latency_bounds.end(), seconds) - latency_bounds.begin());
  latency_buckets_[bucket].fetch_add(1);
  latency_nanoseconds_.fetch_add(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count()));
}

std::uint64_t server_metrics::requests(status outcome) const noexcept {
  const auto s = static_cast<std::size_t>(outcome);
  std::uint64_t total = 0;
  for (std::size_t o = 0; o < operations; ++o) total += requests_[o * statuses + s].load();
  return total;
}

std::string server_metrics::render(std::string_view stage, const buffer_pool::occupancy& memory,
                                   const lane_pool::occupancy& lanes,
                                   const std::optional<payload_gate::occupancy>& large_payloads,
                                   const std::optional<ferry::plan_counts>& plans) const {
  std::ostringstream out;
  const std::string label = "stage=\"" + std::string(stage) + "\"";
  out << "# HELP pipeline_requests_total Requests answered, by operation and reply status.\n"
      << "# TYPE pipeline_requests_total counter\n";
  for (std::size_t o = 0; o < operations; ++o) {
    for (std::size_t s = 0; s < statuses; ++s) {
      if (static_cast<status>(s) == status::busy) continue;
      out << "pipeline_requests_total{" << label << ",operation=\""
          << to_string(static_cast<operation>(o + 1)) << "\",status=\""
          << to_string(static_cast<status>(s)) << "\"} " << requests_[o * statuses + s].load() << "\n";
    }
  }
  out << "# HELP pipeline_received_bytes_total Bytes of request frames read.\n"
      << "# TYPE pipeline_received_bytes_total counter\n"
      << "pipeline_received_bytes_total{" << label << "} " << bytes_in_.load() << "\n"
      << "# HELP pipeline_sent_bytes_total Bytes of reply frames written.\n"
      << "# TYPE pipeline_sent_bytes_total counter\n"
      << "pipeline_sent_bytes_total{" << label << "} " << bytes_out_.load() << "\n";

  out << "# HELP pipeline_request_seconds Time from a request's header to its reply written.\n"
      << "# TYPE pipeline_request_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < latency_bounds.size(); ++b) {
    cumulative += latency_buckets_[b].load();
    out << "pipeline_request_seconds_bucket{" << label << ",le=\"" << latency_bounds[b] << "\"} " << cumulative << "\n";
  }
  cumulative += latency_buckets_.back().load();
  out << "pipeline_request_seconds_bucket{" << label << ",le=\"+Inf\"} " << cumulative << "\n"
      << "pipeline_request_seconds_sum{" << label << "} " << static_cast<double>(latency_nanoseconds_.load()) / 1e9
      << "\n"
      << "pipeline_request_seconds_count{" << label << "} " << cumulative << "\n";

  out << "# HELP pipeline_errors_total Failed requests and connections, by cause.\n"
      << "# TYPE pipeline_errors_total counter\n";
  for (std::size_t k = 0; k < errors_.size(); ++k) {
    out << "pipeline_errors_total{" << label << ",kind=\"" << to_string(static_cast<error_kind>(k)) << "\"} "
        << errors_[k].load() << "\n";
  }

  out << "# HELP pipeline_connections_open Connections being served.\n"
      << "# TYPE pipeline_connections_open gauge\n"
      << "pipeline_connections_open{" << label << "} " << connections_open_.load() << "\n"
      << "# HELP pipeline_connections_total Connections served (those refused at the limit are counted apart).\n"
      << "# TYPE pipeline_connections_total counter\n"
      << "pipeline_connections_total{" << label << "} " << connections_total_.load() << "\n"
      << "# HELP pipeline_connections_refused_total Connections answered busy and closed (over the limit, or out of descriptors).\n"
      << "# TYPE pipeline_connections_refused_total counter\n"
      << "pipeline_connections_refused_total{" << label << "} " << connections_refused_.load() << "\n";
  write_accepts(out, label);

  write_staging(out, label, memory);
  write_lanes(out, label, lanes);
  if (large_payloads) write_large_payloads(out, label, *large_payloads);
  if (plans) write_plans(out, label, *plans);
  return out.str();
}

}  // namespace ferry::pipeline
