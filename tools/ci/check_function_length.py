#!/usr/bin/env python3
"""Checks that no function of ferry's product code is longer than 80 lines, as lizard counts a
function's length: from the line of its name to the line of its closing brace, blank lines and
comments included (lizard's -L, its `length`).

Product code is the C++ and CUDA sources (.hpp .h .cc .cu .cuh) under api/, engine/, kernels/,
examples/pipeline_server/ and tools/. The test doubles and programs that only test or measure are
left out: tests/, bench/, the sim (engine/driver/sim, or sim/ at the top) and examples/consumer.

lizard and Pygments (which lizard imports) come from .tools/lizard, unpacked there from their pinned
PyPI wheels by `tools/ferry setup`. Usage: tools/ci/check_function_length.py; prints each function
over the limit as "path:line name: N lines", then one summary line, and exits 1 when any is over.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIZARD_DIR = os.path.join(ROOT, ".tools", "lizard")
LIMIT = 80
PRODUCT = ["api", "engine", "kernels", "examples/pipeline_server", "tools"]
NOT_PRODUCT = ["tests", "bench", "engine/driver/sim", "sim", "examples/consumer"]
EXTENSIONS = (".hpp", ".h", ".cc", ".cu", ".cuh")


def product_sources():
    """The product sources, relative to ROOT, in a stable order."""
    excluded = {os.path.normpath(path) for path in NOT_PRODUCT}
    sources = []
    for top in PRODUCT:
        for folder, subfolders, files in os.walk(os.path.join(ROOT, top)):
            relative = os.path.relpath(folder, ROOT)
            # Pruned in place so that os.walk never enters an excluded folder.
            subfolders[:] = sorted(name for name in subfolders
                                   if os.path.normpath(os.path.join(relative, name)) not in excluded)
            sources += [os.path.join(relative, name) for name in sorted(files) if name.endswith(EXTENSIONS)]
    return sources


def main():
    sys.path.insert(0, LIZARD_DIR)
    try:
        import lizard
        from lizard_ext.version import version
    except ImportError as error:
        print(f"function length: cannot import lizard from {LIZARD_DIR} ({error}): tools/ferry setup fetches it")
        return 1
    sources = product_sources()
    functions = 0
    over = []
    for source in sources:
        # lizard picks its reader by extension; .cu and .cuh, which it does not know, get its C/C++ one.
        analysis = lizard.analyze_file(os.path.join(ROOT, source))
        functions += len(analysis.function_list)
        over += [(source, function) for function in analysis.function_list if function.length > LIMIT]
    for source, function in over:
        print(f"function length: {source}:{function.start_line} {function.name}: {function.length} lines")
    print(f"function length: {functions} functions in {len(sources)} files checked (lizard {version}), "
          f"{len(over)} longer than {LIMIT} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
