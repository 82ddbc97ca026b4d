"""cuda_fatbin: CUDA C++ kernels compiled by nvcc into one fatbin, embedded in a cc_library.

The library's kernels (//kernels:fatbin) are built this way, and so is any program's own fatbin
(examples/pipeline_server/kernels), so that every fatbin ferry's code loads is compiled with the same
flags and embedded the same way.
"""

load("@ferry_cuda//:nvcc_path.bzl", "NVCC")
load("//tools/bazel:ferry.bzl", "FERRY_COPTS")

# -fatbin with sm_90 code (Hopper GPUs run it as is) and compute_90 PTX (newer GPUs JIT-compile it).
# --expt-relaxed-constexpr lets device code call constexpr functions that host code calls too (the
# layout and transform definitions the host twins share). -lineinfo costs nothing at run time and lets
# compute-sanitizer name source lines.
NVCC_FLAGS = [
    "-std=c++20",
    "-O3",
    "--expt-relaxed-constexpr",
    "-lineinfo",
    "--Werror all-warnings",
    "-fatbin",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
]

def cuda_fatbin(name, kernels, headers, header, namespace, stem = None, visibility = None):
    """One fatbin of `kernels` (.cu files), embedded as `std::span<const unsigned char> fatbin()`.

    Makes the genrules compile_<name> (nvcc: <stem>.fatbin, and <stem>_unity.cu, the translation unit
    that compile errors and -lineinfo name) and embed_<name> (<name>_data.cc), and the cc_library
    <name>, whose `header` (a file of this package) declares fatbin() in `namespace`.

    nvcc takes a single source file per fatbin, so the unity file includes every kernel source. nvcc
    is the one @ferry_cuda found (its nvcc_path.bzl: $CUDA_PATH, else /usr/local/cuda); nothing is fetched.
    It needs the host compiler (g++) on PATH, as every C++ action here does.

    Args:
      name: the cc_library.
      kernels: the .cu files of the fatbin (sources of this package).
      headers: what they include (kernels and headers are found from the repository's root).
      header: the header declaring fatbin(), e.g. "fatbin.hpp".
      namespace: the C++ namespace of fatbin(), e.g. "ferry::detail::kernels".
      stem: the name of the fatbin and unity files (default: name).
      visibility: of the cc_library.
    """
    stem = stem or name
    fatbin_file = stem + ".fatbin"
    unity_file = stem + "_unity.cu"

    # Includes are relative to the repository's root, also when ferry is an external repository.
    repository = native.repository_name()
    root = "." if repository == "@" else "external/" + repository[1:]

    # The unity file names each kernel by its path from the execution root; the kernels name what they
    # include by its path from the repository's root.
    includes = "-I." if root == "." else "-I. -I" + root
    native.genrule(
        name = "compile_" + name,
        srcs = kernels + headers,
        outs = [
            fatbin_file,
            unity_file,
        ],
        cmd = " && ".join([
            "for source in %s; do echo \"#include \\\"$$source\\\"\"; done > $(location %s)" % (
                " ".join(["$(location %s)" % source for source in kernels]),
                unity_file,
            ),
            "%s %s %s -o $(location %s) $(location %s)" % (NVCC, " ".join(NVCC_FLAGS), includes, fatbin_file, unity_file),
        ]),
        message = "Compiling CUDA kernels into %s" % fatbin_file,
    )

    native.genrule(
        name = "embed_" + name,
        srcs = [fatbin_file],
        outs = [name + "_data.cc"],
        cmd = "/bin/sh $(location //kernels:embed_fatbin.sh) $(location %s) $@ %s %s" % (
            fatbin_file,
            native.package_name() + "/" + header,
            namespace,
        ),
        tools = ["//kernels:embed_fatbin.sh"],
    )

    native.cc_library(
        name = name,
        srcs = [":embed_" + name],
        hdrs = [header],
        copts = FERRY_COPTS,
        visibility = visibility,
    )
