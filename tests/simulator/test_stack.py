"""README command 1, for real: `make run` on the embedded default (no DATABASE_URL, no
REDIS_URL), watched over HTTP and through its SQLite file, then stopped with Ctrl-C."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import sqlite3
import subprocess
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 60

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def embedded_env(var_dir: Path) -> dict[str, str]:
    """This environment without anything that points the service elsewhere, plus a fast simulator."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL"} and not k.startswith(("DJANGO_", "TAS_", "CELERY_"))}
    env.update({
        "TAS_VAR_DIR": str(var_dir),
        # an accelerated demo: a tick a second, and faults often enough to see one handled at once
        "TAS_SIM_TICK_SECONDS": "1",
        "TAS_SIM_NODE_FAILURES_PER_MINUTE": "30",
    })
    return env


def session_processes(sid: int) -> dict[int, str]:
    """Live processes of a session: pid -> command line (zombies excluded)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            found[int(entry.name)] = cmdline
    return found


def health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as response:
            return json.loads(response.read()) if response.status == 200 else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


def database_facts(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
            return {
                "nodes": one("SELECT count(*) FROM cluster_node"),
                "admitted_with_domains": one(
                    "SELECT count(*) FROM cluster_workload w WHERE w.status = 'Admitted' AND EXISTS "
                    "(SELECT 1 FROM scheduling_assignmentdomain d WHERE d.workload_id = w.id)"),
                "failures_handled": one(
                    "SELECT count(*) FROM scheduling_workloadevent WHERE kind IN ('NodeReplaced', 'Evicted')"),
            }
    except sqlite3.Error:
        return {}  # not migrated yet, or busy: look again


def test_make_run_serves_schedules_survives_a_node_failure_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    var_dir = tmp_path / "var"
    log = tmp_path / "make-run.log"
    # a terminal of its own, as in a shell: Ctrl-C is typed on it, not sent as a signal
    terminal, tty = os.openpty()
    started = time.monotonic()
    # `-o venv`: the venv is the test run's own; everything else is exactly `make run`
    proc = subprocess.Popen(["make", "--no-print-directory", "-o", "venv", "run", f"PORT={port}"],
                            cwd=PROJECT_ROOT, env=embedded_env(var_dir), stdin=tty,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(tty)
    seen: set[int] = set()
    try:
        facts: dict[str, int] = {}
        healthy = None
        while time.monotonic() - started < DEADLINE_SECONDS:
            assert proc.poll() is None, f"make run exited early ({proc.returncode}):\n{log.read_text()[-5000:]}"
            seen.update(session_processes(proc.pid))
            healthy = healthy or health(port)
            facts = database_facts(var_dir / "db.sqlite3")
            if healthy and facts.get("nodes") and facts.get("admitted_with_domains") and \
                    facts.get("failures_handled"):
                break
            time.sleep(1)
        elapsed = time.monotonic() - started
        print(f"stack ready in {elapsed:.1f}s: {facts}")
        assert healthy is not None, f"/healthz never answered 200:\n{log.read_text()[-5000:]}"
        assert healthy["database"] == {"ok": True, "detail": "sqlite"}
        assert healthy["broker"] == {"ok": True, "detail": "filesystem"}
        assert facts.get("nodes") == 64, facts
        assert facts.get("admitted_with_domains"), f"no admitted workload after {elapsed:.0f}s: {facts}"
        assert facts.get("failures_handled"), f"no node failure handled after {elapsed:.0f}s: {facts}\n" \
                                              f"{log.read_text()[-5000:]}"
        seen.update(session_processes(proc.pid))
    finally:
        if proc.poll() is None:
            os.write(terminal, b"\x03")  # Ctrl-C: the terminal signals its foreground process group
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in session_processes(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise
        finally:
            os.close(terminal)

    out = log.read_text()
    assert code == 0, out[-5000:]  # make's status: the supervisor's, not an interrupt
    assert "Interrupt" not in out
    assert len(seen) >= 5, seen  # make, the supervisor, web, worker, beat
    for prefix in ("web    | ", "worker | ", "beat   | "):
        assert prefix in out
    assert "run    | all stopped" in out
    # a log a newcomer can read: what the service did, once, without noise or false alarms
    assert "worker | " in out and "simulator tick" in out and "scheduling pass" in out
    assert "] received" not in out and "] succeeded in" not in out and "Sending due task" not in out
    assert "No hostname was supplied" not in out
    assert "another worker is the leader" not in out  # there is only one
    assert len([line for line in out.splitlines() if "64 nodes; created" in line]) == 1, out[:3000]
    deadline = time.monotonic() + 10
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not session_processes(proc.pid), f"left running: {session_processes(proc.pid)}"
