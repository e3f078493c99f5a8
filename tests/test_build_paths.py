"""Header discovery and arch rules of the build (cute_gemm/_build_paths.py), on CPU."""

import importlib.util
from pathlib import Path

import pytest

from cute_gemm import _build_paths as bp

REPO = Path(__file__).resolve().parent.parent


def _fake_cutlass(root: Path) -> Path:
    inc = root / "include"
    (inc / "cute").mkdir(parents=True)
    (inc / "cutlass").mkdir(parents=True)
    (inc / "cute" / "tensor.hpp").write_text("")
    (inc / "cutlass" / "cutlass.h").write_text("")
    return inc


def test_env_var_wins(tmp_path):
    env_inc = _fake_cutlass(tmp_path / "mine")
    _fake_cutlass(tmp_path / "repo" / "third_party" / "cutlass")
    inc, how = bp.find_cutlass_include({"CUTLASS_PATH": str(tmp_path / "mine")}, tmp_path / "repo", lambda: None)
    assert inc == env_inc and how == "$CUTLASS_PATH"


def test_env_var_may_name_the_include_dir(tmp_path):
    env_inc = _fake_cutlass(tmp_path / "mine")
    inc, _ = bp.find_cutlass_include({"CUTLASS_PATH": str(env_inc)}, tmp_path, lambda: None)
    assert inc == env_inc


def test_bad_env_var_is_an_error_not_skipped(tmp_path):
    _fake_cutlass(tmp_path / "repo" / "third_party" / "cutlass")
    with pytest.raises(bp.CutlassNotFound, match="CUTLASS_PATH=.*does not hold CUTLASS headers"):
        bp.find_cutlass_include({"CUTLASS_PATH": str(tmp_path / "nothing")}, tmp_path / "repo", lambda: None)


def test_third_party_before_pypi(tmp_path):
    local = _fake_cutlass(tmp_path / "repo" / "third_party" / "cutlass")
    pypi = _fake_cutlass(tmp_path / "pypi")
    inc, how = bp.find_cutlass_include({}, tmp_path / "repo", lambda: pypi)
    assert inc == local and how == "third_party/cutlass"


def test_pypi_last(tmp_path):
    pypi = _fake_cutlass(tmp_path / "pypi")
    inc, how = bp.find_cutlass_include({}, tmp_path / "repo", lambda: pypi)
    assert inc == pypi and "PyPI" in how


def test_none_found_names_all_three(tmp_path):
    with pytest.raises(bp.CutlassNotFound) as err:
        bp.find_cutlass_include({}, tmp_path, lambda: None)
    msg = str(err.value)
    assert "CUTLASS_PATH" in msg and "third_party" in msg and "nvidia-cutlass" in msg


def test_installed_pypi_package_is_found():
    # The test environment installs nvidia-cutlass for its headers (scripts/setup_env.sh).
    inc = bp._pypi_cutlass_include()
    if inc is None:
        pytest.skip("nvidia-cutlass is not installed in this environment")
    assert (inc / "cute" / "tensor.hpp").is_file()


def test_arch_list_rules():
    assert bp.default_arch_list({"TORCH_CUDA_ARCH_LIST": "8.6"}, [(9, 0)]) == "8.6"
    assert bp.default_arch_list({}, []) == "8.0;9.0a"
    assert bp.default_arch_list({}, [(9, 0), (9, 0)]) == "9.0a"
    assert bp.default_arch_list({}, [(8, 0), (8, 9)]) == "8.0;8.9"


def test_extra_cuda_includes(tmp_path):
    toolkit = tmp_path / "cuda"
    (toolkit / "include").mkdir(parents=True)
    wheel = tmp_path / "nvidia"
    (wheel / "cu13" / "include").mkdir(parents=True)
    (wheel / "cu13" / "include" / "cusparse.h").write_text("")
    assert bp.extra_cuda_includes(str(toolkit), [wheel]) == [wheel / "cu13" / "include"]
    (toolkit / "include" / "cusparse.h").write_text("")
    assert bp.extra_cuda_includes(str(toolkit), [wheel]) == []


def test_cuda_home_skips_wrapper_dirs(tmp_path):
    wrapper_root = tmp_path / "usr_local"
    (wrapper_root / "bin").mkdir(parents=True)
    (wrapper_root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    real = tmp_path / "cuda"
    (real / "bin").mkdir(parents=True)
    (real / "include").mkdir()
    (real / "bin" / "nvcc").write_text("")
    (real / "include" / "cuda_runtime.h").write_text("")
    assert bp.find_cuda_home({"CUDA_HOME": str(real)}, str(wrapper_root / "bin" / "nvcc")) == str(real)
    found = bp.find_cuda_home({}, str(wrapper_root / "bin" / "nvcc"))
    assert found != str(wrapper_root)  # no headers there: falls through to /usr/local/cuda or None


def test_sm90a_detection():
    assert bp.targets_sm90a("8.0;9.0a")
    assert bp.targets_sm90a("9.0a+PTX")
    assert bp.targets_sm90a("8.0 9.0a")
    assert not bp.targets_sm90a("8.0;9.0")
    assert not bp.targets_sm90a("")


def test_config_tables_parse():
    for family in ("sm80", "sm90"):
        names = bp.config_names(REPO / "csrc" / family / "configs.h")
        assert names and len(set(names)) == len(names)


def test_instantiation_files_match_the_tables():
    """csrc/instantiations/ holds exactly the files generate.py writes from the config tables, with
    the text it writes (a missing kernel is a link error; a stale one compiles a kernel nothing
    calls). tests/test_reachable.py checks the set against the choosers."""
    spec = importlib.util.spec_from_file_location("_generate", REPO / "csrc" / "instantiations" / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for family in gen.FAMILIES:
        rows = range(len(bp.config_names(REPO / "csrc" / family / "configs.h")))
        narrow = gen.narrow_configs(REPO / "csrc" / family / "configs.h")
        assert narrow and set(narrow) <= set(rows)
    assert set(gen.row_list(REPO / "csrc" / "sm80" / "configs.h", "kPlainConfigs")) <= set(range(
        len(bp.config_names(REPO / "csrc" / "sm80" / "configs.h"))))
    expected = gen.files()
    on_disk = {p.name: p.read_text() for p in (REPO / "csrc" / "instantiations").glob("*.cu")}
    assert sorted(on_disk) == sorted(expected)
    assert on_disk == expected, "run python csrc/instantiations/generate.py"


def test_readme_counts_the_kernel_files():
    """The README's install section says how many kernel files a build compiles (and so how long
    it takes): the count must follow the instantiation files."""
    files = len(list((REPO / "csrc" / "instantiations").glob("*.cu")))
    assert f"({files} kernel files" in (REPO / "README.md").read_text()
