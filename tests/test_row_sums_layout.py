"""The row-sum warps' reads (csrc/sm90/row_sums.h) against the sm90 kernels' A layout in shared
memory, on CPU: for every tile row, an M-major A (the weight gradient's dY^T), every k row and ring
slot, the 4 rows a lane reads from &sA(row, k, stage) (row a multiple of 4) are 4 consecutive
16-bit elements at an 8-byte aligned address, as its uint2 load takes them. Host compiler, CuTe's
headers (the build's CUTLASS) and the CUDA toolkit's C++ library headers; no GPU, no extension."""

import shutil
import subprocess
from pathlib import Path

import pytest

from cute_gemm import _build_paths as bp
from host_cpp import CSRC

DRIVER = r"""
#include <cstdio>
#include <utility>
#include "sm90/traits.h"
using namespace cute;

// Whether every lane's 4 rows of every (k, slot) of row Cfg's M-major A tile are contiguous and
// 8-byte aligned (the swizzle, applied to byte addresses, permutes 16-byte units only).
template <int Cfg>
bool rows_hold() {
  using Tr = cute_gemm::sm90::KernelTraits<cute_gemm::DType::kBF16, false, false, Cfg>;
  typename Tr::SmemLayoutA layout{};
  const auto swizzle = get_swizzle_portion(layout);
  const auto plain = get_nonswizzle_portion(layout);
  for (int s = 0; s < Tr::kStages; ++s) {
    for (int k = 0; k < Tr::kBK; ++k) {
      for (int r = 0; r < Tr::kBM; r += 4) {
        auto address = [&](int m) { return uint32_t(swizzle(uint32_t(plain(m, k, s)) * 2u)); };
        const uint32_t first = address(r);
        if (first % 8 != 0) return false;
        for (int i = 1; i < 4; ++i) {
          if (address(r + i) != first + 2u * i) return false;
        }
      }
    }
  }
  return true;
}

template <int... Cfg>
void print_rows(std::integer_sequence<int, Cfg...>) {
  ((std::printf("%d %d\n", Cfg, int(rows_hold<Cfg>()))), ...);
}

int main() { print_rows(std::make_integer_sequence<int, cute_gemm::sm90::kNumConfigs>{}); }
"""


def _includes():
    try:
        cutlass, _ = bp.find_cutlass_include()
    except Exception as e:  # noqa: BLE001  (no CUTLASS found: the reason is in the message)
        pytest.skip(f"needs CUTLASS's headers: {e}")
    cuda = bp.find_cuda_home()
    if cuda is None or not (Path(cuda) / "include" / "cccl").is_dir():
        pytest.skip("needs the CUDA toolkit's headers (include/cccl) for CuTe on the host")
    return [cutlass, Path(cuda) / "include", Path(cuda) / "include" / "cccl"]


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
def test_row_sum_warps_read_four_contiguous_rows(tmp_path):
    src = tmp_path / "row_sums_layout.cpp"
    src.write_text(DRIVER)
    exe = tmp_path / "row_sums_layout"
    flags = [f"-I{p}" for p in (CSRC, *_includes())]
    subprocess.run(["c++", "-std=c++20", "-O1", *flags, str(src), "-o", str(exe)], check=True)
    rows = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                         check=True).stdout.splitlines())
    assert len(rows) == 13 and set(rows.values()) == {"1"}, rows
