"""The scripts of bench/, loaded as modules for their CPU tests (bench/ is not a package)."""

import importlib.util
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"


def load(name: str):
    """(path, module) of bench/<name>.py."""
    path = BENCH_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def usage_error(module, capsys, argv) -> str:
    """What the script's argument parser prints for argv, which it must refuse (exit status 2)."""
    with pytest.raises(SystemExit) as exit_:
        module.parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err
