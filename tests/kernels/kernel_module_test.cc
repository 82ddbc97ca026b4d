// ferry::kernel_module, the public way for a program to launch its own kernels on ferry's contexts and streams,
// with the pipeline example's kernel and fatbin (examples/pipeline_server/kernels): on cuda the kernel
// itself, on sim the twin that :sim_twin registers under its name.
#include "ferry/kernel_module.hpp"  // first: the public header compiles on its own

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "examples/pipeline_server/kernels/fatbin.hpp"
#include "examples/pipeline_server/kernels/parameters.hpp"
#include "examples/pipeline_server/kernels/transform.hpp"
#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::on_sim;
namespace kernels = ferry::pipeline::kernels;

namespace {

constexpr const char* kernel_names[] = {"ferry_transform_checksum"};

// One module for the whole program and never deleted, as kernel_module asks.
kernel_module& transform_module() {
  static kernel_module* const instance = new kernel_module(kernels::fatbin(), kernel_names);
  return *instance;
}

// The module is unloaded before device_fixture checks for leaks (it counts modules) and releases the
// primary context (which would free the module behind kernel_module's back).
struct module_fixture : ferry::testing::device_fixture {
  ~module_fixture() { BOOST_CHECK_EQUAL(transform_module().unload_current_nothrow(), CUDA_SUCCESS); }
};

std::size_t modules_loaded() { return ferry::testing::usage_now().modules; }

// The checksum the kernel adds for whole words `data` in checksum_only mode (transform.hpp).
std::uint64_t expected_checksum(const std::vector<std::uint64_t>& data) {
  std::uint64_t sum = 0;
  for (std::size_t j = 0; j < data.size(); ++j) sum += kernels::checksum_term(data[j], j);
  return sum;
}

// Device memory for a checksum_only launch: `words` random words and, after them, the checksum word
// (zero). The parameters point into it.
struct checksum_job {
  explicit checksum_job(std::size_t words)
      : data(ferry::testing::random_vector<std::uint64_t>(words, 7)),
        buffer(device_buffer<std::uint64_t>::allocate(words + 1)) {
    std::vector<std::uint64_t> initial = data;
    initial.push_back(0);
    poke_array(initial.size(), initial.data(), buffer.get());
    const CUdeviceptr base = buffer.get().get();
    parameters = kernels::transform_checksum_parameters{base, words * 8, base + words * 8, kernels::checksum_only};
  }

  std::uint64_t checksum() const { return peek_list_array(data.size() + 1, buffer.get()).back(); }

  std::vector<std::uint64_t> data;
  device_buffer<std::uint64_t> buffer;
  kernels::transform_checksum_parameters parameters{};
  void* params[1] = {&parameters};
};

const launch_shape one_block{{1}, {kernels::transform_block_threads}};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(kernel_module_suite, module_fixture)

BOOST_AUTO_TEST_CASE(a_launch_runs_the_kernel_on_the_callers_stream) {
  checksum_job job(1000);
  // Blocking: the pageable poke's DMA may still be landing, ordered only with blocking streams.
  stream s = stream::create(stream_flags::blocking);
  BOOST_CHECK_EQUAL(transform_module().kernel_count(), 1u);
  BOOST_CHECK_GT(transform_module().resident_threads(), 0u);
  transform_module().launch(0, one_block, job.params, s);
  s.synchronize();
  BOOST_CHECK_EQUAL(job.checksum(), expected_checksum(job.data));
}

// The program's kernel on a stream of its own, waited for through an engine: the wait completes once the
// kernel is done (the checksum is read on the legacy stream, which a non-blocking stream does not order).
BOOST_AUTO_TEST_CASE(an_engine_wait_on_the_stream_completes_once_the_kernel_is_done) {
  checksum_job job(1 << 20);
  primary.ref().synchronize();  // the job's pageable poke has landed
  boost::asio::io_context io;
  engine gpu{io.get_executor()};
  stream s = stream::create();
  std::optional<boost::system::error_code> waited;
  transform_module().launch(0, one_block, job.params, s);
  gpu.wait(s, [&](boost::system::error_code error) { waited = error; });
  BOOST_REQUIRE(ferry::testing::run_until(io, [&] { return waited.has_value(); }));
  BOOST_TEST(!*waited);
  BOOST_CHECK_EQUAL(job.checksum(), expected_checksum(job.data));
}

BOOST_AUTO_TEST_CASE(a_kernel_index_past_the_names_is_an_invalid_argument_naming_it) {
  checksum_job job(4);
  stream s = stream::create();
  const std::size_t modules = modules_loaded();
  expect_error<std::invalid_argument>([&] { transform_module().function(1); },
                                      {"kernel_module::function", "kernel 1", "has 1 kernel"});
  expect_error<std::invalid_argument>([&] { transform_module().launch(3, one_block, job.params, s); },
                                      {"kernel_module::launch", "kernel 3", "has 1 kernel"});
  BOOST_CHECK_EQUAL(modules_loaded(), modules);  // refused before anything is loaded
}

BOOST_AUTO_TEST_CASE(a_shape_with_a_zero_dimension_is_an_invalid_argument_naming_it) {
  checksum_job job(4);
  stream s = stream::create();
  expect_error<std::invalid_argument>(
      [&] { transform_module().launch(0, launch_shape{{0}, {kernels::transform_block_threads}}, job.params, s); },
      {"kernel_module::launch", "shape.grid.x is 0"});
  expect_error<std::invalid_argument>(
      [&] { transform_module().launch(0, launch_shape{{1}, {32, 1, 0}}, job.params, s); },
      {"kernel_module::launch", "shape.block.z is 0"});
}

BOOST_AUTO_TEST_CASE(a_module_without_an_image_or_kernels_is_an_invalid_argument) {
  const char* const null_name[] = {nullptr};
  expect_error<std::invalid_argument>([] { [[maybe_unused]] kernel_module m({}, kernel_names); },
                                      {"kernel_module", "image is empty"});
  expect_error<std::invalid_argument>([] { [[maybe_unused]] kernel_module m(kernels::fatbin(), {}); },
                                      {"kernel_module", "kernels is empty"});
  expect_error<std::invalid_argument>([&] { [[maybe_unused]] kernel_module m(kernels::fatbin(), null_name); },
                                      {"kernel_module", "kernels[0] is null"});
}

BOOST_AUTO_TEST_CASE(calls_without_a_current_context_are_cuda_errors_naming_the_call) {
  checksum_job job(4);
  stream s = stream::create();
  // Boost's checks are not for other threads: the errors come back here.
  std::vector<std::optional<std::string>> messages;
  std::vector<CUresult> statuses;
  std::thread([&] {
    auto attempt = [&](auto&& call) {
      try {
        call();
        messages.emplace_back();
      } catch (const cuda_error& error) {
        messages.emplace_back(error.what());
        statuses.push_back(error.status());
      }
    };
    attempt([&] { transform_module().launch(0, one_block, job.params, s); });
    attempt([&] { transform_module().function(0); });
    attempt([&] { transform_module().resident_threads(); });
    attempt([&] { transform_module().unload_current(); });
  }).join();
  BOOST_REQUIRE_EQUAL(messages.size(), 4u);
  for (const std::optional<std::string>& message : messages) {
    BOOST_REQUIRE_MESSAGE(message.has_value(), "expected a cuda_error");
    BOOST_CHECK_MESSAGE(message->find("cuCtxGetCurrent") != std::string::npos, *message);
  }
  for (CUresult status : statuses) BOOST_CHECK_EQUAL(status, CUDA_ERROR_INVALID_CONTEXT);
  BOOST_CHECK_EQUAL(transform_module().unload_current_nothrow(), CUDA_SUCCESS);
  std::thread([&] { statuses.push_back(transform_module().unload_current_nothrow()); }).join();
  BOOST_CHECK_EQUAL(statuses.back(), CUDA_ERROR_INVALID_CONTEXT);
}

BOOST_AUTO_TEST_CASE(a_launch_on_a_stream_of_another_context_is_a_cuda_error_naming_cuLaunchKernel) {
  checksum_job job(4);
  context other = context::create(device::get(0));
  std::optional<stream> foreign;
  {
    context_guard current(other);
    foreign = stream::create();
  }
  expect_error<cuda_error>([&] { transform_module().launch(0, one_block, job.params, *foreign); },
                           {"cuLaunchKernel", "kernel ferry_transform_checksum"});
  context_guard current(other);
  foreign.reset();
}

BOOST_AUTO_TEST_CASE(each_context_loads_the_module_once_and_unload_current_releases_it) {
  const std::size_t modules = modules_loaded();
  const CUfunction first = transform_module().function(0);
  BOOST_CHECK(transform_module().function(0) == first);
  if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  {
    context other = context::create(device::get(0));
    context_guard current(other);
    const CUfunction second = transform_module().function(0);
    BOOST_CHECK(second != first);
    BOOST_CHECK(transform_module().function(0) == second);
    if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 2);
    transform_module().unload_current();
    if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  }
  transform_module().unload_current();
  if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules);
  transform_module().unload_current();  // nothing loaded: nothing to do
  transform_module().function(0);       // and the next use loads it again
  if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
}

BOOST_AUTO_TEST_CASE(threads_racing_on_a_contexts_first_use_load_one_module) {
  constexpr std::size_t threads = 8;
  const std::size_t modules = modules_loaded();
  std::vector<CUfunction> functions(threads, nullptr);
  std::atomic<std::size_t> waiting{threads};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      context_guard current(primary);
      waiting.fetch_sub(1);
      while (waiting.load() != 0) std::this_thread::yield();
      functions[t] = transform_module().function(0);
    });
  }
  for (std::thread& w : workers) w.join();
  for (CUfunction f : functions) BOOST_CHECK(f != nullptr && f == functions[0]);
  if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
}

BOOST_AUTO_TEST_SUITE_END()
