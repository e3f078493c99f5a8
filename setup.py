"""Build cute_gemm's CUDA extension with torch.utils.cpp_extension (ninja).

Environment:
  CUTLASS_PATH            a CUTLASS checkout (else third_party/cutlass, else PyPI nvidia-cutlass)
  TORCH_CUDA_ARCH_LIST    target arches (default: the visible GPUs, else "8.0;9.0a")
  MAX_JOBS                parallel compile jobs (ninja)
  CUTE_GEMM_PTXAS_VERBOSE=1   print registers / spills per kernel
"""

import hashlib
import importlib.util
import os
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent

# The package is not importable before it is built: load the path rules from their file.
_spec = importlib.util.spec_from_file_location("_build_paths", ROOT / "cute_gemm" / "_build_paths.py")
build_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_paths)

# torch reads CUDA_HOME once, at import: settle it first.
_cuda_home = build_paths.find_cuda_home()
if _cuda_home and not os.environ.get("CUDA_HOME"):
    os.environ["CUDA_HOME"] = _cuda_home

import torch  # noqa: E402
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension  # noqa: E402

capabilities = (
    [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
    if torch.cuda.is_available()
    else []
)
os.environ["TORCH_CUDA_ARCH_LIST"] = build_paths.default_arch_list(os.environ, capabilities)
cutlass_include, cutlass_origin = build_paths.find_cutlass_include(repo_root=ROOT)
extra_includes = build_paths.extra_cuda_includes(CUDA_HOME)
print(f"cute_gemm: arches {os.environ['TORCH_CUDA_ARCH_LIST']}; CUTLASS from {cutlass_origin} ({cutlass_include})")
if extra_includes:
    print(f"cute_gemm: CUDA headers torch needs, from its wheels: {', '.join(map(str, extra_includes))}")

common = ["-O3", "-DNDEBUG"]  # NDEBUG: asserts in CUTLASS headers cost registers and serialize
# A digest of the project's headers in every unit (gemm_params.h spells it out): a compiler cache
# (ccache, which torch's build uses where it is installed) hashes what the first device pass
# preprocesses, and for the sm90 files that pass (compute_80) reads sm90/kernel_stub.h, not
# kernel.h, run.h or traits.h; without the digest it served stale objects after a change to those.
HEADERS_ID = hashlib.sha1(b"".join(h.read_bytes() for h in sorted((ROOT / "csrc").rglob("*.h")))).hexdigest()[:16]
common.append(f"-DCUTE_GEMM_HEADERS_ID={HEADERS_ID}")
if build_paths.targets_sm90a(os.environ["TORCH_CUDA_ARCH_LIST"]):
    common.append("-DCUTE_GEMM_HAS_SM90A")  # the host may dispatch to the WGMMA family
if os.environ.get("CUTE_GEMM_TRACE") == "1":
    common.append("-DCUTE_GEMM_TRACE")  # a phase-trace build (csrc/sm90/trace.h): measurement only
# Searched after the toolkit's own include dir: the wheels hold a partial copy of the runtime
# headers that must not shadow the toolkit's. Only the torch-including .cpp files need them.
VERSION = "0.1.0"  # also cute_gemm.__version__; names the autotune cache file (csrc/autotune.cpp)
cxx_flags = common + [f"-DCUTE_GEMM_VERSION={VERSION}"] + [f for p in extra_includes for f in ("-idirafter", str(p))]
nvcc_flags = common + [
    "--expt-relaxed-constexpr",
    "-lineinfo",
    # torch disables the half/bfloat16 operators that CuTe's numeric types rely on.
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
]
if os.environ.get("CUTE_GEMM_PTXAS_VERBOSE"):
    nvcc_flags.append("-Xptxas=-v")

# CUTE_GEMM_LAYOUTS=kn,...: a development build (a short GPU check) with the kernels of these
# operand layouts only (generate.py's names: a, then b, K-major "k" or M-/N-major "m"/"n"; torch's
# row-major a @ b is "kn"); the dispatch tables hold no kernel for the others, whose calls are an
# error naming the knob. Unset: every layout (the product).
layouts = [x.strip() for x in os.environ.get("CUTE_GEMM_LAYOUTS", "").split(",") if x.strip()]
LAYOUT_BITS = {"kk": 3, "kn": 2, "mk": 1, "mn": 0}  # bit a_kmajor * 2 + b_kmajor (csrc/dispatch.h)
if layouts:
    unknown = sorted(set(layouts) - set(LAYOUT_BITS))
    if unknown:
        raise SystemExit(f"CUTE_GEMM_LAYOUTS: {unknown} not among {sorted(LAYOUT_BITS)}")
    mask = f"-DCUTE_GEMM_LAYOUTS_MASK={sum(1 << LAYOUT_BITS[x] for x in set(layouts))}"
    cxx_flags.append(mask)  # dispatch.cpp's tables
    nvcc_flags.append(mask)  # the instantiation files' #if lines
    print(f"cute_gemm: a development build with the layouts {', '.join(layouts)} only (CUTE_GEMM_LAYOUTS)")


sources = ["csrc/bindings.cpp", "csrc/gemm.cpp", "csrc/plan.cpp", "csrc/gated_plan.cpp", "csrc/gemv_plan.cpp", "csrc/in_place.cpp", "csrc/describe.cpp", "csrc/checks.cpp", "csrc/dispatch.cpp",
           "csrc/knobs.cpp", "csrc/operands.cpp", "csrc/launch.cpp",
           "csrc/autotune.cpp", "csrc/counters.cu", "csrc/gemv.cu", "csrc/row_copy.cu", "csrc/cross_entropy.cu", "csrc/cross_entropy_op.cpp", "csrc/rms_norm.cu", "csrc/rms_norm_op.cpp"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "instantiations").glob("*.cu")
)

setup(
    name="cute_gemm",
    version=VERSION,
    description="GEMM kernels for PyTorch written with CuTe/CUTLASS",
    packages=["cute_gemm"],
    python_requires=">=3.10",
    ext_modules=[
        CUDAExtension(
            name="cute_gemm._C",
            sources=sources,
            include_dirs=[str(ROOT / "csrc"), str(cutlass_include)],
            extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
