"""The project's files speak of the project: no development-process history (work sessions, runs
on borrowed machines, review stories) and no paths outside the repository in any tracked text
file. A measurement is cited by its GPU, date and docs/tuning.md topic instead."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = re.compile(r"\bsessions? [0-9]|\bdevice runs?\b|\blent\b|\.\./shared|\breview mends\b|\bruns? [0-9]+(-[0-9]+)?[),]", re.IGNORECASE)
BINARY = {".png", ".jpg", ".whl", ".so", ".o"}


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout of the repository")
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_no_development_history_in_tracked_files():
    hits = []
    for path in tracked_files():
        if path.suffix in BINARY or not path.is_file() or path.name == Path(__file__).name:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not hits, "development history in the project's files:\n" + "\n".join(hits[:40])
