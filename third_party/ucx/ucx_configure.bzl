"""Exposes UCX (the libucx-cu13 wheel that `tools/ferry setup` unpacks) as a local repository (@ferry_ucx).

UCX is found at $FERRY_UCX_ROOT, else in ferry's own .ucx/ folder (ignored by git), as setup leaves it:
ROOT/libucx/{include,lib,bin}. Its libraries are linked dynamically (libucp.so.0 finds its siblings
through its own $ORIGIN rpath); its transport modules (lib/ucx/) are loaded by UCX at run time.
The wheel's pkg-config and CMake files name its build machine's prefix and are not used.
"""

def _ucx_configure_impl(repository_ctx):
    root = repository_ctx.os.environ.get("FERRY_UCX_ROOT", "")
    if not root:
        root = str(repository_ctx.path(repository_ctx.attr.anchor).dirname.dirname.dirname) + "/.ucx"
    header = repository_ctx.path(root + "/libucx/include/ucp/api/ucp.h")
    if not header.exists:
        fail("ferry: UCX not found: %s does not exist. Run `tools/ferry setup` (it unpacks PyPI's " % header +
             "libucx-cu13 1.22 into .ucx/), or set FERRY_UCX_ROOT to a folder holding libucx/.")
    repository_ctx.symlink(root + "/libucx/include", "include")
    repository_ctx.symlink(root + "/libucx/lib", "lib")
    repository_ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# The versioned names (the sonames): the binaries' NEEDED entries and what Bazel puts beside them.
[cc_import(
    name = name,
    shared_library = "lib/lib%s.so.0" % name,
) for name in ["ucp", "uct", "ucs", "ucm"]]

cc_library(
    name = "ucx",
    hdrs = glob(["include/ucp/**/*.h", "include/ucs/**/*.h", "include/uct/**/*.h", "include/ucm/**/*.h"]),
    includes = ["include"],
    deps = [":ucp", ":uct", ":ucs", ":ucm"],
)
""")

ucx_configure = repository_rule(
    implementation = _ucx_configure_impl,
    attrs = {"anchor": attr.label(allow_single_file = True)},
    environ = ["FERRY_UCX_ROOT"],
    local = True,
)
