"""The autotune cache's file handling (csrc/autotune.cpp), on the CPU: the file module is built with
the host compiler beside a small driver, and each scenario runs it as its own process. A hostile or
shared folder (a FIFO, planted links, a folder others can write, a lock held elsewhere, another
user's file) costs the cache, never a hang or a write through a link."""

import fcntl
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from host_cpp import CSRC, build, needs_cxx

pytestmark = needs_cxx

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <string>
#include "autotune.h"
// find PATH KEY           -> "hit CFG SPLITS" or "miss"
// remember PATH KEY CFG S -> "ok" or "failed"
int main(int argc, char** argv) {
  using namespace cute_gemm::autotune;
  const std::string cmd = argv[1];
  if (cmd == "find") {
    const auto c = find(argv[2], argv[3]);
    if (c) std::printf("hit %d %d\n", c->cfg, c->splits); else std::printf("miss\n");
  } else if (cmd == "remember") {
    std::printf(remember(argv[2], argv[3], {std::atoi(argv[4]), std::atoi(argv[5]), 1.0}) ? "ok\n" : "failed\n");
  } else if (cmd == "path") {
    std::printf("%s\n", cache_path(argv[2], argv[3]).c_str());
  }
}
"""
HEADER = "cute_gemm-autotune 1 "


@pytest.fixture(scope="module")
def tool(tmp_path_factory):
    folder = tmp_path_factory.mktemp("autotune_tool")
    src = folder / "driver.cpp"
    src.write_text(DRIVER)
    exe = build(src, CSRC / "autotune.cpp")

    def run(*args, timeout=20, env=None):
        return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                              check=True, env=env).stdout.strip()
    return run


@pytest.fixture
def cache(tmp_path):
    """A fresh private cache folder (0700) and the file's path in it."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return folder / "autotune-GPU-dev-0000.txt"


def valid_file(path: Path, cfg=3, splits=2) -> str:
    return f"{HEADER}{path.name}\nkey\t{cfg} {splits} 1.5\n"


def test_round_trip_in_a_new_private_folder(tool, tmp_path):
    path = tmp_path / "made" / "here" / "autotune-GPU-dev-0000.txt"
    assert tool("remember", path, "key", 5, 2) == "ok"
    assert tool("find", path, "key") == "hit 5 2"
    assert tool("find", path, "other") == "miss"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().splitlines()[0] == HEADER + path.name
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".lock"], "a temporary file left"


def test_entries_of_several_writers_merge(tool, cache):
    for i in range(5):
        assert tool("remember", cache, f"k{i}", i, 1) == "ok"
    assert [tool("find", cache, f"k{i}") for i in range(5)] == [f"hit {i} 1" for i in range(5)]


def test_a_fifo_at_the_cache_path_does_not_block(tool, cache):
    os.mkfifo(cache)
    start = time.monotonic()
    assert tool("find", cache, "key", timeout=10) == "miss"
    assert tool("remember", cache, "key", 1, 1, timeout=10) == "ok"  # renamed over the FIFO
    assert time.monotonic() - start < 8
    assert cache.is_file() and tool("find", cache, "key") == "hit 1 1"


def test_links_are_not_followed(tool, cache, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(valid_file(cache))
    cache.symlink_to(victim)
    assert tool("find", cache, "key") == "miss", "read through a link"
    assert tool("remember", cache, "key", 1, 1) == "ok"
    assert victim.read_text() == valid_file(cache), "wrote through a link"
    assert not cache.is_symlink()
    # A link planted at the lock's name: no lock, so no write, and the link's target untouched.
    other = cache.with_name("autotune-GPU-dev-1111.txt")
    lock_victim = tmp_path / "lock_victim"
    lock_victim.write_text("keep")
    Path(str(other) + ".lock").symlink_to(lock_victim)
    assert tool("remember", other, "key", 1, 1) == "failed"
    assert lock_victim.read_text() == "keep" and not other.exists()


@pytest.mark.parametrize("kind", ["world_writable", "group_writable", "link"])
def test_a_folder_others_can_write_is_not_used(tool, cache, tmp_path, kind):
    folder = cache.parent
    (folder / cache.name).write_text(valid_file(cache))
    if kind == "link":
        linked = tmp_path / "linked"
        linked.symlink_to(folder, target_is_directory=True)
        path = linked / cache.name
    else:
        folder.chmod(0o777 if kind == "world_writable" else 0o770)
        path = cache
    assert tool("find", path, "key") == "miss"
    assert tool("remember", path, "key", 1, 1) == "failed"
    assert cache.read_text() == valid_file(cache)


def test_a_lock_held_elsewhere_costs_the_write_not_the_call(tool, cache):
    lock = open(str(cache) + ".lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        start = time.monotonic()
        assert tool("remember", cache, "key", 1, 1, timeout=30) == "failed"
        waited = time.monotonic() - start
        assert 1.5 < waited < 10, waited
    finally:
        lock.close()
    assert tool("remember", cache, "key", 1, 1) == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_is_not_read(tool, cache):
    cache.write_text(valid_file(cache))
    assert tool("find", cache, "key") == "hit 3 2"
    os.chown(cache, 65534, 65534)
    assert tool("find", cache, "key") == "miss"


def test_odd_lines_are_ignored(tool, cache):
    cache.write_text(f"{HEADER}{cache.name}\na\t1 1 1.0\nb\t1 x 1.0\nc 1 1 1.0\nd\t99 1 1.0\ne\t1 0 1.0\nf\t2 4 3.5\n")
    assert [tool("find", cache, k) for k in "abcdef"] == ["hit 1 1", "miss", "miss", "miss", "miss", "hit 2 4"]
    cache.write_text("cute_gemm-autotune 0 other.txt\na\t1 1 1.0\n")
    assert tool("find", cache, "a") == "miss"


def test_default_folder_without_a_home(tool):
    env = {k: v for k, v in os.environ.items() if k not in ("CUTE_GEMM_CACHE_DIR", "XDG_CACHE_HOME", "HOME")}
    path = Path(tool("path", "NVIDIA H200", "abcd", env=env))
    assert path.parent.name == f"cute_gemm-{os.geteuid()}"
    assert path.name == "autotune-NVIDIA_H200-dev-abcd.txt"
