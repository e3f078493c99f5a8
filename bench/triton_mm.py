"""The Triton peer in the benchmark: the classic Triton matmul, written here so the comparison is
against a kernel anyone could write in an afternoon, not only against cuBLAS.

Grouped (GROUP_M) tile order, fp32 accumulation, any M/N/K (rows and columns past the edge are
wrapped on load and masked on store, the K residue is masked and zero-filled) and any strides,
stride 0 included. A handful of tile configurations, autotuned per shape and layout.
"""

import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    # Few-row (decode) problems: a short M tile wastes less of the tensor core on wrapped rows.
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=3, num_warps=4),
]


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               INDEX_64: tl.constexpr):
    # Grouped order: GROUP_M tile rows are walked column by column, so a group's A rows and B
    # columns stay in L2 while it runs.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INDEX_64:  # offsets of 2^31 elements or more: 32-bit arithmetic would wrap
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    # Rows/columns past M/N are wrapped, not masked, on load: they stay in bounds, keep the loads
    # unpredicated, and their results are never stored.
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak  # (BLOCK_M,BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn  # (BLOCK_K,BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kt * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn  # (BLOCK_M,BLOCK_N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


_mm_tuned = triton.autotune(
    configs=CONFIGS, key=["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn"])(_mm_kernel)


def mm(a: torch.Tensor, b: torch.Tensor, config=None) -> torch.Tensor:
    """a (M, K) @ b (K, N) -> new contiguous (M, N) of a's dtype. config: one triton.Config to run
    instead of autotuning over CONFIGS."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"triton_mm: a and b must be 2-D, got shapes {list(a.shape)} and {list(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"triton_mm: a's columns (K) must equal b's rows, got {list(a.shape)} and {list(b.shape)}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"triton_mm: a and b must share dtype and device, got {a.dtype} on {a.device} "
                         f"and {b.dtype} on {b.device}")
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    if c.numel() == 0:
        return c
    # A bound on the element offsets the kernel computes from a base pointer: every dimension
    # extended by more than a block (the K loop moves the pointers themselves, in 64 bits).
    reach = max(sum((s + 256) * st for s, st in zip(x.shape, x.stride())) for x in (a, b, c))
    index_64 = reach >= 2**31

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if config is None:
        _mm_tuned[grid](*args, INDEX_64=index_64)
    else:
        _mm_kernel[grid](*args, INDEX_64=index_64, num_warps=config.num_warps, num_stages=config.num_stages,
                         **config.kwargs)
    return c
