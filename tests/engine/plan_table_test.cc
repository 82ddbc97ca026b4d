// The planner's decision table (engine/async/planner.hpp): how each kind of transfer runs, given what the
// engine has free, and what it falls back to when an executor is refused. A pure function: the rows
// below are its policy, and the sweep after them checks the rules every decision keeps over every
// combination of facts.
#include "engine/async/planner.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <string>
#include <vector>

using namespace ferry;
using namespace ferry::detail;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

const plan_limits limits{
    .small_staged_max_bytes = 64 * KiB,
    .driver_staged_max_bytes = 1 * MiB,
    .registration_threshold_bytes = 32 * MiB,
    .batch_max_bytes = 64 * KiB,
    .resident_max_bytes = 64 * KiB,
};

// A pinned poke of `bytes` given no stream, on an idle engine with a batcher and no resident copier.
plan_facts pinned_poke(std::size_t bytes) {
  plan_facts facts;
  facts.bytes = bytes;
  facts.plain_copy = true;
  facts.pinned_host_and_device = true;
  facts.kernels_reach = true;
  facts.batcher = true;
  return facts;
}

// A poke from pageable memory the driver does not know as page-locked.
plan_facts pageable_poke(std::size_t bytes) {
  plan_facts facts;
  facts.bytes = bytes;
  facts.pageable = true;
  facts.from_pageable = true;
  facts.plain_copy = true;
  facts.kernels_reach = true;
  facts.batcher = true;
  return facts;
}

plan_facts pageable_peek(std::size_t bytes) {
  plan_facts facts = pageable_poke(bytes);
  facts.from_pageable = false;
  return facts;
}

template <class Change>
plan_facts with(plan_facts facts, Change change) {
  change(facts);
  return facts;
}

struct row {
  std::string what;
  plan_facts facts;
  plan_decision expected;
};

plan_decision made(transfer_plan plan, route way, bool counted = false, bool remembered = false) {
  return plan_decision{plan, way, counted, remembered};
}

std::vector<row> table() {
  using enum transfer_plan;
  return {
      {"pinned 4 KiB, idle engine", pinned_poke(4 * KiB), made(pinned, route::at_once, true)},
      {"pinned 4 KiB, another small copy in flight",
       with(pinned_poke(4 * KiB), [](auto& f) { f.small_copies_in_flight = true; }), made(batched, route::batched, true)},
      {"pinned 4 KiB, the batcher refused it",
       with(pinned_poke(4 * KiB), [](auto& f) { f.small_copies_in_flight = f.batcher_refused = true; }),
       made(pinned, route::queued, true)},
      {"pinned 4 KiB, no batcher", with(pinned_poke(4 * KiB), [](auto& f) { f.batcher = false; }),
       made(pinned, route::at_once)},
      {"pinned 4 KiB, resident copier on", with(pinned_poke(4 * KiB), [](auto& f) { f.resident = true; }),
       made(resident, route::resident, true)},
      {"pinned 4 KiB, resident ring full",
       with(pinned_poke(4 * KiB), [](auto& f) { f.resident = f.resident_refused = true; }),
       made(pinned, route::at_once, true)},
      {"pinned 4 KiB, resident copier on, forced pinned",
       with(pinned_poke(4 * KiB), [](auto& f) { f.resident = true, f.forced = pinned; }),
       made(pinned, route::at_once, true)},
      {"pinned 4 KiB, resident copier on, another device's memory",
       with(pinned_poke(4 * KiB), [](auto& f) { f.resident = true, f.kernels_reach = false; }),
       made(pinned, route::at_once, true)},
      {"pinned 1 MiB", pinned_poke(1 * MiB), made(pinned, route::at_once)},
      {"pinned 4 KiB on a stream", with(pinned_poke(4 * KiB), [](auto& f) { f.on_stream = true; }),
       made(pinned, route::at_once)},
      {"pinned 4 KiB on a busy stream",
       with(pinned_poke(4 * KiB), [](auto& f) { f.on_stream = f.stream_busy = true; }), made(pinned, route::queued)},
      {"pinned, no bytes", pinned_poke(0), made(pinned, route::queued)},
      {"pinned 4 KiB, context failed", with(pinned_poke(4 * KiB), [](auto& f) { f.healthy = false; }),
       made(pinned, route::queued)},
      {"a fill (not a plain copy)", with(pinned_poke(4 * KiB), [](auto& f) { f.plain_copy = false; }),
       made(pinned, route::at_once)},
      {"pageable 4 KiB poke", pageable_poke(4 * KiB), made(staged, route::at_once_small_staged)},
      {"pageable 4 KiB peek", pageable_peek(4 * KiB), made(staged, route::at_once_small_staged)},
      {"pageable 4 KiB poke, no staging slot free",
       with(pageable_poke(4 * KiB), [](auto& f) { f.no_small_slot = true; }), made(driver_staged, route::at_once)},
      {"pageable 4 KiB peek, no staging slot free",
       with(pageable_peek(4 * KiB), [](auto& f) { f.no_small_slot = true; }), made(staged, route::staged, false, true)},
      {"pageable 4 KiB the driver knows page-locked",
       with(pageable_poke(4 * KiB), [](auto& f) { f.known_page_locked = true; }), made(pinned, route::at_once)},
      {"pageable 512 KiB poke", pageable_poke(512 * KiB), made(driver_staged, route::at_once)},
      {"pageable 512 KiB peek", pageable_peek(512 * KiB), made(staged, route::staged, false, true)},
      {"pageable 8 MiB poke", pageable_poke(8 * MiB), made(staged, route::staged, false, true)},
      {"pageable 64 MiB poke, seen before", with(pageable_poke(64 * MiB), [](auto& f) { f.worth_registering = true; }),
       made(registered, route::registered)},
      {"pageable 64 MiB, a vector the op owns",
       with(pageable_poke(64 * MiB), [](auto& f) { f.worth_registering = true, f.registrable = false; }),
       made(staged, route::staged)},
      {"pageable 64 MiB the driver knows page-locked",
       with(pageable_poke(64 * MiB), [](auto& f) { f.known_page_locked = true; }), made(pinned, route::queued)},
      {"pageable 4 KiB forced staged", with(pageable_poke(4 * KiB), [](auto& f) { f.forced = staged; }),
       made(staged, route::staged)},
      {"pageable 4 KiB forced registered", with(pageable_poke(4 * KiB), [](auto& f) { f.forced = registered; }),
       made(registered, route::registered)},
      {"pageable 8 MiB forced driver_staged", with(pageable_poke(8 * MiB), [](auto& f) { f.forced = driver_staged; }),
       made(driver_staged, route::at_once)},
      {"pageable 4 KiB forced pinned, small copies in flight",
       with(pageable_poke(4 * KiB), [](auto& f) { f.forced = pinned, f.small_copies_in_flight = true; }),
       made(pinned, route::queued)},
      {"pageable 4 KiB poke on a busy stream",
       with(pageable_poke(4 * KiB), [](auto& f) { f.on_stream = f.stream_busy = true; }),
       made(driver_staged, route::queued)},
      {"pageable 2-D poke of 4 KiB", with(pageable_poke(4 * KiB), [](auto& f) { f.plain_copy = false; }),
       made(driver_staged, route::at_once)},
      {"pageable, no bytes", pageable_poke(0), made(staged, route::staged, false, true)},
  };
}

}  // namespace

// With --log_level=message the table is printed, a row a line: "what -> plan via route".
BOOST_AUTO_TEST_CASE(each_row_of_the_table_is_decided_as_written) {
  for (const row& r : table()) {
    const plan_decision got = decide(r.facts, limits);
    BOOST_TEST_MESSAGE(r.what << " -> " << describe(got));
    BOOST_TEST_INFO(r.what);
    BOOST_TEST(describe(got) == describe(r.expected));
  }
}

namespace {

// The first rule that `d`, decided from `f` (with `plan` forced), breaks; empty when it keeps them all.
std::string broken_rule(const plan_facts& f, const plan_decision& d) {
  const bool at_once = runs_at_once(d.route);
  // Work goes on its stream before the op is made only where nothing stands in its way.
  if (at_once && !(f.bytes > 0 && f.healthy && !f.stream_busy && !f.batcher_refused)) return "at once while refused";
  // A caller's stream keeps its order: never batched, never on the resident copier's stream.
  if (f.on_stream && (d.route == route::batched || d.route == route::resident)) return "a stream's copy left its order";
  // Pageable memory is never read by the GPU's kernels nor counted among small copies.
  if (f.pageable && (d.route == route::batched || d.route == route::resident || d.counted)) return "pageable to a kernel";
  if (!f.pageable && (d.route == route::staged || d.route == route::registered ||
                      d.route == route::at_once_small_staged)) {
    return "page-locked memory staged or registered";
  }
  if ((f.resident_refused || !f.resident) && d.route == route::resident) return "resident without the copier";
  if (f.no_small_slot && d.route == route::at_once_small_staged) return "a small slot that was not free";
  if ((f.batcher_refused || !f.batcher) && d.route == route::batched) return "batched without the batcher";
  if (d.route == route::batched && !d.counted) return "a batched copy not counted";
  // A plan the caller forced on pageable memory stands.
  if (f.pageable && f.forced != transfer_plan::automatic && d.plan != f.forced) return "a forced plan overruled";
  // Registered only when the cache says so or the caller forced it, never for a vector the op owns.
  if (d.plan == transfer_plan::registered &&
      (!f.registrable || !(f.worth_registering || f.forced == transfer_plan::registered))) {
    return "registered unasked";
  }
  // Only pokes go through the driver's staging (its pageable peek blocks the calling thread).
  if (d.plan == transfer_plan::driver_staged && !f.from_pageable) return "a peek through the driver's staging";
  if (d.remembered && !(d.route == route::staged && f.registrable && f.forced == transfer_plan::automatic)) {
    return "remembered out of turn";
  }
  return {};
}

}  // namespace

// Every combination of the boolean facts, at sizes on each side of every limit, and every plan a caller
// may force (those force_plan accepts): the rules the executors rely on.
BOOST_AUTO_TEST_CASE(every_decision_keeps_the_rules_the_executors_rely_on) {
  const std::size_t sizes[] = {0, 1, 64 * KiB, 64 * KiB + 1, 1 * MiB, 1 * MiB + 1, 32 * MiB, 64 * MiB};
  const transfer_plan forced[] = {transfer_plan::automatic, transfer_plan::pinned, transfer_plan::registered,
                                  transfer_plan::staged, transfer_plan::driver_staged};
  constexpr int flags = 17;
  std::size_t checked = 0, broken = 0;
  for (unsigned bits = 0; bits < (1u << flags); ++bits) {
    auto bit = [bits](int i) { return ((bits >> i) & 1u) != 0; };
    plan_facts f;
    f.pageable = bit(0);
    f.from_pageable = f.pageable && bit(1);
    f.plain_copy = bit(2);
    f.pinned_host_and_device = !f.pageable && bit(3);
    f.kernels_reach = bit(4);
    f.registrable = bit(5);
    f.known_page_locked = f.pageable && bit(6);
    f.worth_registering = f.pageable && bit(7);
    f.on_stream = bit(8);
    f.healthy = bit(9);
    f.batcher = bit(10);
    f.small_copies_in_flight = bit(11);
    f.resident = bit(12);
    f.stream_busy = f.on_stream && bit(13);
    f.no_small_slot = bit(14);
    f.batcher_refused = bit(15);
    f.resident_refused = bit(16);
    for (std::size_t bytes : sizes) {
      for (transfer_plan plan : forced) {
        if (plan != transfer_plan::automatic && plan != transfer_plan::pinned && !f.pageable) continue;
        if (plan == transfer_plan::registered && !f.registrable) continue;
        if (plan == transfer_plan::driver_staged && !f.from_pageable) continue;
        f.bytes = bytes;
        f.forced = plan;
        const plan_decision d = decide(f, limits);
        ++checked;
        if (const std::string why = broken_rule(f, d); !why.empty() && ++broken <= 10) {
          BOOST_ERROR(why << ": facts " << bits << ", " << bytes << " bytes, forced " << ferry::to_string(plan)
                          << " -> " << describe(d));
        }
      }
    }
  }
  BOOST_TEST(broken == 0u);
  BOOST_TEST(checked > 1'000'000u);
}
