#!/usr/bin/env python3
"""Checks that ferry's dependencies point down the layers, as docs/architecture.md draws them:

    api -> engine/async -> engine/transfer -> engine/memory, engine/context, engine/kernels
        -> engine/errors -> engine/driver, engine/trace

    sim (beside the engine; tests link it) -> engine/driver, engine/kernels, engine/errors, kernels:abi

Every rule in api/ and engine/ may depend only on packages of a lower layer (or its own package) and on
the public headers alone (//api:headers, the declarations engine/ implements). Nothing of the product
(api/, engine/, tools/) may depend on the sim (//sim), directly or through another target: tests link
it, product code never does, and its cc_library is public (users' tests link it), so no visibility list
refuses such an edge. The sim stands in for the driver, below the engine: it may use the driver table
and backend selection it registers with (engine/driver), the kernels' host twins (engine/kernels) and
their parameter layout (//kernels:abi), the error types (engine/errors), the public headers and external
repositories, and nothing of the engine above them (async, transfer, memory, context, remote).
Bazel's visibility lists refuse most wrong-way edges already; this check keeps the whole order, and
says which edge breaks it. Usage: tools/ci/check_layers.py [BAZEL]; exit 1 when an edge is wrong.
"""
import subprocess
import sys
import xml.etree.ElementTree as ET

# Higher numbers sit higher. Packages of one layer may not depend on each other either.
LAYERS = {
    "//api": 6,
    "//engine/async": 5,
    "//engine/remote": 5,
    "//engine/transfer": 4,
    "//engine/memory": 3,
    "//engine/context": 3,
    "//engine/kernels": 2,
    "//engine/errors": 2,
    "//engine/driver": 1,
    "//engine/trace": 1,
}
SIM = "//sim"
# The public headers alone: the declarations engine/ implements, so every layer may include them.
INTERFACE = "//api:headers"
# What the sim may depend on besides its own package and external repositories: whole packages, and
# single targets of packages it may not use otherwise (the kernels' ABI, not their fatbin).
SIM_PACKAGES = {"//engine/driver", "//engine/kernels", "//engine/errors"}
SIM_TARGETS = {INTERFACE, "//kernels:abi"}
# Product code: no rule here may reach the sim.
PRODUCT = "//api/... + //engine/... + //tools/..."


def package_of(label):
    return label.split(":")[0]


def canonical(label):
    return label if ":" in label else f"{label}:{label.rsplit('/', 1)[-1]}"


def query(bazel, expression, output="label"):
    return subprocess.run([bazel, "query", "--noshow_progress", f"--output={output}", expression],
                          check=True, capture_output=True, text=True).stdout


def deps_of(rule):
    for attribute in rule.iter("list"):
        if attribute.get("name") == "deps":
            yield from (dependency.get("value") for dependency in attribute.iter("label"))


def layer_problem(source, value):
    target = package_of(value)
    if value == INTERFACE:
        return None
    if target == SIM:
        return "product code never links the sim"
    if target in LAYERS and target != source and LAYERS[target] >= LAYERS[source]:
        return (f"{source} (layer {LAYERS[source]}) may depend only on lower layers, not {target} "
                f"(layer {LAYERS[target]})")
    return None


def sim_problem(value):
    target = package_of(value)
    if value.startswith("@") or target == SIM or target in SIM_PACKAGES or canonical(value) in SIM_TARGETS:
        return None
    return ("the sim may use only engine/driver, engine/kernels, engine/errors, //kernels:abi, "
            "//api:headers and external repositories")


def main():
    bazel = sys.argv[1] if len(sys.argv) > 1 else "bazel"
    rules = ET.fromstring(query(bazel, f"kind(rule, //api/... + //engine/... + {SIM}/...)", "xml"))
    wrong = []
    named = set()
    checked = 0
    for rule in rules.iter("rule"):
        label = rule.get("name")
        source = package_of(label)
        in_sim = source == SIM or source.startswith(SIM + "/")
        if not in_sim and source not in LAYERS:
            continue
        for value in deps_of(rule):
            checked += 1
            problem = sim_problem(value) if in_sim else layer_problem(source, value)
            if problem:
                wrong.append(f"{label} -> {value}: {problem}")
                named.add(label)
    # The direct edges above name most mistakes; this finds a product rule that links the sim through
    # another target (a test helper, say), and names the path. A rule that reaches the sim only through
    # a rule named already is left out: one wrong edge, one line.
    reaching = query(bazel, f"kind(rule, {PRODUCT}) intersect rdeps(//..., {SIM}/...)").split()
    for label in reaching:
        if label in named:
            continue
        path = query(bazel, f"somepath({label}, {SIM}/...)").split()
        if named.intersection(path):
            continue
        wrong.append(f"{label} reaches the sim through {' -> '.join(path)}: product code never links the sim")
        named.add(label)
    for line in wrong:
        print("layers: " + line)
    print(f"layers: {checked} dependencies of api/, engine/ and the sim checked, {len(reaching)} product "
          f"rules reach the sim, {len(wrong)} point the wrong way")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
