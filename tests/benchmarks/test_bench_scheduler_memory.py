"""benchmarks/bench_scheduler_memory.py's sampler: the summed Pss of this process and its
descendants, children of children included, and their count."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scheduler_memory as bench  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc only")


def test_the_sampler_counts_children_and_their_children():
    me = bench.pss_mib(os.getpid())
    assert me is not None and me > 0
    others = set(bench.descendants(os.getpid()))  # what earlier tests left running (a browser's driver)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that makes a grandchild holding 64 MiB of its own, then waits
        try:
            if os.fork() == 0:
                held = bytearray(64 * 1024 * 1024)
                held[::4096] = b"x" * len(held[::4096])
                os.write(write, b"1")
                time.sleep(30)
                os._exit(0)
            time.sleep(30)
        finally:
            os._exit(0)
    ours: set[int] = set()
    try:
        assert os.read(read, 1) == b"1"
        with bench.TreeSampler() as sampler:
            time.sleep(0.3)
        ours = set(bench.descendants(os.getpid())) - others
        assert pid in ours and len(ours) == 2  # the child and its child
        assert sampler.most_children >= len(others) + 2
        assert sampler.peak_mib >= me + 60  # the grandchild's own 64 MiB
    finally:
        for child in ours or {pid}:
            os.kill(child, 9)
        os.waitpid(pid, 0)
    assert bench.pss_mib(pid) is None  # gone
