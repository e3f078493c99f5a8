"""Every kernel the default build compiles is one some call runs by default, and every kernel a
default call may run is compiled: the instantiation files (csrc/instantiations/generate.py)
against the choosers of csrc/sm80/configs.h and csrc/sm90/configs.h, asked over a grid of
problems and GPUs (host compiler only). Pinned rows (tests, benchmarks) and the autotune cache may
reach no further than what is built; a kernel outside the choosers' reach costs build time only.

How a chosen row becomes a kernel (csrc/plan.cpp, csrc/dispatch.cpp): an unswapped call runs its operands' own layout,
any of the four; the swapped decode path (M <= 32) runs C^T = B^T A^T, whose kernel's A is the
call's B and its B the call's A, each in either layout; the narrow sm80 kernels serve
any layout; TF32 runs one K-major kernel per family (the host copies other layouts); gated_mm runs
the gated kernels on K-major operands only (torch's path otherwise)."""

import importlib.util
import itertools
import re
from pathlib import Path

from host_cpp import build_and_run, needs_cxx

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_generate", REPO / "csrc" / "instantiations" / "generate.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SIZES = [1, 7, 16, 17, 32, 33, 64, 65, 100, 128, 129, 256, 300, 512, 574, 768, 1024, 1536, 2048, 2050,
         2304, 3072, 4096, 5120, 8192, 14336, 16384, 28672, 81920]
KS = [64, 256, 257, 1024, 2048, 4096, 8192, 14336]
# (SMs, shared memory per block): A100 (108, 163 KB), A10/sm_86 (72, 99 KB), L40/sm_89 (142, 99 KB),
# H100 SXM / H200 (132, 227 KB), H100 PCIe (114, 227 KB).
GPUS = [(108, 166912), (72, 101376), (142, 101376), (132, 232448), (114, 232448)]
BATCHES = [1, 4]

PROGRAM = r"""
#include <cstdio>
#include "sm80/configs.h"
#include "sm90/configs.h"
using namespace cute_gemm;
int main() {
  int m, n, k, batch, sms, smem;
  while (std::scanf("%d %d %d %d %d %d", &m, &n, &k, &batch, &sms, &smem) == 6) {
    for (int fast = 0; fast < 2; ++fast) {
      for (int lined = 0; lined < 2; ++lined)  // B's rows off or on the 128-byte lines
        std::printf("sm90 %d\n", sm90::choose_config(m, n, k, batch, sms, fast != 0, lined != 0));
      if (m <= sm90::kSwapMaxM && batch == 1) std::printf("swap %d\n", sm90::choose_swap_config(n, sms, fast != 0, m));
      if (batch == 1 && 2LL * n <= 2147483392LL) std::printf("sm90g %d\n", sm90::choose_gated_config(m, n, sms));
    }
    std::printf("sm80 %d\n", sm80::choose_config(m, n, sms, smem));
    std::printf("sm80n %d\n", sm80::choose_narrow_config(m, n, batch, sms));
    for (int fast = 0; fast < 2; ++fast) std::printf("sm90n %d\n", sm90::choose_narrow_config(m, n, k, batch, sms, fast != 0));
  }
}
"""


def reached_kernels(tmp_path) -> set[tuple[str, str, int, str]]:
    """(file family, dtype, row, layout) of every kernel a default call may run, over the grid."""
    src = tmp_path / "reach.cpp"
    src.write_text(PROGRAM)
    problems = "".join(f"{m} {n} {k} {b} {s} {smem}\n" for m, n, k, b, (s, smem) in
                       itertools.product(SIZES, SIZES, KS, BATCHES, GPUS))
    picks = {tuple(line.split()) for line in build_and_run(src, stdin=problems).splitlines()}
    kernels = set()
    for path, row in picks:
        row = int(row)
        if path == "sm90g":  # gated_mm: x @ w.t() with both K-major, or torch's path
            kernels |= {("sm90g", d, row, "kk") for d in gen.DTYPES}
        else:  # the swapped path's rows are sm90 rows, in every layout as the others
            kernels |= {("sm90" if path == "swap" else path, d, row, name) for d in gen.DTYPES for name in gen.LAYOUTS}
    kernels |= {(family, "tf32", row, "kk") for family, row in gen.TF32}
    return kernels


def built_kernels() -> set[tuple[str, str, int, str]]:
    """(file family, dtype, row, layout) of every kernel the default build compiles, from
    generate.py's files."""
    layout_of = {(str(ak).lower(), str(bk).lower()): name for name, (ak, bk) in gen.LAYOUTS.items()}
    dtype_of = {v: k for k, v in gen.DTYPES.items()} | {"kTF32": "tf32"}
    kernels = set()
    for name, text in gen.files().items():
        family = name.split("_")[0]
        for dtype, ak, bk, row in re.findall(r"_INSTANTIATE\(cute_gemm::DType::(\w+), (\w+), (\w+), (\d+)\)", text):
            kernels.add((family, dtype_of[dtype], int(row), layout_of[(ak, bk)]))
    return kernels


@needs_cxx
def test_every_built_kernel_is_reachable_and_every_reachable_one_built(tmp_path):
    reached, built = reached_kernels(tmp_path), built_kernels()
    assert sorted(built - reached) == [], "compiled, but no default call runs them"
    assert sorted(reached - built) == [], "a default call may run them, but they are not compiled"


def test_every_file_holds_both_dtypes_of_a_row():
    """generate.py's files: one per (family, dtype, row), of f16 and bf16 alike."""
    names = set(gen.files())
    for name in names:
        family, dtype, row = name[:-3].split("_")
        if dtype != "tf32":
            other = {"f16": "bf16", "bf16": "f16"}[dtype]
            assert f"{family}_{other}_{row}.cu" in names, name


@needs_cxx
def test_the_dispatch_tables_rule_is_the_files_rule(tmp_path):
    """dispatch.cpp's tables hold a kernel where sm80::has_plain says so, and every sm90 row in every
    layout; generate.py writes the files by its own reading of configs.h (plain_layouts): the two
    must agree, or the extension fails to load (a table entry without its file) or compiles a kernel
    no table holds."""
    src = tmp_path / "rule.cpp"
    src.write_text(
        "#include <cstdio>\n"
        '#include "sm80/configs.h"\n'
        '#include "sm90/configs.h"\n'
        "using namespace cute_gemm;\n"
        "int main() {\n"
        "  for (int c = 0; c < sm80::kNumConfigs; ++c) std::printf(\"sm80 %d %d\\n\", c, int(sm80::has_plain(c)));\n"
        "  for (int c = 0; c < sm90::kNumConfigs; ++c) std::printf(\"sm90 %d 1\\n\", c);\n"
        "}\n"
    )
    for line in build_and_run(src).splitlines():
        family, row, built = line.split()
        assert gen.plain_layouts(family, int(row)) == (list(gen.LAYOUTS) if built == "1" else []), line
