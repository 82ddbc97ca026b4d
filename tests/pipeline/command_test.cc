// The pipeline_server command (examples/pipeline_server/command.hpp) in a child process: it prints where
// it listens, serves, and on SIGTERM with a request in flight finishes that request, then exits 0; flags
// it cannot run with end it with a message naming the flag and the value; under a low open-files limit
// it says that it lowered its default connection limit, and refuses a --max-connections over it.
// The child is forked before this process touches the driver (no fixture here), so that the child owns
// its own CUDA state, as the real command does.
#include "examples/pipeline_server/command.hpp"

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/pipeline/client.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry::testing;
using ferry::pipeline::operation;

namespace {

// The child's next line, e.g. "pipeline_server on the sim backend: listening on 127.0.0.1:41234, ...".
std::string next_line(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

// Forks, the child's `stream` (STDOUT_FILENO, STDERR_FILENO) going into a pipe whose read end this
// process gets in `from_child`. Returns what fork() returns.
pid_t fork_into_pipe(int stream, int& from_child) {
  int ends[2];
  BOOST_REQUIRE_EQUAL(pipe(ends), 0);
  std::cout.flush();  // or the child would write the test runner's buffered output too
  std::fflush(nullptr);
  const pid_t child = fork();
  BOOST_REQUIRE_GE(child, 0);
  if (child == 0) {
    close(ends[0]);
    dup2(ends[1], stream);
    return 0;
  }
  close(ends[1]);
  from_child = ends[0];
  return child;
}

// Everything the child writes until it closes its end; then this end is closed.
std::string read_to_end(int fd) {
  std::string text;
  char c;
  while (read(fd, &c, 1) == 1) text += c;
  close(fd);
  return text;
}

struct finished_child {
  int exit_status = -1;
  std::string errors;  // what it wrote to stderr
};

// Lowers the soft open-files limit of this process (a child's, before it runs the command).
void lower_open_files_limit(rlim_t soft) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = soft;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// pipeline_server (the command linked with the sim: :pipeline_server_on_sim, beside this test) with
// `flags` (and the soft open-files limit `open_files`, unless 0), its stderr brought back here, until it
// exits. A program of its own, as a user runs it: a
// refused flag ends it through exit(), which a forked copy of this test could not run cleanly.
finished_child run_server_with(const std::vector<std::string>& flags, rlim_t open_files = 0) {
  const std::string program = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "pipeline_server_on_sim";
  int errors = -1;
  const pid_t child = fork_into_pipe(STDERR_FILENO, errors);
  if (child == 0) {
    std::vector<std::string> words = {program};
    words.insert(words.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    setenv("FERRY_BACKEND", "sim", 1);
    if (open_files != 0) {
      lower_open_files_limit(open_files);
      alarm(60);  // a server that starts instead of refusing ends here, failing the test rather than hanging it
    }
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  finished_child done;
  done.errors = read_to_end(errors);
  int status = 0;
  BOOST_REQUIRE_EQUAL(waitpid(child, &status, 0), child);
  if (WIFEXITED(status)) done.exit_status = WEXITSTATUS(status);
  return done;
}

boost::asio::ip::tcp::endpoint loopback(const std::string& port) {
  return {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::stoi(port))};
}

// The command (`pipeline_server --io-threads 2`) in a child process whose standard output is `out`;
// `open_files`, when not 0, is the child's open-files limit. Returns the child's pid.
pid_t start_command_in_child(int& out, rlim_t open_files = 0) {
  const pid_t child = fork_into_pipe(STDOUT_FILENO, out);
  if (child != 0) return child;
  if (open_files != 0) lower_open_files_limit(open_files);
  char name[] = "pipeline_server";
  char flag[] = "--io-threads";
  char value[] = "2";
  char* argv[] = {name, flag, value, nullptr};
  int status = 1;
  try {
    status = ferry::pipeline::run_command(3, argv, std::cout);
  } catch (const std::exception& error) {
    std::cerr << "pipeline_server: " << error.what() << "\n";
  }
  std::cout.flush();
  _exit(status);
}

}  // namespace

BOOST_AUTO_TEST_CASE(sigterm_finishes_the_request_in_flight_and_exits_0) {
  int out = -1;
  const pid_t child = start_command_in_child(out);
  const std::string line = next_line(out);
  std::smatch ports;
  BOOST_REQUIRE_MESSAGE(std::regex_search(line, ports, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+), metrics on "
                                                                  "http://127\\.0\\.0\\.1:([0-9]+)/metrics")),
                        line);
  const boost::asio::ip::tcp::endpoint server = loopback(ports[1]);
  const boost::asio::ip::tcp::endpoint metrics = loopback(ports[2]);
  client c(server);
  const auto first = random_vector<std::uint8_t>(50000, 1);
  c.send_request(operation::transform, first);
  const reply served = c.read_reply();
  BOOST_CHECK(served.header.status == ferry::pipeline::status::ok);
  BOOST_CHECK(same_bytes(served.body, expected_for(operation::transform, first).body));

  const auto in_flight = random_vector<std::uint8_t>(1 << 20, 2);
  c.send_request(operation::transform, in_flight);
  // The signal once the server has the request (its buffers leased), or has even answered it already.
  for (;;) {
    const std::string text = http_get(metrics, "/metrics");
    if (text.find("state=\"leased\"} 1048576") != std::string::npos ||
        text.find("operation=\"transform\",status=\"ok\"} 2") != std::string::npos) {
      break;
    }
  }
  BOOST_REQUIRE_EQUAL(kill(child, SIGTERM), 0);
  const reply late = c.read_reply();  // answered although the signal may have come first
  BOOST_CHECK_MESSAGE(late.header.status == ferry::pipeline::status::ok,
                      "status " << ferry::pipeline::to_string(late.header.status) << ": " << late.text());
  const expected_reply expected = expected_for(operation::transform, in_flight);
  BOOST_CHECK(same_bytes(late.body, expected.body));
  BOOST_CHECK_EQUAL(late.header.checksum, expected.checksum);
  BOOST_CHECK(c.closed_by_server());

  int status = 0;
  BOOST_REQUIRE_EQUAL(waitpid(child, &status, 0), child);
  BOOST_CHECK(WIFEXITED(status));
  BOOST_CHECK_EQUAL(WEXITSTATUS(status), 0);
  const std::string rest = read_to_end(out);
  BOOST_CHECK_MESSAGE(rest.find("pipeline_server: signal 15, shutting down") != std::string::npos, rest);
  BOOST_CHECK_MESSAGE(rest.find("pipeline_server: stopped") != std::string::npos, rest);
}

BOOST_AUTO_TEST_CASE(stage_flags_it_cannot_run_with_are_named_with_their_values) {
  struct refusal {
    std::vector<std::string> flags;
    int exit_status;
    std::vector<std::string> named;
  };
  const refusal refusals[] = {
      {{"--next-stage", "localhost"}, 2, {"--next-stage", "localhost", "HOST:PORT"}},
      {{"--next-stage", "127.0.0.1:http"}, 2, {"--next-stage", "127.0.0.1:http", "port"}},
      {{"--stage-slots", "0"}, 2, {"--stage-slots 0"}},
      {{"--large-payload", "0"}, 2, {"--large-payload 0", "--large-payloads-at-once 0"}},
      {{"--stage-memory", "disk"}, 2, {"--stage-memory", "disk", "device or host"}},
      // Well formed, but nothing listens there: the server's start fails, as main() reports it.
      {{"--next-stage", "127.0.0.1:1"}, 1, {"--next-stage 127.0.0.1:1", "cannot be reached"}},
  };
  for (const refusal& r : refusals) {
    const finished_child done = run_server_with(r.flags);
    BOOST_CHECK_MESSAGE(done.exit_status == r.exit_status,
                        r.flags[0] << " " << r.flags[1] << ": exit status " << done.exit_status << ", " << done.errors);
    for (const std::string& part : r.named) {
      BOOST_CHECK_MESSAGE(done.errors.find(part) != std::string::npos,
                          r.flags[0] << " " << r.flags[1] << ": \"" << part << "\" not in: " << done.errors);
    }
  }
}

BOOST_AUTO_TEST_CASE(under_a_low_open_files_limit_the_default_max_connections_is_lowered_and_said_and_a_value_over_it_refused) {
  const finished_child refused = run_server_with({"--max-connections", "1000"}, 256);
  BOOST_CHECK_EQUAL(refused.exit_status, 1);
  for (const char* part : {"max_connections (--max-connections) 1000", "open-files limit 256", "ulimit -n"}) {
    BOOST_CHECK_MESSAGE(refused.errors.find(part) != std::string::npos, "\"" << part << "\" not in: " << refused.errors);
  }

  int out = -1;
  const pid_t child = start_command_in_child(out, 256);
  const std::string listening = next_line(out);
  BOOST_CHECK_MESSAGE(listening.find("listening on 127.0.0.1:") != std::string::npos, listening);
  pollfd said{out, POLLIN, 0};  // a command that says nothing more must not hold the test until it exits
  const std::string notice = poll(&said, 1, 20000) > 0 ? next_line(out) : std::string("(nothing within 20 s)");
  BOOST_CHECK_MESSAGE(std::regex_search(notice, std::regex("^pipeline_server: max_connections \\(--max-connections\\) "
                                                           "lowered from its default 1024 to [0-9]+ to fit under the "
                                                           "open-files limit 256: .*ulimit -n")),
                      notice);
  BOOST_REQUIRE_EQUAL(kill(child, SIGTERM), 0);
  int status = 0;
  BOOST_REQUIRE_EQUAL(waitpid(child, &status, 0), child);
  BOOST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(out);
}
