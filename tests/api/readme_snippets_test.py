#!/usr/bin/env python3
"""Every C++ block of the docs (README.md and docs/*.md) compiles against the public headers.

Each block has a harness in readme_snippets/ that names the block's first line (`// readme-block: ...`)
and gives it what it needs (the names it uses, a function or coroutine to stand in). The block's
#include lines replace the harness's `// @readme-includes@` line and the rest its `// @readme-block@`
line; the result is compiled (-fsyntax-only). A block without a harness, a harness whose block is gone,
or a block that does not compile fails the test, so the guide cannot drift from the API. Harnesses
are shared by all the docs: a block of any doc finds its harness by its first line.

Arguments: README.md, then the harnesses. The docs are README.md and docs/*.md of the source tree that
README.md is a link into (Bazel runs this test locally and unsandboxed, tags "local" and "external", so
that a new page of docs/ is checked without a BUILD change and a changed one is never a cached pass).
Environment: CXX (default g++), CUDA_PATH (/usr/local/cuda).
"""
import glob
import os
import subprocess
import sys
import tempfile

MARKER = "// readme-block: "
INCLUDES = "// @readme-includes@"
BODY = "// @readme-block@"


def cpp_blocks(readme_path):
    """(line number of the fence, lines) of each ```cpp block."""
    blocks, current, start = [], None, 0
    with open(readme_path, encoding="utf-8") as readme:
        for number, line in enumerate(readme, start=1):
            text = line.rstrip("\n")
            if current is None and text.strip() == "```cpp":
                current, start = [], number
            elif current is not None and text.strip() == "```":
                blocks.append((start, current))
                current = None
            elif current is not None:
                current.append(text)
    if current is not None:
        sys.exit(f"FAIL {readme_path}: the ```cpp block at line {start} is not closed")
    return blocks


def first_line(lines):
    """The block's first line of code, without its trailing comment (harnesses name blocks by it)."""
    code = (line.split("//")[0].strip() for line in lines)
    return next((line for line in code if line), "")


def harness_marker(path):
    with open(path, encoding="utf-8") as harness:
        for line in harness:
            if line.startswith(MARKER):
                return line[len(MARKER):].split("//")[0].strip()
    return None


def compose(harness_path, lines):
    includes = [line for line in lines if line.lstrip().startswith("#include")]
    body = [line for line in lines if not line.lstrip().startswith("#include")]
    with open(harness_path, encoding="utf-8") as harness:
        text = harness.read()
    if includes and INCLUDES not in text:
        raise ValueError(f"the block has #include lines and {harness_path} has no '{INCLUDES}' line")
    if BODY not in text:
        raise ValueError(f"{harness_path} has no '{BODY}' line")
    return text.replace(INCLUDES, "\n".join(includes)).replace(BODY, "\n".join(body))


def doc_paths(readme):
    """README.md and docs/*.md of the source tree, as (path, name relative to the tree)."""
    tree = os.path.dirname(os.path.realpath(readme))
    docs = sorted(glob.glob(os.path.join(tree, "docs", "*.md")))
    if not docs:
        sys.exit(f"FAIL {tree}: no docs/*.md beside README.md (is the test sandboxed? it reads the source tree)")
    return [(os.path.realpath(readme), "README.md")] + [(path, os.path.relpath(path, tree)) for path in docs]


def main():
    readme, harnesses = sys.argv[1], sys.argv[2:]
    root = os.getcwd()  # the runfiles root: api/ is below it
    compiler = os.environ.get("CXX", "g++")
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    by_marker = {}
    failures = 0
    for path in harnesses:
        marker = harness_marker(path)
        if marker is None:
            print(f"FAIL {path}: no '{MARKER}...' line names the doc block it holds")
            failures += 1
        elif marker in by_marker:
            print(f"FAIL {path}: names the same block as {by_marker[marker]} ('{marker}')")
            failures += 1
        else:
            by_marker[marker] = path
    used = set()
    blocks = [(name, line_number, lines) for path, name in doc_paths(readme)
              for line_number, lines in cpp_blocks(path)]
    if not blocks:
        print("FAIL: no ```cpp block found in README.md or docs/*.md")
        failures += 1
    for name, line_number, lines in blocks:
        marker = first_line(lines)
        harness = by_marker.get(marker)
        if harness is None:
            print(f"FAIL {name} line {line_number}: no harness in readme_snippets/ names its first line "
                  f"('{marker}')")
            failures += 1
            continue
        used.add(harness)
        try:
            source = compose(harness, lines)
        except ValueError as error:
            print(f"FAIL {name} line {line_number}: {error}")
            failures += 1
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as composed:
            composed.write(source)
        result = subprocess.run(
            [compiler, "-std=c++20", "-fsyntax-only", f"-I{root}/api", f"-I{cuda}/include", composed.name],
            capture_output=True, text=True)
        os.unlink(composed.name)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line][:5]
            print(f"FAIL {name} line {line_number} (in {harness}) does not compile:")
            print("\n".join("  " + line for line in errors))
            failures += 1
        else:
            print(f"ok   {name} line {line_number} compiles (in {harness})")
    for path in sorted(set(by_marker.values()) - used):
        print(f"FAIL {path}: no doc has a C++ block that begins '{harness_marker(path)}'")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
