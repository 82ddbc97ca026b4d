"""Shared compile options for ferry's own code (one place, used by every package)."""

FERRY_COPTS = [
    "-std=c++20",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-error=deprecated-declarations",
]

# Boost headers are system headers (Debian's libboost1.81-dev); Asio needs threads.
FERRY_LINKOPTS = ["-pthread", "-ldl"]

def ferry_cc_test(name, srcs, deps = [], tags = [], **kwargs):
    """A Boost.Test suite (header-only runner, so the binary needs no Boost on the GPU machine)."""
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + ["//tests/support:test_main"],
        copts = FERRY_COPTS,
        linkopts = FERRY_LINKOPTS,
        tags = tags,
        **kwargs
    )
