"""The scheduler's leader lock: at most one process runs a scheduling pass at a time.

Two passes running at once would both admit against the same free capacity, so every
pass runs while holding this lock (DESIGN.md: one scheduler, the leader, as in Kueue).
Which lock depends on the deployment:

* Redis (REDIS_URL set): a redis-py lock, a key holding this holder's random token with an
  expiry of `TAS_SCHEDULER_LOCK_TTL` seconds (6 by default). While the pass runs, a watchdog thread
  extends it every third of the TTL with redis-py's `reacquire` (a Lua script that resets
  the expiry only while the key still holds this holder's token). A holder that dies, or
  hangs, stops renewing and its lock lapses within the TTL; a waiting worker then takes
  over. Right before a pass commits it confirms the lock (one more Lua-checked renewal,
  which also buys a full TTL for the commit): a holder that lost the lock (paused past the
  expiry, Redis restarted, the watchdog could not reach Redis for a whole TTL) raises
  `LeadershipLost` inside the transaction, so its results roll back instead of landing
  next to the new leader's.
* No Redis (the embedded default, one machine): an exclusive `fcntl.flock` on
  `VAR_DIR/scheduler.lock`. The kernel drops the lock when the holding process exits or is
  killed, which is this lock's expiry; there is nothing to renew and no service to run.

Keys are namespaced by the database the mirror lives in, so deployments (or test runs)
that share a Redis but not a database never wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import redis
from django.conf import settings
from redis.exceptions import LockError, LockNotOwnedError, RedisError

logger = logging.getLogger(__name__)

DEFAULT_LOCK_TTL = 6.0
DEFAULT_LOCK_WAIT = 2.0


class LeadershipLost(Exception):
    """The scheduler lock was lost while a pass held it; the pass must not commit."""


def lock_ttl() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_LOCK_TTL", DEFAULT_LOCK_TTL))


def lock_wait() -> float:
    return float(getattr(settings, "TAS_SCHEDULER_LOCK_WAIT", DEFAULT_LOCK_WAIT))


def pass_time_limit() -> float:
    """TAS_SCHEDULER_PASS_TIME_LIMIT in seconds (0: none), the limit of a pass and of an estimate."""
    return float(getattr(settings, "TAS_SCHEDULER_PASS_TIME_LIMIT", 0) or 0)


def scheduler_namespace() -> str:
    """The database the mirror lives in: "host:port/name" (or the SQLite file)."""
    db = settings.DATABASES["default"]
    host = db.get("HOST") or ""
    port = db.get("PORT") or ""
    where = f"{host}:{port}/" if host else ""
    return f"{where}{db.get('NAME')}"


def scheduler_key(suffix: str) -> str:
    """A Redis or cache key of the scheduler for this deployment's database."""
    return f"tasweb:scheduling:{scheduler_namespace()}:{suffix}"


class LeaderLock(ABC):
    """One attempt at being the leader: acquire, confirm while working, release."""

    kind: str = ""

    @abstractmethod
    def acquire(self, *, wait: float) -> bool:
        """Try for up to `wait` seconds; True when this holder is now the leader."""

    @abstractmethod
    def confirm(self) -> None:
        """Raise LeadershipLost unless this holder still holds the lock."""

    @abstractmethod
    def release(self) -> None:
        """Give the lock up (never raises: an unreachable Redis lets it expire instead)."""


@functools.cache
def _redis_client(url: str) -> redis.Redis:
    # Bounded timeouts, well under the renewal interval (a third of the TTL): a renewal stuck
    # on a dead connection must fail in time to be retried before the lock expires. redis-py
    # resets its pool in a forked child (prefork workers).
    return redis.Redis.from_url(url, socket_timeout=1.5, socket_connect_timeout=1.5, socket_keepalive=True,
                                health_check_interval=10)


class RedisLeaderLock(LeaderLock):
    kind = "redis"

    def __init__(self, *, client: redis.Redis, name: str, ttl: float) -> None:
        self.name = name
        self.ttl = ttl
        # not thread-local: the watchdog thread renews with the token the acquiring thread got
        self._lock = client.lock(name, timeout=ttl, sleep=0.05, thread_local=False)
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._renewed_at = 0.0
        self._watchdog: threading.Thread | None = None

    def acquire(self, *, wait: float) -> bool:
        acquired = self._lock.acquire(blocking=wait > 0, blocking_timeout=wait if wait > 0 else None)
        if acquired:
            self._renewed_at = time.monotonic()
            self._watchdog = threading.Thread(target=self._renew, name=f"leader-lock {self.name}", daemon=True)
            self._watchdog.start()
        return bool(acquired)

    def _renew(self) -> None:
        interval = self.ttl / 3
        while not self._stop.wait(interval):
            try:
                self._lock.reacquire()
                self._renewed_at = time.monotonic()
            except LockNotOwnedError:
                logger.warning("scheduler lock %s was taken over or expired; this pass will not commit", self.name)
                self._lost.set()
                return
            except (RedisError, LockError) as exc:
                # Redis unreachable for a moment: retry on the next tick, but once a whole TTL has
                # passed without a renewal the key may have expired and another leader started.
                if time.monotonic() - self._renewed_at >= self.ttl:
                    logger.warning("scheduler lock %s could not be renewed for %.0fs (%s); giving it up",
                                   self.name, self.ttl, exc)
                    self._lost.set()
                    return

    def confirm(self) -> None:
        if self._lost.is_set():
            raise LeadershipLost(f"scheduler lock {self.name}: lost while the pass ran")
        try:
            self._lock.reacquire()
        except (RedisError, LockError) as exc:
            self._lost.set()
            raise LeadershipLost(f"scheduler lock {self.name}: cannot confirm it is still held ({exc})") from exc
        self._renewed_at = time.monotonic()

    def release(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=self.ttl)
            self._watchdog = None
        try:
            self._lock.release()
        except LockError:
            pass  # not ours any more (expired, or Redis restarted empty): nothing to give up
        except RedisError as exc:
            logger.warning("scheduler lock %s: release failed (%s); it expires within %.0fs", self.name, exc,
                           self.ttl)


class FileLeaderLock(LeaderLock):
    kind = "file"

    def __init__(self, *, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, wait: float) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
                continue
            self._fd = fd
            # who holds it, for a person looking at the file; the lock itself is the flock
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return True

    def confirm(self) -> None:
        if self._fd is None:
            raise LeadershipLost(f"scheduler lock {self.path}: not held")

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None


def _scheduler_lock_name() -> str:
    """What identifies this deployment's scheduler lock: its Redis key, or its file."""
    if getattr(settings, "REDIS_URL", None):
        return scheduler_key("leader")
    return str(Path(settings.VAR_DIR) / "scheduler.lock")


def scheduler_lock() -> LeaderLock:
    """A fresh (not yet acquired) lock of the kind this deployment uses."""
    if getattr(settings, "REDIS_URL", None):
        return RedisLeaderLock(client=_redis_client(settings.REDIS_URL), name=_scheduler_lock_name(),
                               ttl=lock_ttl())
    return FileLeaderLock(path=Path(_scheduler_lock_name()))


# The scheduler locks this process holds through `leadership`, by name. One process can run
# two passes at once: with a broker that has no event loop (the embedded filesystem one),
# Celery's worker runs a task sent with a countdown (a change-triggered pass) from its timer
# thread, next to the task its main thread runs (a beat-triggered pass). The second pass then
# finds the lock held by the first one, which is not another worker.
_held_here: Counter[str] = Counter()
_held_here_guard = threading.Lock()


_mine = threading.local()  # this thread's own `leadership` blocks, by name


def held_in_this_process() -> bool:
    """Whether a `leadership` block of another thread of this process holds (or is getting)
    the scheduler lock right now."""
    name = _scheduler_lock_name()
    with _held_here_guard:
        return _held_here[name] - getattr(_mine, "counts", Counter())[name] > 0


@contextlib.contextmanager
def leadership(*, wait: float | None = None) -> Iterator[LeaderLock | None]:
    """Hold the scheduler lock for the block: yields the lock, or None when another holder
    (another process, or another pass of this one: `held_in_this_process`) kept it for
    `wait` seconds (default TAS_SCHEDULER_LOCK_WAIT)."""
    lock = scheduler_lock()
    name = _scheduler_lock_name()
    # counted from before the lock is asked for until after it is released: a pass of another
    # thread that fails to get it in between (while this one writes its pid into the file,
    # say) still learns the holder was this process
    mine = _mine.__dict__.setdefault("counts", Counter())
    with _held_here_guard:
        _held_here[name] += 1
        mine[name] += 1
    try:
        if not lock.acquire(wait=lock_wait() if wait is None else wait):
            yield None
            return
        try:
            yield lock
        finally:
            lock.release()
    finally:
        with _held_here_guard:
            _held_here[name] -= 1
            mine[name] -= 1
            if not _held_here[name]:
                del _held_here[name]
            if not mine[name]:
                del mine[name]


__all__ = [
    "FileLeaderLock",
    "LeaderLock",
    "LeadershipLost",
    "RedisLeaderLock",
    "held_in_this_process",
    "leadership",
    "lock_ttl",
    "lock_wait",
    "pass_time_limit",
    "scheduler_key",
    "scheduler_lock",
]
