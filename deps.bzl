"""ferry_dependencies(): everything ferry needs, set up offline, for any workspace that uses ferry.

In a WORKSPACE, after the repository that holds ferry (named `ferry`):

    load("@ferry//:deps.bzl", "ferry_dependencies")
    ferry_dependencies()

It defines, unless the workspace defines them already:
  rules_cc, rules_java, remote_coverage_tools: tiny shims (third_party/) that forward to Bazel 4's
      native rules; @bazel_tools asks for them, and Bazel would download the real ones otherwise.
  ferry_cuda: the CUDA toolkit's headers and nvcc ($CUDA_PATH, else /usr/local/cuda; 12.8 or newer).
  ferry_boost: the Boost headers ($BOOST_ROOT, else /usr/include; 1.81 or newer).
  ferry_ucx: UCX 1.22 (headers and shared libraries) for ferry::remote, from $FERRY_UCX_ROOT or ferry's
      .ucx/ folder (`tools/ferry setup` unpacks PyPI's libucx-cu13 wheel there); only targets that use
      ferry::remote need it.
Nothing is fetched from the network. The CUDA and Boost repositories carry ferry's prefix so that they
do not clash with a workspace's own `cuda` or `boost`.
"""

load("//third_party/boost:boost_configure.bzl", "boost_configure")
load("//third_party/cuda:cuda_configure.bzl", "cuda_configure")
load("//third_party/ucx:ucx_configure.bzl", "ucx_configure")

def _shim_impl(repository_ctx):
    folder = repository_ctx.path(repository_ctx.attr.anchor).dirname.get_child(repository_ctx.attr.folder)
    for child in folder.readdir():
        repository_ctx.symlink(child, child.basename)

# One of ferry's shims (a folder of third_party/, a workspace of its own) as a repository, found from
# ferry's own location wherever ferry sits: local_repository would need its path from the user's root.
_shim = repository_rule(
    implementation = _shim_impl,
    attrs = {
        "anchor": attr.label(allow_single_file = True),
        "folder": attr.string(),
    },
    local = True,
)

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def ferry_dependencies():
    """Defines the repositories ferry's targets need (see the file's comment)."""
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        _maybe(_shim, name = name, anchor = Label("//third_party:BUILD.bazel"), folder = name)
    _maybe(cuda_configure, name = "ferry_cuda")
    _maybe(boost_configure, name = "ferry_boost")
    _maybe(ucx_configure, name = "ferry_ucx", anchor = Label("//third_party/ucx:BUILD.bazel"))
