#!/usr/bin/env python3
"""Merges benchmark results, and generates the figure tables that the docs embed.

usage:
  bench/report.py DIR MACHINE
      Joins DIR/<MACHINE>-<suite>.json (written by each benchmark binary) into DIR/<MACHINE>.json,
      DIR/<MACHINE>.md (every figure) and DIR/<MACHINE>.png (bandwidth against transfer size for the
      sweep entries named <direction>_<memory>_<size>, e.g. h2d_pinned_4KiB: ferry solid, the raw
      driver dashed; needs matplotlib, skipped without it).

  bench/report.py --markdown-tables [--results DIR] [--check] [FILE ...]
      Regenerates every table between a line "<!-- figures:begin NAME -->" and the next line
      "<!-- figures:end -->" in each FILE (default: README.md and docs/performance.md), from the
      JSON files under DIR (default: bench/results). NAME is one of: headline, targets, sweep,
      fast-paths, engine, blocks, kernel-path, marshal, pipeline, stage-to-stage, remote, soak (from
      h200*.json) and peer (h200x2.json); TABLES
      below says what each holds. With --check nothing is written; the exit status is 1 when a FILE
      is out of date.

Figures measured on the sim backend are labelled as such wherever they are written.
"""
import glob
import json
import os
import re
import sys

SWEEP = re.compile(r"^(h2d|d2h)_(pinned|pageable)_(\d+)(KiB|MiB|GiB)$")
UNIT = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIM_LABEL = "simulated driver: these figures describe the host simulation, not a GPU"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ["README.md", os.path.join("docs", "performance.md")]
BEGIN = re.compile(r"^<!-- figures:begin ([a-z0-9-]+) -->\s*$")
END = "<!-- figures:end -->"

# The headline: (benchmark, what it is, target). A target is (test, threshold, wording); the test reads
# the ratio ("ratio>=") or ferry's own figure ("ferry<").
HEADLINE = [
    ("h2d_pinned_256MiB", "host to device, page-locked, 256 MiB", ("ratio>=", 0.97, ">= 0.97")),
    ("d2h_pinned_256MiB", "device to host, page-locked, 256 MiB", ("ratio>=", 0.97, ">= 0.97")),
    ("bidir_pinned_256MiB", "both directions at once, page-locked, 256 MiB", ("ratio>=", 0.95, ">= 0.95")),
    ("h2d_pageable_256MiB", "host to device, pageable, 256 MiB (plan staged)", ("ratio>=", 3.5, ">= 3.5")),
    ("d2h_pageable_256MiB", "device to host, pageable, 256 MiB (plan staged)", ("ratio>=", 2.0, ">= 2.0")),
    ("h2d_pageable_reused_256MiB", "host to device, pageable buffer reused (plan registered)",
     ("ratio>=", 6.0, ">= 6")),
    ("d2d_4GiB", "device to device, 4 GiB", ("ratio>=", 0.97, ">= 0.97")),
    ("memset32_4GiB", "memset of 4-byte elements, 4 GiB", ("ratio>=", 0.95, ">= 0.95")),
    ("fill64_4GiB", "memset of 8-byte elements (fill kernel), 4 GiB", ("ratio>=", 0.95, ">= 0.95")),
    ("copy2d_pitched", "2-D copy between pitched arrays", ("ratio>=", 0.97, ">= 0.97")),
    ("managed_prefetch_256MiB", "managed memory prefetch, 256 MiB", ("ratio>=", 0.97, ">= 0.97")),
    ("many_small_4KiB", "1024 concurrent 4 KiB pokes", ("ratio>=", 3.0, ">= 3")),
    ("roundtrip_4KiB_p50", "4 KiB poke round trip, co_await, median", ("ratio>=", 1 / 1.3, "within 1.3x of raw")),
    ("roundtrip_4KiB_p99", "4 KiB poke round trip, co_await, 99th percentile", None),
    ("submit_4KiB", "initiating one 4 KiB poke (callback)", None),
    ("poller_idle_cpu_poll", "completion poller's CPU over an idle second", ("ferry<", 2.0, "< 2 %")),
    ("pipeline_mixed_throughput", "pipeline server, mixed sizes, against a thread-pool server",
     ("ratio>=", 1.4, ">= 1.4")),
    ("pipeline_mixed_latency_p99", "pipeline server, request latency, 99th percentile",
     ("ratio>=", 1.0, "no worse than the baseline")),
    ("pipeline_mixed_latency_p999", "pipeline server, request latency, 99.9th percentile",
     ("ratio>=", 1.0, "no worse than the baseline")),
]

ENGINE_LABELS = {
    "roundtrip_4KiB_p50": "round trip, io thread kept awake (poll), median",
    "roundtrip_4KiB_p99": "round trip, io thread kept awake (poll), 99th percentile",
    "roundtrip_4KiB_parked_io_p50": "round trip, io thread left to park (executor_spin = 0), median",
    "roundtrip_4KiB_parked_io_p99": "round trip, io thread left to park, 99th percentile",
    "roundtrip_4KiB_marks_by_poller_p50": "round trip, the poller writing the completion flag, median",
    "roundtrip_4KiB_marks_by_poller_p99": "round trip, the poller writing the completion flag, 99th percentile",
    "roundtrip_4KiB_host_callback_p50": "round trip, host_callback policy, median",
    "roundtrip_4KiB_host_callback_p99": "round trip, host_callback policy, 99th percentile",
    "roundtrip_4KiB_blocking_sync_p50": "round trip, blocking_sync policy, median",
    "roundtrip_4KiB_blocking_sync_p99": "round trip, blocking_sync policy, 99th percentile",
    "roundtrip_4KiB_resident_p50": "round trip, given no stream, resident copier on, median",
    "roundtrip_4KiB_resident_p99": "round trip, given no stream, resident copier on, 99th percentile",
    "roundtrip_4KiB_use_future_p50": "round trip, a thread waiting on use_future's future, median",
    "roundtrip_4KiB_use_future_p99": "round trip, a thread waiting on use_future's future, 99th percentile",
    "roundtrip_4KiB_every_2ms_p50": "round trip after 2 ms of the caller's own work, median",
    "roundtrip_4KiB_every_2ms_p99": "round trip after 2 ms of the caller's own work, 99th percentile",
    "poller_cpu_every_2ms": "poller CPU meanwhile",
    "roundtrip_4KiB_every_2ms_fixed_spin_p50": "the same, the poller's spin fixed at 1 ms (max_spin_window), median",
    "roundtrip_4KiB_every_2ms_fixed_spin_p99": "the same, spin fixed at 1 ms, 99th percentile",
    "poller_cpu_every_2ms_fixed_spin": "poller CPU meanwhile, spin fixed at 1 ms",
    "poller_idle_cpu_poll": "poller CPU over an idle second, poll",
    "poller_idle_cpu_host_callback": "poller CPU over an idle second, host_callback",
    "poller_idle_cpu_blocking_sync": "poller CPU over an idle second, blocking_sync",
    "submit_4KiB": "initiating one 4 KiB poke (callback)",
    "submit_4KiB_marks_by_poller": "the same, the poller writing the completion flag",
    "submit_4KiB_rounds_of_128": "the same in rounds of 128 pokes (1024 above), each side",
    "submit_4KiB_resident": "the same given no stream, posted to the resident copier (rounds of 128)",
    "many_small_4KiB": "1024 concurrent 4 KiB pokes from coroutines (batch path automatic)",
    "many_small_4KiB_kernel": "the same, every batch by the gather kernel",
    "many_small_4KiB_copy_engine": "the same, every batch by cuMemcpyBatchAsync",
    "many_small_4KiB_d2h": "1024 concurrent 4 KiB peeks into page-locked memory (automatic)",
}

BLOCKS_LABELS = {
    "many_small_4KiB_pinned_h2d": "1024 page-locked 4 KiB blocks to random device places: one poke_blocks (automatic path) "
                                  "against a cuMemcpyHtoDAsync per block",
    "many_small_4KiB_pinned_h2d_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
    "many_small_4KiB_pinned_d2h_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
    "many_small_64KiB_pinned_h2d_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
    "many_small_64KiB_pinned_d2h_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
    "many_small_4KiB_pageable_h2d": "1024 pageable 4 KiB blocks: one poke_blocks (packed through a staging chunk)",
    "many_small_4KiB_pinned_d2h": "1024 4 KiB blocks into page-locked memory: one peek_blocks",
    "many_small_4KiB_pageable_d2h": "1024 4 KiB blocks into pageable memory: one peek_blocks",
    "many_small_64KiB_pinned_h2d": "1024 page-locked 64 KiB blocks: one poke_blocks",
    "many_small_64KiB_pageable_h2d": "1024 pageable 64 KiB blocks (64 MiB): one poke_blocks, staged chunk by chunk",
    "many_small_64KiB_pinned_d2h": "1024 64 KiB blocks into page-locked memory: one peek_blocks",
    "many_small_64KiB_pageable_d2h": "1024 64 KiB blocks into pageable memory: one peek_blocks, staged chunk by chunk",
    "many_small_64KiB_pageable_h2d_copy_engine": "the same, a cuMemcpyBatchAsync per chunk",
    "many_small_64KiB_pageable_d2h_copy_engine": "the same, a cuMemcpyBatchAsync per chunk",
    "many_small_4KiB_pageable_h2d_staged": "1024 pageable 4 KiB blocks through 1 MiB staging chunks: staged chunk by "
                                           "chunk, a launch per chunk",
    "many_small_4KiB_pageable_h2d_staged_copy_engine": "the same, a cuMemcpyBatchAsync per chunk",
    "many_small_4KiB_pageable_d2h_staged": "1024 4 KiB blocks into pageable memory through 1 MiB staging chunks: "
                                           "a launch per chunk",
    "many_small_4KiB_pageable_d2h_staged_copy_engine": "the same, a cuMemcpyBatchAsync per chunk",
}
for _count, _size in ((8, "8 MiB"), (64, "1 MiB"), (256, "256 KiB")):
    _shape = f"list_{_count}x{_size.replace(' ', '')}_pinned"
    BLOCKS_LABELS.update({
        f"{_shape}_h2d": f"{_count} page-locked {_size} blocks: one poke_blocks (automatic path)",
        f"{_shape}_h2d_kernel": "the same list forced onto the kernel (a block of threads per listed block)",
        f"{_shape}_h2d_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
        f"{_shape}_d2h": f"{_count} blocks of {_size} into page-locked memory: one peek_blocks (automatic path)",
        f"{_shape}_d2h_kernel": "the same list forced onto the kernel",
        f"{_shape}_d2h_copy_engine": "the same list forced onto cuMemcpyBatchAsync",
    })

KERNEL_PATH_LABELS = {
    "kernel_path_compute_slowdown": "an FMA-bound kernel filling every SM, with batches by the gather kernel beside it",
    "copy_engine_path_compute_slowdown": "the same kernel, with batches by cuMemcpyBatchAsync beside it",
}

FAST_PATHS = [
    ("bidir_pinned_256MiB", "both directions at once, page-locked"),
    ("h2d_pageable_reused_256MiB", "pageable buffer reused: registered once, then one DMA"),
    ("staging_threads", "threads the engine runs (poller, batcher, workers, copy threads)"),
    ("staging_cpu_h2d_pageable_256MiB", "CPU seconds per GB, host to device, pageable 256 MiB"),
    ("staging_cpu_d2h_pageable_256MiB", "CPU seconds per GB, device to host, pageable 256 MiB"),
    ("d2d_4GiB", "device to device"),
    ("memset32_4GiB", "memset, 4-byte elements (cuMemsetD32Async)"),
    ("fill64_4GiB", "memset, 8-byte elements (ferry's fill kernel against cuMemsetD32Async)"),
    ("copy2d_pitched", "2-D copy between pitched arrays"),
    ("managed_prefetch_256MiB", "managed memory prefetch"),
]

# The size sweep's one-at-a-time page-locked copies that the resident copier takes, by the copy engine
# (the default) and by the resident copier (engine_options::resident_copies).
RESIDENT_ROWS = [(f"{d}_pinned_{size}{suffix}", f"{what}, {size[:-3]} {size[-3:]}, {how}")
                 for size in ("4KiB", "64KiB")
                 for d, what in (("h2d", "host to device"), ("d2h", "device to host"))
                 for suffix, how in (("", "copy engine (default)"), ("_resident", "resident copier"))]

# The size sweep's small pageable copies: through the engine's small staging slots (the default) and,
# for pokes, through the driver's own staging (an engine with engine_options::small_staged_max_bytes 0).
SMALL_PAGEABLE_ROWS = [(f"{d}_pageable_{size}{suffix}", f"{what}, {size[:-3]} {size[-3:]}, {how}")
                       for size in ("4KiB", "64KiB")
                       for d, what, ways in (("h2d", "host to device", (("", "small slot (default)"),
                                                                         ("_driver_staged", "driver's staging"))),
                                             ("d2h", "device to host", (("", "small slot (default)"),)))
                       for suffix, how in ways]

# The size sweep's page-locked copies of 1 and 4 MiB, whose trials each start after the checks of the run
# before: by the default engine (the poller's spin after activity grows to cover such pauses) and by one
# whose spin stays at 1 ms (max_spin_window = spin_window).
SPIN_GROWTH_ROWS = [(f"{d}_pinned_{size}{suffix}", f"{what}, {size[:-3]} {size[-3:]}, {how}")
                    for size in ("1MiB", "4MiB")
                    for d, what in (("h2d", "host to device"), ("d2h", "device to host"))
                    for suffix, how in (("", "spin grows (default)"), ("_fixed_spin", "spin fixed at 1 ms"))]

# bench/peer_bandwidth's rows: device 0 -> 1 (peer_) or both at once (peer_bidir_), by the path named last.
PEER_PATHS = {"": "automatic path", "_copy_engine": "one copy engine", "_split": "split over copy engines",
              "_kernel": "copy kernel over NVLink"}
PEER_LABELS = {f"peer{way}_256MiB{suffix}": f"{what}, 256 MiB, {path}"
               for way, what in (("", "device 0 to 1"), ("_bidir", "both directions at once"))
               for suffix, path in PEER_PATHS.items()}

# name -> how to build it: source (a results file), kind, and its rows or columns.
TABLES = {
    "headline": {"source": "h200.json", "kind": "rows", "rows": [(n, w) for n, w, _ in HEADLINE]},
    "targets": {"source": "h200.json", "kind": "targets"},
    "sweep": {"source": "h200.json", "kind": "sweep"},
    "fast-paths": {"source": "h200.json", "kind": "rows", "rows": FAST_PATHS},
    "resident": {"source": "h200.json", "kind": "rows", "rows": RESIDENT_ROWS},
    "small-pageable": {"source": "h200.json", "kind": "rows", "rows": SMALL_PAGEABLE_ROWS},
    "spin-growth": {"source": "h200.json", "kind": "rows", "rows": SPIN_GROWTH_ROWS},
    "engine": {"source": "h200-engine.json", "kind": "all", "labels": ENGINE_LABELS},
    "blocks": {"source": "h200-blocks.json", "kind": "all", "labels": BLOCKS_LABELS},
    "kernel-path": {"source": "h200-kernel-path.json", "kind": "all", "labels": KERNEL_PATH_LABELS,
                    "columns": ("with copies beside it", "alone")},
    "marshal": {"source": "h200-marshal.json", "kind": "all"},
    "pipeline": {"source": "h200-pipeline.json", "kind": "all", "columns": ("ferry", "thread-pool baseline")},
    "stage-to-stage": {"source": "h200-stage-to-stage.json", "kind": "all",
                       "columns": ("two stages (forward)", "one server (transform)")},
    "remote": {"source": "h200-remote.json", "kind": "all", "columns": ("ferry::remote", "ucx_perftest")},
    "soak": {"source": "h200-soak.json", "kind": "rows", "columns": ("late third", "early third"),
             "ratio": "early / late",
             "rows": [("soak_rss_MiB", "resident memory"), ("soak_pinned_MiB", "the engine's page-locked memory"),
                      ("soak_device_used_MiB", "device memory in use"), ("soak_op_time_us", "time per op")]},
    "peer": {"source": "h200x2.json", "kind": "all", "labels": PEER_LABELS, "columns": ("ferry", "raw driver")},
}


def load(path):
    with open(path) as f:
        return json.load(f)


def is_sim(results):
    return results.get("backend") == "sim"


def merge(directory, machine):
    parts = sorted(p for p in glob.glob(os.path.join(directory, machine + "-*.json")))
    if not parts:
        sys.exit(f"report.py: no {machine}-*.json in {directory}")
    merged = {"machine": machine, "device": "", "backend": "", "suites": [], "benchmarks": []}
    for path in parts:
        suite = load(path)
        merged["device"] = merged["device"] or suite.get("device", "")
        merged["backend"] = merged["backend"] or suite.get("backend", "")
        merged["ferry_version"] = merged.get("ferry_version") or suite.get("ferry_version", "")
        merged["suites"].append(os.path.basename(path)[len(machine) + 1:-len(".json")])
        merged["benchmarks"].extend(suite["benchmarks"])
    with open(os.path.join(directory, machine + ".json"), "w") as f:
        json.dump(merged, f, indent=2)
        f.write("\n")

    lines = [f"# ferry benchmarks: {machine}", ""]
    if is_sim(merged):
        lines += [f"**{SIM_LABEL}**", ""]
    lines += [f"{merged['device']}, backend {merged['backend']}. Each figure is ferry's operation and the raw driver "
              "call doing the same work, in the same run, medians of the trials. Ratio = ferry's speed over the raw "
              "driver's (raw time / ferry time); above 1 ferry is faster.", "",
              "| name | bytes | ferry | raw | unit | ratio | trials |", "|---|---:|---:|---:|---|---:|---:|"]
    for b in merged["benchmarks"]:
        lines.append(f"| {b['name']} | {b['bytes']} | {formatted(b['ferry'], '.4g')} | {formatted(b['raw'], '.4g')} | "
                     f"{b['unit']} | {formatted(b['ratio'], '.3f')} | {b['trials']} |")
    with open(os.path.join(directory, machine + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(merged, os.path.join(directory, machine + ".png"))


def plot(merged, path):
    curves = {}
    for b in merged["benchmarks"]:
        m = SWEEP.match(b["name"])
        if m and b["unit"] == "GB/s" and b["ferry"] is not None and b["raw"] is not None:
            key = f"{m.group(1).upper()} {m.group(2)}"
            curves.setdefault(key, []).append((int(m.group(3)) * UNIT[m.group(4)], b["ferry"], b["raw"]))
    if not curves:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: matplotlib missing, no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for index, (key, points) in enumerate(sorted(curves.items())):
        points.sort()
        sizes = [p[0] for p in points]
        color = f"C{index}"
        ax.plot(sizes, [p[1] for p in points], "-o", color=color, label=f"{key}: ferry")
        ax.plot(sizes, [p[2] for p in points], "--x", color=color, label=f"{key}: raw driver")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    if is_sim(merged):
        ax.set_title(f"{SIM_LABEL}\nferry vs raw driver: {merged['device']}", fontsize=10)
    else:
        ax.set_title(f"ferry vs raw driver: {merged['device']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---- tables for the docs

def number(value):
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if value == int(value):
        return f"{int(value):,}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def formatted(value, spec):
    """A figure of a results file; null there (JSON has no infinity or NaN) is shown as n/a."""
    return "n/a" if value is None else format(value, spec)


def ratio(value):
    if value is None:
        return "n/a"
    return f"{value:.3f}" if 0.9 <= value < 1.1 else f"{value:.2f}"


def shown(b, value):
    """A figure with its unit; microseconds of 10 ms and more are shown in ms."""
    if value is None:
        return "n/a"
    unit = b["unit"]
    if unit == "us" and max(abs(b["ferry"] or 0), abs(b["raw"] or 0)) >= 10000:
        return f"{number(value / 1000)} ms"
    if unit in ("%", "% of a core"):
        return f"{number(value)} %"
    return f"{number(value)} {unit}"


def has_raw(b):
    # Figures with no raw counterpart carry raw 0 (idle CPU) or a placeholder of 1 (thread count).
    return not (b["unit"] in ("threads", "% of a core") or (b["raw"] == 0 and b["ferry"] == 0))


def caption(results, source):
    line = f"From `bench/results/{source}`: {results.get('device', '?')}, backend {results.get('backend', '?')}."
    return ([f"**{SIM_LABEL}**", ""] if is_sim(results) else []) + [line, ""]


def by_name(results):
    return {b["name"]: b for b in results.get("benchmarks", [])}


def missing(name, source):
    print(f"report.py: {name} is not in bench/results/{source}", file=sys.stderr)


def rows_table(results, source, rows, columns=("ferry", "raw driver"), ratio_heading="ratio"):
    found = by_name(results)
    out = caption(results, source) + [
        f"| benchmark | what | {columns[0]} | {columns[1]} | {ratio_heading} |", "|---|---|---:|---:|---:|"]
    for name, what in rows:
        b = found.get(name)
        if b is None:
            missing(name, source)
            out.append(f"| {name} | {what} | not measured | | |")
            continue
        if has_raw(b):
            out.append(f"| {name} | {what} | {shown(b, b['ferry'])} | {shown(b, b['raw'])} | {ratio(b['ratio'])} |")
        else:
            out.append(f"| {name} | {what} | {shown(b, b['ferry'])} | | |")
    return out


def all_table(results, source, spec):
    labels = spec.get("labels", {})
    rows = [(b["name"], labels.get(b["name"], "")) for b in results.get("benchmarks", [])]
    if not labels:
        found = by_name(results)
        columns = spec.get("columns", ("ferry", "raw driver"))
        out = caption(results, source) + [
            f"| benchmark | {columns[0]} | {columns[1]} | {spec.get('ratio', 'ratio')} | trials |",
            "|---|---:|---:|---:|---:|"]
        for name, _ in rows:
            b = found[name]
            out.append(f"| {name} | {shown(b, b['ferry'])} | {shown(b, b['raw'])} | {ratio(b['ratio'])} | "
                       f"{b['trials']} |")
        return out
    return rows_table(results, source, rows, spec.get("columns", ("ferry", "raw driver")))


def targets_table(results, source):
    found = by_name(results)
    out = caption(results, source) + ["| benchmark | ferry | raw driver | ratio | target | met |",
                                      "|---|---:|---:|---:|---|---|"]
    for name, _, target in HEADLINE:
        b = found.get(name)
        if b is None:
            missing(name, source)
            out.append(f"| {name} | not measured | | | {target[2] if target else ''} | |")
            continue
        met = ""
        if target:
            test, threshold, _ = target
            value = b["ferry"] if test.startswith("ferry") else b["ratio"]
            ok = value >= threshold if test.endswith(">=") else value > threshold if test.endswith(">") else value < threshold
            met = "yes" if ok else "no"
        raw = shown(b, b["raw"]) if has_raw(b) else ""
        rat = ratio(b["ratio"]) if has_raw(b) else ""
        out.append(f"| {name} | {shown(b, b['ferry'])} | {raw} | {rat} | {target[2] if target else ''} | {met} |")
    return out


def sweep_table(results, source):
    cells = {}
    for b in results.get("benchmarks", []):
        m = SWEEP.match(b["name"])
        if m and b["unit"] == "GB/s":
            size = int(m.group(3)) * UNIT[m.group(4)]
            label = m.group(3) + " " + m.group(4)
            cells.setdefault((size, label), {})[f"{m.group(1)}_{m.group(2)}"] = b
    kinds = [("h2d_pinned", "H2D pinned"), ("d2h_pinned", "D2H pinned"),
             ("h2d_pageable", "H2D pageable"), ("d2h_pageable", "D2H pageable")]
    out = caption(results, source) + [
        "Each cell: ferry / raw driver in GB/s (ratio).", "",
        "| size | " + " | ".join(k[1] for k in kinds) + " |", "|---:|" + "---:|" * len(kinds)]
    for size, label in sorted(cells):
        row = cells[(size, label)]
        parts = []
        for key, _ in kinds:
            b = row.get(key)
            parts.append(f"{number(b['ferry'])} / {number(b['raw'])} ({ratio(b['ratio'])})" if b else "")
        out.append(f"| {label} | " + " | ".join(parts) + " |")
    return out


def render(name, directory):
    spec = TABLES.get(name)
    if spec is None:
        sys.exit(f"report.py: no table named {name!r} (tables: {', '.join(TABLES)})")
    path = os.path.join(directory, spec["source"])
    if not os.path.exists(path):
        return [f"No `bench/results/{spec['source']}` yet: run the benchmarks (docs/performance.md)."]
    results = load(path)
    kind = spec["kind"]
    if kind == "rows":
        return rows_table(results, spec["source"], spec["rows"], spec.get("columns", ("ferry", "raw driver")),
                          spec.get("ratio", "ratio"))
    if kind == "targets":
        return targets_table(results, spec["source"])
    if kind == "sweep":
        return sweep_table(results, spec["source"])
    return all_table(results, spec["source"], spec)


def regenerate(text, directory, path):
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        end = i
        while end < len(lines) and lines[end].strip() != END:
            if BEGIN.match(lines[end]):
                break
            end += 1
        if end == len(lines) or lines[end].strip() != END:
            sys.exit(f"report.py: {path}: '{m.group(0).strip()}' has no '{END}' after it")
        out.append("")
        out.extend(render(m.group(1), directory))
        out.append("")
        out.append(lines[end])
        i = end + 1
    return "\n".join(out)


def markdown_tables(arguments):
    directory = os.path.join(ROOT, "bench", "results")
    check = False
    files = []
    i = 0
    while i < len(arguments):
        a = arguments[i]
        if a == "--results" and i + 1 < len(arguments):
            directory = arguments[i + 1]
            i += 2
            continue
        if a == "--check":
            check = True
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            files.append(a)
        i += 1
    if not files:
        files = [os.path.join(ROOT, f) for f in DEFAULT_FILES]
    stale = []
    for path in files:
        with open(path) as f:
            text = f.read()
        updated = regenerate(text, directory, path)
        if updated == text:
            continue
        stale.append(path)
        if not check:
            with open(path, "w") as f:
                f.write(updated)
    for path in stale:
        print(f"report.py: {path}: {'out of date' if check else 'tables regenerated'}", file=sys.stderr)
    if check and stale:
        sys.exit(1)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--markdown-tables":
        markdown_tables(sys.argv[2:])
    elif len(sys.argv) == 3 and not sys.argv[1].startswith("-"):
        merge(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
