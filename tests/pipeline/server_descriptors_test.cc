// The pipeline server and the process's file descriptors: out of descriptors, its accept loops wait
// instead of spinning, a client that arrives is told `busy` (or 503 on the metrics port) through the
// spare descriptor, the failures are counted, and service resumes once descriptors are free again; the
// metrics port answers a bounded number of connections; max_connections fits under the open-files
// limit. A binary of its own: it lowers RLIMIT_NOFILE and uses up the descriptors of its whole process.
#include "examples/pipeline_server/server.hpp"

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/pipeline/client.hpp"
#include "tests/pipeline/server_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using namespace ferry::testing;
using pipeline::accept_failure;
using pipeline::accept_port;
using pipeline::operation;
using pipeline::status;
using std::chrono::milliseconds;

namespace {

// How long a test waits for what must happen: far beyond any back-off, for a slow sanitized run.
constexpr milliseconds patience = std::chrono::seconds(20);
// The soft open-files limit of these tests: room for the server and the test, few enough to use up.
constexpr rlim_t open_files = 256;

// The soft RLIMIT_NOFILE lowered for a test, restored after it.
class lowered_open_files_limit {
 public:
  explicit lowered_open_files_limit(rlim_t soft) {
    BOOST_REQUIRE_EQUAL(getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    BOOST_REQUIRE_EQUAL(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  }
  lowered_open_files_limit(const lowered_open_files_limit&) = delete;
  lowered_open_files_limit& operator=(const lowered_open_files_limit&) = delete;
  ~lowered_open_files_limit() { setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

// Every descriptor the process may still open, taken (copies of /dev/null) until freed.
class descriptor_hog {
 public:
  descriptor_hog() {
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    BOOST_REQUIRE_GE(null, 0);
    held_.push_back(null);
    for (;;) {
      const int copy = fcntl(null, F_DUPFD_CLOEXEC, 0);
      if (copy >= 0) {
        held_.push_back(copy);
        continue;
      }
      const int why = errno;
      BOOST_REQUIRE_EQUAL(why, EMFILE);
      break;
    }
  }
  descriptor_hog(const descriptor_hog&) = delete;
  descriptor_hog& operator=(const descriptor_hog&) = delete;
  ~descriptor_hog() { free(held_.size()); }

  // Gives `count` of them back to the process.
  void free(std::size_t count) {
    for (; count > 0 && !held_.empty(); --count) {
      close(held_.back());
      held_.pop_back();
    }
  }

 private:
  std::vector<int> held_;
};

// A client connection of exactly one descriptor (client's io_context would need more), for a process
// that has just that one free.
class one_descriptor_client {
 public:
  // Its socket, not yet connected: a connection the server can accept takes the next free descriptor.
  // `hog`, where given, frees a descriptor for the socket, and one more each time another thread of the
  // process took the one freed first (the server taking its spare descriptor back, the CUDA driver's own
  // threads), so that the process is out of descriptors again once the socket is made.
  explicit one_descriptor_client(descriptor_hog* hog = nullptr) {
    for (int freed = 1;; ++freed) {
      if (hog != nullptr) hog->free(1);
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd_ >= 0 || hog == nullptr || errno != EMFILE || freed == 16) break;
    }
    BOOST_REQUIRE_MESSAGE(fd_ >= 0, "no descriptor for the client's socket: " << std::strerror(errno));
  }
  explicit one_descriptor_client(const boost::asio::ip::tcp::endpoint& server) : one_descriptor_client() {
    connect_to(server);
  }
  void connect_to(const boost::asio::ip::tcp::endpoint& server) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(server.port());
    address.sin_addr.s_addr = htonl(server.address().to_v4().to_uint());
    // Completes in the listening socket's backlog, whether or not the server accepts.
    BOOST_REQUIRE_EQUAL(connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  }
  one_descriptor_client(const one_descriptor_client&) = delete;
  one_descriptor_client& operator=(const one_descriptor_client&) = delete;
  ~one_descriptor_client() { close_now(); }

  void close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // What the server sends until it closes the connection (closed() then holds), or until `limit` passes.
  std::string read_until_closed(milliseconds limit) {
    std::string text;
    const auto give_up = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(give_up - std::chrono::steady_clock::now());
      pollfd watched{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&watched, 1, static_cast<int>(left.count())) <= 0) return text;
      char chunk[4096];
      const ssize_t read = recv(fd_, chunk, sizeof chunk, 0);
      if (read <= 0) {
        closed_ = read == 0;
        return text;
      }
      text.append(chunk, static_cast<std::size_t>(read));
    }
  }
  bool closed() const noexcept { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

pipeline::server_options descriptor_test_options() {
  pipeline::server_options o = small_server_options();
  o.max_connections = 8;
  o.max_metrics_connections = 2;
  return o;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// The process's CPU time, in seconds, over `span` of sleeping here.
double cpu_seconds_over(std::chrono::milliseconds span) {
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(span);
  return process_cpu_seconds() - before;
}

std::uint64_t descriptor_errors(const pipeline::server& srv, accept_port port) {
  return srv.metrics().accept_errors(port, accept_failure::descriptors);
}

// A client waiting on each port, on the two descriptors the hog frees for them (both sockets made
// before either connects): the accepts that follow fail with EMFILE.
struct waiting_clients {
  waiting_clients(const pipeline::server& srv, descriptor_hog& hog) : requests(&hog), scrapes(&hog) {
    requests.connect_to(srv.endpoint());
    scrapes.connect_to(srv.metrics_endpoint());
  }
  one_descriptor_client requests;
  one_descriptor_client scrapes;
};

// One transform on a connection of its own, every byte of the reply checked.
void check_served(const pipeline::server& srv, std::size_t bytes, std::uint64_t seed) {
  client c(srv.endpoint());
  const auto payload = random_vector<std::uint8_t>(bytes, seed);
  c.send_request(operation::transform, payload);
  BOOST_REQUIRE_MESSAGE(c.readable_within(patience), "no reply within " << patience.count() << " ms");
  check_reply(c.read_reply(), operation::transform, payload);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipeline_server_descriptors, server_fixture)

BOOST_AUTO_TEST_CASE(out_of_descriptors_the_accept_loops_wait_instead_of_spinning) {
  lowered_open_files_limit limit(open_files);
  start(descriptor_test_options());
  {
    descriptor_hog hog;
    waiting_clients waiting(*srv, hog);
    // Every thread of the process together, the server's io threads among them: a loop that retried at
    // once would keep one core busy.
    const double cpu = cpu_seconds_over(std::chrono::seconds(1));
    BOOST_CHECK_MESSAGE(cpu < 0.3, "the process used " << cpu << " s of CPU in 1 s, out of descriptors");
    BOOST_CHECK_GT(descriptor_errors(*srv, accept_port::requests), 0u);
    BOOST_CHECK_GT(descriptor_errors(*srv, accept_port::metrics), 0u);
  }
  check_served(*srv, 70000, 1);
}

BOOST_AUTO_TEST_CASE(out_of_descriptors_a_waiting_client_is_told_busy_through_the_spare_descriptor) {
  lowered_open_files_limit limit(open_files);
  start(descriptor_test_options());
  descriptor_hog hog;
  std::string answer;
  bool closed = false;
  {
    one_descriptor_client c(&hog);  // the server has no descriptor to accept it with
    c.connect_to(srv->endpoint());
    answer = c.read_until_closed(patience);
    closed = c.closed();
  }
  BOOST_CHECK_MESSAGE(closed, "the server did not close the connection");
  BOOST_REQUIRE_GE(answer.size(), pipeline::reply_header_bytes);
  std::array<std::byte, pipeline::reply_header_bytes> head;
  std::memcpy(head.data(), answer.data(), head.size());
  const pipeline::reply_header header = pipeline::decode_reply(head);
  BOOST_CHECK_EQUAL(pipeline::to_string(header.status), pipeline::to_string(status::busy));
  BOOST_CHECK_EQUAL(header.length, answer.size() - pipeline::reply_header_bytes);
  BOOST_CHECK_MESSAGE(answer.find("out of file descriptors") != std::string::npos, answer);
  BOOST_CHECK_EQUAL(srv->metrics().connections_refused(), 1u);

  // The client's descriptor is free again (the server took its spare back): the metrics port answers 503.
  one_descriptor_client scraper(srv->metrics_endpoint());
  const std::string scrape = scraper.read_until_closed(patience);
  BOOST_CHECK_MESSAGE(scrape.find("HTTP/1.1 503 Service Unavailable\r\n") == 0, scrape);
  BOOST_CHECK_MESSAGE(scrape.find("out of file descriptors") != std::string::npos, scrape);
  BOOST_CHECK(scraper.closed());
  BOOST_CHECK_EQUAL(srv->metrics().scrapes_refused(), 1u);
}

BOOST_AUTO_TEST_CASE(once_descriptors_are_free_again_requests_and_scrapes_are_served_and_the_failures_counted) {
  lowered_open_files_limit limit(open_files);
  start(descriptor_test_options());
  {
    descriptor_hog hog;
    waiting_clients waiting(*srv, hog);
    BOOST_REQUIRE(eventually([&] {
      return descriptor_errors(*srv, accept_port::requests) > 0 && descriptor_errors(*srv, accept_port::metrics) > 0;
    }));
  }
  check_served(*srv, 100000, 2);
  check_served(*srv, 3000, 3);
  const std::string text = http_get(srv->metrics_endpoint(), "/metrics");
  BOOST_CHECK_MESSAGE(text.find("HTTP/1.0 200 OK") == 0, text);
  for (const char* port : {"requests", "metrics"}) {
    const std::string series = std::string("pipeline_accept_errors_total{stage=\"ferry\",port=\"") + port +
                               "\",reason=\"descriptors\"} ";
    const std::size_t at = text.find(series);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "the scrape lacks " << series << ":\n" << text);
    BOOST_CHECK_MESSAGE(text.compare(at + series.size(), 2, "0\n") != 0, "no failure counted: " << series);
  }
  BOOST_CHECK(text.find("pipeline_accept_errors_total{stage=\"ferry\",port=\"requests\",reason=\"memory\"} 0\n") !=
              std::string::npos);
}

BOOST_AUTO_TEST_CASE(connections_to_the_metrics_port_over_its_cap_are_answered_503_and_counted) {
  start(descriptor_test_options());  // at most 2 at once
  std::vector<std::unique_ptr<one_descriptor_client>> silent;
  for (int i = 0; i < 2; ++i) silent.push_back(std::make_unique<one_descriptor_client>(srv->metrics_endpoint()));
  BOOST_REQUIRE(eventually([&] { return srv->metrics().scrapes_open() == 2; }));
  for (int i = 0; i < 3; ++i) {
    one_descriptor_client over(srv->metrics_endpoint());
    const std::string answer = over.read_until_closed(std::chrono::seconds(5));
    BOOST_CHECK_MESSAGE(answer.find("HTTP/1.1 503 Service Unavailable\r\n") == 0, answer);
    BOOST_CHECK_MESSAGE(answer.find("maximum of 2 connections") != std::string::npos, answer);
    BOOST_CHECK(over.closed());
  }
  BOOST_CHECK_EQUAL(srv->metrics().scrapes_refused(), 3u);
  BOOST_CHECK_EQUAL(srv->metrics().scrapes_open(), 2);
  BOOST_CHECK(srv->metrics_text().find("pipeline_metrics_connections_refused_total{stage=\"ferry\"} 3\n") !=
              std::string::npos);
  // Room again once one goes; the request port was never affected.
  silent[0]->close_now();
  BOOST_REQUIRE(eventually([&] { return srv->metrics().scrapes_open() == 1; }));
  BOOST_CHECK(http_get(srv->metrics_endpoint(), "/metrics").find("HTTP/1.0 200 OK") == 0);
  check_served(*srv, 5000, 4);
}

BOOST_AUTO_TEST_CASE(a_max_connections_given_over_the_open_files_limit_is_refused_naming_option_value_and_limit) {
  lowered_open_files_limit limit(open_files);
  pipeline::server_options options = descriptor_test_options();
  const std::size_t room = open_files - pipeline::descriptors_beside_connections(options);
  options.max_connections = room + 1;
  expect_error<std::invalid_argument>([&] { start(options); },
                                      {"max_connections (--max-connections) " + std::to_string(room + 1),
                                       "open-files limit 256", "ulimit -n"});
  BOOST_CHECK(!srv);
  options.max_connections = room;  // just fits
  start(options);
  BOOST_CHECK_EQUAL(srv->max_connections(), room);
  BOOST_CHECK(srv->start_notice().empty());
}

BOOST_AUTO_TEST_CASE(the_default_max_connections_is_lowered_to_fit_the_open_files_limit_and_says_so) {
  lowered_open_files_limit limit(open_files);
  pipeline::server_options options = small_server_options();
  BOOST_REQUIRE(!options.max_connections);
  start(options);
  const std::size_t room = open_files - pipeline::descriptors_beside_connections(options);
  BOOST_CHECK_LT(room, pipeline::default_max_connections);
  BOOST_CHECK_EQUAL(srv->max_connections(), room);
  for (const std::string& part : {std::string("lowered from its default 1024 to ") + std::to_string(room),
                                 std::string("open-files limit 256"), std::string("ulimit -n")}) {
    BOOST_CHECK_MESSAGE(srv->start_notice().find(part) != std::string::npos, srv->start_notice());
  }
  check_served(*srv, 4000, 5);
  // Under a limit with room for it, the default stands.
  const pipeline::connection_limit roomy = pipeline::fit_max_connections(options, 1 << 20);
  BOOST_CHECK_EQUAL(roomy.max_connections, pipeline::default_max_connections);
  BOOST_CHECK(roomy.notice.empty());
  expect_error<std::invalid_argument>([&] { (void)pipeline::fit_max_connections(options, 40); },
                                      {"open-files limit 40", "no room for connections", "ulimit -n"});
}

BOOST_AUTO_TEST_SUITE_END()
