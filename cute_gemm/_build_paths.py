"""Where the build finds CUTLASS, the CUDA headers torch needs, and which arches it targets.

Pure Python with no torch import: setup.py loads this file directly (the package is not
importable before it is built) and tests/test_build_paths.py checks the rules on CPU.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

CUTLASS_ENV = "CUTLASS_PATH"
# Headers whose presence proves a directory is a CUTLASS include root.
_CUTLASS_MARKERS = ("cute/tensor.hpp", "cutlass/cutlass.h")
# A header torch's headers include that some CUDA toolkit installs lack.
_TORCH_NEEDS = "cusparse.h"


class CutlassNotFound(RuntimeError):
    pass


def _is_cutlass_include(path: Path) -> bool:
    return all((path / m).is_file() for m in _CUTLASS_MARKERS)


def _include_of(root: Path) -> Path | None:
    """A checkout root (holding include/) or an include directory itself."""
    for cand in (root / "include", root):
        if _is_cutlass_include(cand):
            return cand
    return None


def _pypi_cutlass_include() -> Path | None:
    # find_spec on a top-level name locates it without executing it (cutlass_library's
    # __init__ imports cuda-python, which a --no-deps install lacks).
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        cand = Path(loc) / "source" / "include"
        if _is_cutlass_include(cand):
            return cand
    return None


def find_cutlass_include(
    env: Mapping[str, str] | None = None,
    repo_root: Path | str | None = None,
    pypi_lookup=_pypi_cutlass_include,
) -> tuple[Path, str]:
    """Return (include_dir, how_found). Order: $CUTLASS_PATH, third_party/cutlass, PyPI."""
    env = os.environ if env is None else env
    repo_root = Path(__file__).resolve().parent.parent if repo_root is None else Path(repo_root)
    tried = []

    user = env.get(CUTLASS_ENV)
    if user:
        inc = _include_of(Path(user).expanduser())
        if inc is None:
            # A variable the user set on purpose must not be skipped silently.
            raise CutlassNotFound(
                f"{CUTLASS_ENV}={user} does not hold CUTLASS headers: expected "
                f"{' and '.join(_CUTLASS_MARKERS)} under {user}/include or {user}"
            )
        return inc, f"${CUTLASS_ENV}"
    tried.append(f"${CUTLASS_ENV} (unset)")

    local = repo_root / "third_party" / "cutlass"
    inc = _include_of(local)
    if inc is not None:
        return inc, "third_party/cutlass"
    tried.append(f"{local} (no checkout)")

    inc = pypi_lookup()
    if inc is not None:
        return inc, "nvidia-cutlass (PyPI)"
    tried.append("the PyPI package nvidia-cutlass (not installed)")

    raise CutlassNotFound(
        "CUTLASS headers not found. Tried, in order: " + "; ".join(tried) + ". Fix one: "
        f"set {CUTLASS_ENV} to a CUTLASS checkout, clone CUTLASS into third_party/cutlass, "
        "or `pip install --no-deps nvidia-cutlass==4.2.0.0`."
    )


def find_cuda_home(env: Mapping[str, str] | None = None, nvcc_on_path: str | None = None) -> str | None:
    """The CUDA toolkit root: $CUDA_HOME / $CUDA_PATH, else the nvcc on PATH, else /usr/local/cuda.

    torch guesses the root as the parent of the nvcc on PATH, which is wrong when that nvcc is a
    wrapper script (/usr/local/bin/nvcc -> root /usr/local, with no CUDA headers). A candidate
    counts only if it holds both bin/nvcc and include/cuda_runtime.h.
    """
    env = os.environ if env is None else env
    if nvcc_on_path is None:
        import shutil

        nvcc_on_path = shutil.which("nvcc")
    candidates = [env.get("CUDA_HOME"), env.get("CUDA_PATH")]
    if nvcc_on_path:
        candidates.append(str(Path(nvcc_on_path).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for cand in candidates:
        if cand and (Path(cand) / "bin" / "nvcc").exists() and (Path(cand) / "include" / "cuda_runtime.h").is_file():
            return cand
    return None


def _nvidia_wheel_roots() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def extra_cuda_includes(cuda_home: str | None, nvidia_roots: Iterable[Path] | None = None) -> list[Path]:
    """Include dirs from torch's nvidia-* wheels, when the toolkit lacks headers torch includes."""
    if cuda_home and (Path(cuda_home) / "include" / _TORCH_NEEDS).is_file():
        return []
    roots = _nvidia_wheel_roots() if nvidia_roots is None else list(nvidia_roots)
    found = []
    for root in roots:
        # CUDA 13 wheels put every library under nvidia/cu13/include; CUDA 12 wheels use
        # one directory per library (nvidia/cusparse/include, ...).
        for inc in sorted(root.glob("*/include")):
            if (inc / _TORCH_NEEDS).is_file() and inc not in found:
                found.append(inc)
    return found


def default_arch_list(env: Mapping[str, str], capabilities: Sequence[tuple[int, int]]) -> str:
    """TORCH_CUDA_ARCH_LIST to build for: the user's, else the visible GPUs', else 8.0 and 9.0a.

    Hopper is always built as 9.0a: WGMMA and setmaxnreg exist only in the arch-specific target.
    """
    user = env.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if user:
        return user
    if not capabilities:
        return "8.0;9.0a"
    archs = []
    for major, minor in sorted(set(capabilities)):
        arch = f"{major}.{minor}" + ("a" if (major, minor) == (9, 0) else "")
        archs.append(arch)
    return ";".join(archs)


def targets_sm90a(arch_list: str) -> bool:
    """Whether a TORCH_CUDA_ARCH_LIST builds sm_90a machine code (the WGMMA kernels need it)."""
    return any(a.strip().lower().startswith("9.0a") for a in arch_list.replace(" ", ";").split(";"))


def config_names(configs_h: Path | str) -> list[str]:
    """Names of the rows of kConfigs in a csrc/<family>/configs.h, in index order."""
    import re

    rows = re.findall(r'/\*\s*(\d+)\s*\*/\s*\{[^}]*"([^"]+)"\s*\}', Path(configs_h).read_text())
    if [int(i) for i, _ in rows] != list(range(len(rows))) or not rows:
        raise ValueError(f"{configs_h}: kConfigs rows must be numbered /* 0 */, /* 1 */, ... one per line")
    return [name for _, name in rows]
