#!/usr/bin/env python3
"""Checks that ferry's dependencies point down the layers, as docs/architecture.md draws them:

    api -> engine/async -> engine/transfer -> engine/memory, engine/context, engine/kernels
        -> engine/errors -> engine/driver, engine/trace

Every rule in api/ and engine/ may depend only on packages of a lower layer (or its own package) and on
the public headers alone (//api:headers, the declarations engine/ implements), and nothing there may
depend on the sim (engine/driver/sim), which tests link and product code never does.
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
SIM = "//engine/driver/sim"
# The public headers alone: the declarations engine/ implements, so every layer may include them.
INTERFACE = "//api:headers"


def package_of(label):
    return label.split(":")[0]


def main():
    bazel = sys.argv[1] if len(sys.argv) > 1 else "bazel"
    query = subprocess.run(
        [bazel, "query", "--noshow_progress", "--output=xml", "kind(rule, //api/... + //engine/...)"],
        check=True, capture_output=True, text=True).stdout
    wrong = []
    checked = 0
    for rule in ET.fromstring(query).iter("rule"):
        label = rule.get("name")
        source = package_of(label)
        if source == SIM or source not in LAYERS:
            continue
        for attribute in rule.iter("list"):
            if attribute.get("name") != "deps":
                continue
            for dependency in attribute.iter("label"):
                target = package_of(dependency.get("value"))
                checked += 1
                if dependency.get("value") == INTERFACE:
                    continue
                if target == SIM:
                    wrong.append(f"{label} -> {dependency.get('value')}: product code never links the sim")
                elif target in LAYERS and target != source and LAYERS[target] >= LAYERS[source]:
                    wrong.append(f"{label} -> {dependency.get('value')}: {source} (layer {LAYERS[source]}) may "
                                 f"depend only on lower layers, not {target} (layer {LAYERS[target]})")
    for line in wrong:
        print("layers: " + line)
    print(f"layers: {checked} dependencies of api/ and engine/ checked, {len(wrong)} point the wrong way")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
