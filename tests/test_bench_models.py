"""bench/bench_models.py on CPU: arguments, the models' shapes (meta tensors), the table, the plot
and the no-GPU message. The timing is not a test."""

import os
import subprocess
import sys
from pathlib import Path

import bench_scripts
import pytest
import torch

import cute_gemm

BENCH, bench = bench_scripts.load("bench_models")


def test_defaults_and_errors(capsys):
    args = bench.parse_args([])
    assert args.workloads == ["train", "train_amp", "prefill", "decode"] and args.peers == ["eager", "compile", "linears", "fused_loss"]
    assert args.prefill_tokens == [2048, 8192] and args.decode_tokens == [1, 4, 16, 64]
    assert args.json == Path("bench/out/models.json") and args.plot is None  # the plot: beside the JSON
    assert bench.parse_args(["--peers", "compile"]).peers == ["eager", "compile"]  # the baseline always runs
    assert bench.parse_args(["--decode-tokens", "16, 1,16"]).decode_tokens == [16, 1]
    assert "workload 'infer' is not one of train, train_amp, prefill, decode, all" in bench_scripts.usage_error(
        bench, capsys, ["--workloads", "decode,infer"])
    assert "'0,4' is not a comma list of positive integers" in bench_scripts.usage_error(
        bench, capsys, ["--decode-tokens", "0,4"])
    assert "--steps must be at least 2" in bench_scripts.usage_error(bench, capsys, ["--steps", "1"])


def test_models_and_the_swap_on_meta_tensors():
    GPT, LlamaLayer = bench.build_modules(torch)
    gpt = GPT(d=64, heads=4, ff=256, layers=2, vocab=100, seq=16).to("meta")
    idx = torch.zeros(2, 16, dtype=torch.long, device="meta")
    assert gpt(idx).shape == (2, 16, 100)
    swapped = bench.swap_linears(torch, cute_gemm, GPT(d=64, heads=4, ff=256, layers=2, vocab=100, seq=16))
    linears = [m for m in swapped.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 2 * 4 + 1 and all(isinstance(m, cute_gemm.nn.Linear) for m in linears)
    swapped = bench.swap_linears(torch, cute_gemm, LlamaLayer(d=64, heads=4, kv_heads=2, ff=160))
    assert type(swapped.mlp) is cute_gemm.nn.GatedMLP and type(swapped.qkv) is cute_gemm.nn.Linear
    plain = bench.linears_only(torch, cute_gemm, LlamaLayer(d=64, heads=4, kv_heads=2, ff=160))
    assert type(plain.mlp) is not cute_gemm.nn.GatedMLP and type(plain.mlp.gate_proj) is cute_gemm.nn.Linear
    layer = LlamaLayer(d=64, heads=4, kv_heads=2, ff=160).to("meta")
    cos, sin = bench.rope_tables(torch, torch.arange(8, device="meta"), 16, torch.float32)
    assert layer(torch.empty(1, 8, 64, device="meta"), cos, sin).shape == (1, 8, 64)
    cache = (torch.empty(3, 2, 8, 16, device="meta"), torch.empty(3, 2, 8, 16, device="meta"))
    assert layer(torch.empty(3, 1, 64, device="meta"), cos[:1], sin[:1], cache).shape == (3, 1, 64)


def test_decode_writes_its_token_into_the_static_cache():
    """A decode step writes its token's key and value into the cache's last slot before attention reads
    it: what that slot held before does not change the output."""
    torch.manual_seed(0)
    _, LlamaLayer = bench.build_modules(torch)
    layer = LlamaLayer(d=64, heads=4, kv_heads=2, ff=160).eval()
    cos, sin = bench.rope_tables(torch, torch.arange(7, 8), 16, torch.float32)
    x = torch.randn(3, 1, 64)
    outs, slots = [], []
    for fill in (0.0, 1e4):
        cache = (torch.randn(3, 2, 8, 16, generator=torch.Generator().manual_seed(1)),
                 torch.randn(3, 2, 8, 16, generator=torch.Generator().manual_seed(2)))
        cache[0][:, :, -1:] = fill
        cache[1][:, :, -1:] = fill
        with torch.no_grad():
            outs.append(layer(x, cos, sin, cache))
        slots.append(cache[1][:, :, -1:].clone())
    assert torch.equal(outs[0], outs[1]) and torch.equal(slots[0], slots[1])
    # The slots hold the token's value and its rotated key.
    with torch.no_grad():
        _, k, v = layer.qkv(layer.norm1(x)).split([64, 32, 32], -1)
        k, v = (z.view(3, 1, 2, 16).transpose(1, 2) for z in (k, v))
        k1, k2 = k.chunk(2, -1)
        k = k * cos + torch.cat([-k2, k1], -1) * sin
    assert torch.allclose(cache[1][:, :, -1:], v) and torch.allclose(cache[0][:, :, -1:], k)


def rows():
    def res(ms, **extra):
        return {"ms": ms, "ok": True, "gemm_ms": ms / 2, "kernels": 100, **extra}
    train = bench.finish({"workload": "train", "model": "GPT", "shape": "4 blocks", "dtype": "bf16", "impls": {
        bench.BASELINE: res(10.0, loss_gap=0.0), "cute_gemm eager": res(8.0, loss_gap=1e-4)}})
    decode = bench.finish({"workload": "decode", "model": "Llama", "shape": "M 1", "dtype": "bf16", "impls": {
        bench.BASELINE: res(1.0, rel_err=1e-3), "cute_gemm eager": res(1.25, rel_err=2e-3),
        "cute_gemm compile": {"ms": 0.5, "ok": False, "rel_err": 0.5}}})
    return [train, decode]


def test_table_ratios_and_exit_status():
    train, decode = rows()
    assert train["impls"]["cute_gemm eager"]["ratio"] == pytest.approx(1.25)
    assert decode["impls"]["cute_gemm compile"]["ratio"] is None  # a wrong result gets no ratio
    text = bench.format_table([train, decode])
    assert "| train (bf16) | GPT | 4 blocks | 10.000 (1.00x) | 8.000 (1.25x) | - | 5.000 / 4.000 | 100 / 100 | " \
           "loss gap 1.0e-04 |" in text
    assert "| decode (bf16) | Llama | M 1 | 1.000 (1.00x) | 1.250 (0.80x) | WRONG |" in text
    assert "cute_gemm eager: geomean 1.000x torch eager, lowest 0.800x over 2 workloads" in text
    assert bench.any_bad([train, decode]) and not bench.any_bad([train])


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    bench.write_plot(rows(), tmp_path / "models.png", "title")
    assert (tmp_path / "models.png").stat().st_size > 1000


def test_kernel_names_counted_as_gemm():
    assert bench.is_gemm_kernel("void cute_gemm::sm90::gemm_kernel<...>")
    assert bench.is_gemm_kernel("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN")
    assert not bench.is_gemm_kernel("void at::native::elementwise_kernel<128, 4, gemm_like>")
    assert not bench.is_gemm_kernel("flash_fwd_kernel")
    assert not bench.is_gemm_kernel("void cute_gemm::(anonymous namespace)::softmax_xent_kernel<__nv_bfloat16, 8>")


def test_without_a_gpu_it_says_so_in_one_sentence():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-P", str(BENCH)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert run.stderr.strip() == "bench_models: no CUDA GPU is visible, so there is nothing to benchmark."
    assert "Traceback" not in run.stderr + run.stdout


def test_busy_time_counts_overlapping_kernels_once():
    assert bench.busy_us([]) == 0
    assert bench.busy_us([(0, 10), (5, 12), (20, 25)]) == 17  # the PDL overlap 5..10 once
    assert bench.busy_us([(0, 10), (2, 3)]) == 10
