"""Declares the Boost headers ferry needs (1.81 or newer) as a local repository (@ferry_boost, made by deps.bzl).

Boost is found at $BOOST_ROOT (its include/ folder, or the root itself when boost/ is directly in it),
else in /usr/include (Debian's libboost1.81-dev). An older or missing Boost fails here, when Bazel
sets up the repository, with a message that says what to install, instead of as compile errors.
"""

_MIN_VERSION = 108100

def _find(repository_ctx):
    root = repository_ctx.os.environ.get("BOOST_ROOT", "")
    candidates = [root + "/include", root] if root else ["/usr/include"]
    for folder in candidates:
        if repository_ctx.path(folder + "/boost/version.hpp").exists:
            return folder
    fail("ferry: no Boost headers found (looked for boost/version.hpp in %s). " % ", ".join(candidates) +
         "Install Boost 1.81 (Debian 12: apt-get install libboost1.81-dev, or tools/ferry setup) " +
         "or set BOOST_ROOT to a Boost 1.81+ installation.")

def _version_of(repository_ctx, version_hpp):
    for line in repository_ctx.read(version_hpp).splitlines():
        if line.startswith("#define BOOST_VERSION "):
            return int(line.split(" ")[2].strip())
    fail("ferry: cannot read BOOST_VERSION from %s" % version_hpp)

def _boost_configure_impl(repository_ctx):
    folder = _find(repository_ctx)
    version = _version_of(repository_ctx, folder + "/boost/version.hpp")
    if version < _MIN_VERSION:
        fail("ferry: the Boost at %s is version %d.%d; ferry needs 1.81 or newer. " % (folder, version // 100000, version // 100 % 1000) +
             "Install libboost1.81-dev (Debian 12) or set BOOST_ROOT to a newer Boost.")
    if folder == "/usr/include":
        # The compiler searches /usr/include already: declaring its 15,000 Boost headers as inputs of
        # every compile action would only slow the build (and each sandboxed action) down.
        headers = "hdrs = [],"
    else:
        repository_ctx.symlink(folder + "/boost", "include/boost")
        headers = 'hdrs = glob(["include/boost/**"]),\n    includes = ["include"],'
    repository_ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# Boost %d.%d.%d from %s: header-only parts (Asio, Beast, JSON, Test's included runner).
cc_library(
    name = "headers",
    %s
)
""" % (version // 100000, version // 100 % 1000, version % 100, folder, headers))

boost_configure = repository_rule(
    implementation = _boost_configure_impl,
    environ = ["BOOST_ROOT"],
    local = True,
)
