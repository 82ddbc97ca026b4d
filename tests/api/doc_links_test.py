#!/usr/bin/env python3
"""Every relative link of the docs leads somewhere: README.md, docs/*.md and examples/*/README.md.

A relative markdown link's file (or folder) must exist, and an anchor (`page.md#part`, or `#part` within
the page) must be the anchor GitHub gives one of the target page's headings. Links inside code (fenced
blocks, `inline code`) are not links; absolute URLs (https:, mailto:) are not checked.

Argument: README.md. The docs are those of the source tree that README.md is a link into (Bazel runs
this test locally and unsandboxed, tags "local" and "external", so that a new page is checked without a
BUILD change and a changed one is never a cached pass).
"""
import glob
import os
import re
import sys
import urllib.parse

# [text](target) and [text](target "title"); images too. The target is group 1.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target, a reference definition.
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose_lines(path):
    """(line number, text) of each line outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as page:
        for number, line in enumerate(page, start=1):
            text = line.rstrip("\n")
            match = FENCE.match(text)
            if match and (fence is None or match.group(1) == fence):
                fence = match.group(1) if fence is None else None
                continue
            if fence is None:
                yield number, text


def slug(heading):
    """The anchor GitHub gives a heading: its text as shown, lower case, punctuation dropped, spaces as -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)                        # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)                       # \w keeps letters, digits, _
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, text in prose_lines(path):
            found.update(HTML_ANCHOR.findall(text))
            match = HEADING.match(text)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def links(path):
    for number, text in prose_lines(path):
        text = INLINE_CODE.sub("", text)
        for match in LINK.finditer(text):
            yield number, match.group(1)
        match = DEFINITION.match(text)
        if match:
            yield number, match.group(1)


def check(path, tree):
    name = os.path.relpath(path, tree)
    failures = 0
    for number, target in links(path):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
            continue  # https:, mailto:, ...: not ours to check
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        destination = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(destination):
            print(f"FAIL {name} line {number}: {target}: no such file ({os.path.relpath(destination, tree)})")
            failures += 1
            continue
        if os.path.relpath(destination, tree).split(os.sep)[0] == "..":
            print(f"FAIL {name} line {number}: {target}: leads out of the source tree")
            failures += 1
            continue
        if anchor and destination.endswith(".md"):
            if urllib.parse.unquote(anchor).lower() not in anchors(destination):
                print(f"FAIL {name} line {number}: {target}: {os.path.relpath(destination, tree)} has no "
                      f"heading whose anchor is #{anchor}")
                failures += 1
                continue
        print(f"ok   {name} line {number}: {target}")
    return failures


def main():
    tree = os.path.dirname(os.path.realpath(sys.argv[1]))
    docs = [os.path.join(tree, "README.md")] + sorted(glob.glob(os.path.join(tree, "docs", "*.md"))) + \
        sorted(glob.glob(os.path.join(tree, "examples", "*", "README.md")))
    if len(docs) == 1:
        print(f"FAIL {tree}: no docs/*.md beside README.md (is the test sandboxed? it reads the source tree)")
        return 1
    failures = sum(check(path, tree) for path in docs)
    print(f"{len(docs)} pages, {failures} broken links")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
