#!/usr/bin/env python3
"""Merges a machine's benchmark files into one: DIR/<machine>.json, DIR/<machine>.md and DIR/<machine>.png.

Each benchmark binary writes DIR/<machine>-<suite>.json; this script joins them (in suite order) and
plots bandwidth against transfer size for the sweep entries named <direction>_<memory>_<size>
(h2d_pinned_4KiB, d2h_pageable_256MiB, ...): ferry solid, the raw driver dashed.

usage: bench/report.py DIR MACHINE
"""
import glob
import json
import os
import re
import sys

SWEEP = re.compile(r"^(h2d|d2h)_(pinned|pageable)_(\d+)(KiB|MiB|GiB)$")
UNIT = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    directory, machine = sys.argv[1], sys.argv[2]
    parts = sorted(p for p in glob.glob(os.path.join(directory, machine + "-*.json")))
    if not parts:
        sys.exit(f"report.py: no {machine}-*.json in {directory}")
    merged = {"machine": machine, "device": "", "backend": "", "suites": [], "benchmarks": []}
    for path in parts:
        with open(path) as f:
            suite = json.load(f)
        merged["device"] = merged["device"] or suite.get("device", "")
        merged["backend"] = merged["backend"] or suite.get("backend", "")
        merged["suites"].append(os.path.basename(path)[len(machine) + 1:-len(".json")])
        merged["benchmarks"].extend(suite["benchmarks"])
    with open(os.path.join(directory, machine + ".json"), "w") as f:
        json.dump(merged, f, indent=2)
        f.write("\n")

    lines = [f"# ferry benchmarks: {machine}", "",
             f"{merged['device']}, backend {merged['backend']}. Each figure is ferry's operation and the raw driver call "
             "doing the same work, in the same run, medians of the trials. Ratio = ferry's speed over the raw driver's "
             "(raw time / ferry time); above 1 ferry is faster.", "",
             "| name | bytes | ferry | raw | unit | ratio | trials |", "|---|---:|---:|---:|---|---:|---:|"]
    for b in merged["benchmarks"]:
        lines.append(f"| {b['name']} | {b['bytes']} | {b['ferry']:.4g} | {b['raw']:.4g} | {b['unit']} | "
                     f"{b['ratio']:.3f} | {b['trials']} |")
    with open(os.path.join(directory, machine + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    curves = {}
    for b in merged["benchmarks"]:
        m = SWEEP.match(b["name"])
        if m and b["unit"] == "GB/s":
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
    ax.set_title(f"ferry vs raw driver: {merged['device']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, machine + ".png"), dpi=110)


if __name__ == "__main__":
    main()
