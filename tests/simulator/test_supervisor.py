"""The supervisor of `make run`: prefixed output, one stop signal each, nothing left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, signal, sys, time
name, mode = sys.argv[1], sys.argv[2]

def stop(signum, frame):
    print(f"{name} got {signal.Signals(signum).name}", flush=True)
    sys.exit(0)

if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
print(f"{name} pid={os.getpid()}", flush=True)
if mode == "die":
    time.sleep(1)
    sys.exit(3)
while True:
    time.sleep(0.1)
"""

SUPERVISOR = r"""
import signal, sys
from tasweb.simulator.supervisor import Program, Supervisor
child, grace, *specs = sys.argv[1:]
programs = []
for spec in specs:
    name, mode = spec.split(":")
    stop = signal.SIGINT if name == "web" else signal.SIGTERM
    programs.append(Program(name, [sys.executable, child, name, mode], stop_signal=stop))
sys.exit(Supervisor(programs, grace_seconds=float(grace), color=False).run())
"""


def alive(pid: int) -> bool:
    """Running and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


class Run:
    def __init__(self, tmp_path: Path, *specs: str, grace: float = 10) -> None:
        child = tmp_path / "child.py"
        child.write_text(CHILD)
        self.log = tmp_path / "out.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SUPERVISOR, str(child), str(grace), *specs], cwd=PROJECT_ROOT,
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.count = len(specs)

    @property
    def output(self) -> str:
        return self.log.read_text()

    def child_pids(self, timeout: float = 20) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = [int(p) for p in re.findall(r"\| \w+ pid=(\d+)", self.output)]
            if len(pids) == self.count:
                return pids
            time.sleep(0.05)
        pytest.fail(f"the programs did not all start:\n{self.output}")

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout=timeout)


def test_ctrl_c_stops_every_program_once_and_exits_0(tmp_path):
    run = Run(tmp_path, "web:graceful", "worker:graceful", "beat:graceful")
    pids = run.child_pids()

    os.killpg(run.proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C

    assert run.wait() == 0
    out = run.output
    assert "web    | web got SIGINT" in out
    assert "worker | worker got SIGTERM" in out
    assert "beat   | beat got SIGTERM" in out
    assert out.count("got SIG") == 3  # one stop signal each, though the terminal signalled the group
    assert "run    | all stopped" in out
    assert not any(alive(pid) for pid in pids)


def test_sigterm_to_the_supervisor_stops_everything_too(tmp_path):
    run = Run(tmp_path, "a:graceful", "b:graceful")
    pids = run.child_pids()

    run.proc.send_signal(signal.SIGTERM)

    assert run.wait() == 0
    assert not any(alive(pid) for pid in pids)


def test_a_program_that_dies_stops_the_others_and_the_supervisor_fails(tmp_path):
    run = Run(tmp_path, "web:graceful", "worker:die", "beat:graceful")
    pids = run.child_pids()

    assert run.wait() == 1
    out = run.output
    assert "run    | worker exited with status 3; stopping the others" in out
    assert "web    | web got SIGINT" in out
    assert "beat   | beat got SIGTERM" in out
    assert not any(alive(pid) for pid in pids)


def test_a_program_that_ignores_its_stop_signal_is_killed_after_the_grace_period(tmp_path):
    run = Run(tmp_path, "stubborn:ignore", "polite:graceful", grace=1)
    pids = run.child_pids()

    os.killpg(run.proc.pid, signal.SIGINT)

    assert run.wait() == 0
    assert "stubborn did not stop within 1s: killing it" in run.output
    assert not any(alive(pid) for pid in pids)


def test_programs_do_not_outlive_a_killed_supervisor(tmp_path):
    run = Run(tmp_path, "a:graceful", "b:graceful")
    pids = run.child_pids()

    run.proc.kill()
    run.wait()

    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)
