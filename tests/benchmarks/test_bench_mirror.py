"""benchmarks/bench_mirror.py run tiny, in a process of its own (it makes its own database):
its checks hold at any size -- every listed object is stored, a replayed event changes
nothing, no heartbeat is stored as a change and a node re-list rewrites only the nodes that
changed more than their heartbeats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services


def test_bench_mirror_runs_and_its_checks_hold(tmp_path):
    env = {**os.environ, "TAS_VAR_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_mirror.py"), "--nodes", "300", "--pods", "900",
         "--updates", "200", "--heartbeats", "300", "--database", f"tas_bench_mirror_{os.getpid()}"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "heartbeats: 0 of 300 stored as changes" in done.stdout
    assert "replay applied 0" in done.stdout
    [relist] = [line for line in done.stdout.splitlines() if line.startswith("node relist: ")]
    assert "'created': 0" in relist and "'deleted': 0" in relist and "'total': 300" in relist
