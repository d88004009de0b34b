"""A small process supervisor for the embedded stack (`manage.py tas_run`).

It starts each program, prefixes every line it prints with the program's name, and keeps
them together: the first SIGINT or SIGTERM (Ctrl-C) stops them all and the supervisor exits
0 once every one is gone; a program that dies on its own stops the others and the
supervisor exits 1. A second Ctrl-C kills whatever is still running.

Each program runs in its own process group, so a Ctrl-C on the terminal reaches only the
supervisor, which sends every program exactly one stop signal (a Celery worker that got
two would abandon its task). On Linux each program also gets SIGTERM if the supervisor
itself is killed, so nothing outlives it.

Started from a terminal, the supervisor also takes the terminal's foreground for as long as
it runs (`terminal_foreground`), as a job-control shell does for a job: a Ctrl-C then
reaches it alone and not `make` above it, which would otherwise die of the signal and
report an interrupt however cleanly everything stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

PR_SET_PDEATHSIG = 1
_COLORS = ("36", "33", "35", "32", "34", "31")


@dataclass
class Program:
    name: str
    argv: Sequence[str]
    # what asks it to finish its work and exit (Celery: SIGTERM is a warm shutdown;
    # Django's runserver exits cleanly on SIGINT)
    stop_signal: int = signal.SIGTERM
    env: dict[str, str] | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)
    pump: threading.Thread | None = field(default=None, repr=False)


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when the supervisor dies."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)

    def hook() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the hook ran
            os._exit(1)

    return hook


@contextlib.contextmanager
def terminal_foreground(stream: TextIO | None = None) -> Iterator[bool]:
    """While the block runs, this process leads its own process group and that group is the
    terminal's foreground; yields whether it is. Does nothing unless `stream` (stdin) is the
    terminal and this process is in its foreground group already."""
    stream = sys.stdin if stream is None else stream
    try:
        fd = stream.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            fd = -1
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        yield False
        return
    previous = os.getpgrp()
    # a process group outside the foreground that touches the terminal gets SIGTTOU
    ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.setpgid(0, 0)
        os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        signal.signal(signal.SIGTTOU, ttou)
        yield False
        return
    signal.signal(signal.SIGTTOU, ttou)
    try:
        yield True
    finally:
        ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, previous)  # hand the terminal back (to make, or the shell)
        signal.signal(signal.SIGTTOU, ttou)


class Supervisor:
    def __init__(self, programs: Sequence[Program], *, out: TextIO | None = None, grace_seconds: float = 20.0,
                 color: bool | None = None) -> None:
        self.programs = list(programs)
        self.out = out or sys.stdout
        self.grace_seconds = grace_seconds
        self.color = self.out.isatty() if color is None else color
        self.width = max([len(p.name) for p in self.programs] + [len("run")])
        # re-entrant: nothing prints from a signal handler, but a lock held by the main thread
        # when a signal arrives must never deadlock it
        self._lock = threading.RLock()
        self._stop_requested = threading.Event()
        self._signals = 0

    # ------------------------------------------------------------ output

    def prefix(self, name: str, index: int) -> str:
        label = f"{name:<{self.width}} | "
        if self.color:
            return f"\033[{_COLORS[index % len(_COLORS)]}m{label}\033[0m"
        return label

    def say(self, message: str) -> None:
        self.write(self.prefix("run", len(self.programs)), message)

    def write(self, prefix: str, line: str) -> None:
        with self._lock:
            try:
                self.out.write(prefix + line.rstrip("\n") + "\n")
                self.out.flush()
            except (BrokenPipeError, ValueError):
                pass  # nobody reads our output any more; keep supervising

    def _pump(self, program: Program, index: int) -> None:
        assert program.process is not None and program.process.stdout is not None
        prefix = self.prefix(program.name, index)
        for line in program.process.stdout:
            self.write(prefix, line)

    # ------------------------------------------------------------ signals

    def _on_signal(self, signum: int, _frame: object) -> None:
        # no output here: the main loop reports what happened
        self._signals += 1
        if self._signals > 1:
            for program in self.programs:
                self._kill(program, signal.SIGKILL)
        self._stop_requested.set()

    # ------------------------------------------------------------ processes

    def start(self, program: Program, index: int) -> None:
        env = {**os.environ, **(program.env or {}), "PYTHONUNBUFFERED": "1"}
        program.process = subprocess.Popen(
            list(program.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, text=True, errors="replace", bufsize=1, process_group=0,
            preexec_fn=_die_with_parent(os.getpid()))
        program.pump = threading.Thread(target=self._pump, args=(program, index), name=f"pump {program.name}",
                                        daemon=True)
        program.pump.start()
        self.say(f"started {program.name} (pid {program.process.pid}): {' '.join(program.argv)}")

    def _kill(self, program: Program, sig: int) -> None:
        process = program.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig == signal.SIGKILL:
                os.killpg(process.pid, sig)  # and anything it started
            else:
                os.kill(process.pid, sig)

    def running(self) -> list[Program]:
        return [p for p in self.programs if p.process is not None and p.process.poll() is None]

    def stop_all(self) -> None:
        for program in self.running():
            self.say(f"stopping {program.name} ({signal.Signals(program.stop_signal).name})")
            self._kill(program, program.stop_signal)
        deadline = time.monotonic() + self.grace_seconds
        signals_seen = self._signals
        while self.running() and time.monotonic() < deadline:
            if self._signals > max(signals_seen, 1):
                self.say("second interrupt: killed everything")
                signals_seen = self._signals
            time.sleep(0.1)
        for program in self.running():
            self.say(f"{program.name} did not stop within {self.grace_seconds:.0f}s: killing it")
            self._kill(program, signal.SIGKILL)
        for program in self.programs:
            if program.process is not None:
                program.process.wait()
                # the group may hold children of the program (e.g. a worker's pool): none may stay
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(program.process.pid, signal.SIGKILL)
            if program.pump is not None:
                program.pump.join(timeout=5)

    def run(self) -> int:
        """Start every program and supervise them; returns the exit status for the supervisor."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        failed: Program | None = None
        try:
            for index, program in enumerate(self.programs):
                if self._stop_requested.is_set():
                    break
                try:
                    self.start(program, index)
                except OSError as exc:
                    self.say(f"cannot start {program.name}: {exc}")
                    failed = program
                    break
            while failed is None and not self._stop_requested.is_set():
                failed = next((p for p in self.programs if p.process is not None and p.process.poll() is not None),
                              None)
                if failed is None:
                    self._stop_requested.wait(0.2)
            if failed is None:
                self.say("interrupted: stopping everything")
            elif failed.process is not None:
                self.say(f"{failed.name} exited with status {failed.process.returncode}; stopping the others")
            self.stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if failed is not None:
            return 1
        self.say("all stopped")
        return 0


__all__ = ["Program", "Supervisor", "terminal_foreground"]
