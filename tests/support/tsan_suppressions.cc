// What ThreadSanitizer must not report in ferry's test binaries (it reads this function at start-up when
// the binary is built with -fsanitize=thread; elsewhere nothing calls it).
//
// Boost.Asio's reference counts (detail::ref_count_down, behind any_io_executor's shared targets such as
// a strand) drop a reference with a release decrement and, on the last one, an acquire fence before the
// delete. TSan does not model std::atomic_thread_fence (GCC says so: -Wtsan, see .bazelrc), so when the
// last two references go on two threads, it reports the delete as racing with the other thread's
// decrement. The engine meets it when an op held by the completion bridge is released there after its
// handler ran on a strand (tests/stress, rarely).
extern "C" const char* __tsan_default_suppressions() {
  return "race:boost::asio::detail::ref_count_down\n";
}
