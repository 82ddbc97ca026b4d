"""Exposes the system CUDA toolkit's headers (and nvcc) as a local repository (@ferry_cuda, made by deps.bzl).

The toolkit is found at $CUDA_PATH, else /usr/local/cuda. Toolkits older than 12.8 are refused:
ferry uses CUDA 12.8+ entry points (cuMemcpyBatchAsync) and the CUDA 13 location API.
"""

_MIN_VERSION = 12080

def _version_of(repository_ctx, cuda_h):
    for line in repository_ctx.read(cuda_h).splitlines():
        if line.startswith("#define CUDA_VERSION "):
            return int(line.split(" ")[2].strip())
    fail("ferry: cannot read CUDA_VERSION from %s" % cuda_h)

def _cuda_configure_impl(repository_ctx):
    root = repository_ctx.os.environ.get("CUDA_PATH", "") or "/usr/local/cuda"
    cuda_h = repository_ctx.path(root + "/include/cuda.h")
    if not cuda_h.exists:
        fail("ferry: no CUDA toolkit at %s (cuda.h not found). Install the CUDA toolkit (12.8 or newer) " % root +
             "or set CUDA_PATH to its folder.")
    version = _version_of(repository_ctx, cuda_h)
    if version < _MIN_VERSION:
        fail("ferry: the CUDA toolkit at %s is version %d.%d; ferry needs 12.8 or newer. " % (root, version // 1000, (version % 1000) // 10) +
             "Install a newer toolkit or point CUDA_PATH at one.")
    repository_ctx.symlink(root + "/include", "include")
    nvcc = repository_ctx.path(root + "/bin/nvcc")
    repository_ctx.file("nvcc_path.bzl", "NVCC = %r\nCUDA_ROOT = %r\nCUDA_VERSION = %d\n" % (str(nvcc), root, version))
    repository_ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# Headers only: ferry loads libcuda.so.1 at run time and links nothing from CUDA.
cc_library(
    name = "headers",
    hdrs = glob(["include/cuda.h", "include/cudaTypedefs.h", "include/cuda_runtime_api.h",
                 "include/driver_types.h", "include/vector_types.h", "include/host_defines.h",
                 "include/crt/host_defines.h", "include/cuda_device_runtime_api.h",
                 "include/driver_functions.h", "include/library_types.h", "include/surface_types.h",
                 "include/texture_types.h", "include/vector_functions.h", "include/vector_functions.hpp",
                 "include/cuda_runtime.h", "include/builtin_types.h", "include/channel_descriptor.h",
                 "include/crt/*.h", "include/crt/*.hpp", "include/cudaProfilerTypedefs.h"]),
    includes = ["include"],
)
""")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
