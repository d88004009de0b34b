"""The Kubernetes mirror: every mirrored kind listed, then watched, in a thread of its own.

Per kind:

1. find the API version the server serves (Kueue's kinds: v1beta2, else v1beta1);
2. resume from the kind's checkpoint, or list it (paginated with limit/continue) and make
   the mirror equal to the list;
3. watch from that resourceVersion with bookmarks: ADDED/MODIFIED upsert, DELETED delete,
   BOOKMARK only moves the checkpoint. Each event that changes the mirror is applied in one
   transaction with the checkpoint, so however the mirror stops, it resumes after the last
   change it applied. Events that change nothing (a Node's heartbeat, a replay) save the
   checkpoint at most once a second (`checkpoint_every`), with the next change, a bookmark
   or the watch's end: replayed after a crash, they change nothing again;
4. 410 Gone, as an ERROR event or as the answer to a watch request: list again (the
   resync applies what was missed, deletions included). A dropped connection, a read
   timeout or an API error: watch again from the last resourceVersion applied, after a
   capped, jittered exponential backoff. The server ending the watch at its timeout:
   watch again at once.

A run (`MirrorRunner`) mirrors each kind only while it holds that kind's cache lock, which
expires unless renewed, so two workers never mirror one kind at once and a dead worker's
kinds are taken over by the next run. Runs are bounded by a window under Celery
(`tasks.mirror_kubernetes`, restarted by beat) and unbounded in the foreground
(`manage.py tas_mirror`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from kubernetes.client.exceptions import ApiException

from tasweb.core.deadline import DeadlineExceeded
from tasweb.scheduling.services import request_pass
from tasweb.sources.kubeapi import (
    CONNECTION_ERRORS,
    MIRRORED_KINDS,
    Discovery,
    Gone,
    KubeApi,
    NotServed,
    Resource,
    WatchError,
    WatchStream,
    describe_error,
)
from tasweb.sources.locks import CacheLock
from tasweb.sources.selectors import checkpoint_resume_version
from tasweb.sources.services import (
    backoff_delay,
    mirror_bookmark_apply,
    mirror_error_record,
    mirror_event_apply,
    mirror_list_apply,
)

log = logging.getLogger(__name__)

APPLIED_EVENTS = {"ADDED", "MODIFIED", "DELETED"}


@dataclass(frozen=True)
class MirrorOptions:
    observe: bool = False  # pass Workload changes on to workload_observed (TAS_MODE=observe)
    request_passes: bool = False  # ask the scheduler for a pass after each change
    page_size: int = 500  # objects per list request
    watch_timeout: int = 290  # seconds the server keeps one watch request open
    read_timeout: float | None = None  # a watch silent this long is dead (default: watch_timeout + 30)
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    not_served_backoff: float = 300.0  # a kind the server does not serve is looked for again this often
    lock_ttl: float = 60.0
    checkpoint_every: float = 1.0  # how long the checkpoint of events that changed nothing may wait
    tick: float = 0.5  # how often a run checks its window, its locks and its stop event
    join_timeout: float = 15.0

    @classmethod
    def from_settings(cls, **overrides: Any) -> MirrorOptions:
        options = cls(
            observe=getattr(settings, "TAS_MODE", "observe") == "observe",
            request_passes=getattr(settings, "TAS_CLUSTER_SOURCE", "") == "kubernetes",
            page_size=int(getattr(settings, "TAS_MIRROR_PAGE_SIZE", cls.page_size)),
            lock_ttl=float(getattr(settings, "TAS_MIRROR_LOCK_TTL_SECONDS", cls.lock_ttl)),
        )
        return replace(options, **overrides)


class KindMirror:
    """Mirrors one kind until stopped, its run's window ends, or it is halted (lost lock)."""

    def __init__(self, kind: str, *, api: KubeApi, discovery: Discovery, options: MirrorOptions,
                 stop: threading.Event, deadline: float | None) -> None:
        self.kind = kind
        self.api = api
        self.discovery = discovery
        self.options = options
        self.deadline = deadline
        self._stop = stop
        self._halt = threading.Event()
        self._stream: WatchStream | None = None
        self.resource: Resource | None = None
        self.resource_version: str | None = None  # the last one applied; None = list first
        self.stats: Counter[str] = Counter()
        self.last_error = ""
        self._unsaved_events = 0  # applied, changed nothing, checkpoint not saved yet
        self._saved_at = time.monotonic()

    # -------------------------------------------------------------- control

    def stopped(self) -> bool:
        return (self._stop.is_set() or self._halt.is_set()
                or (self.deadline is not None and time.monotonic() >= self.deadline))

    def halt(self) -> None:
        self._halt.set()
        self.interrupt()

    def interrupt(self) -> None:
        """End a watch read that waits for the server (called from another thread)."""
        stream = self._stream
        if stream is not None:
            stream.interrupt()

    def _sleep(self, seconds: float) -> None:
        """Wait, but no longer than until stopped, halted or the window's end."""
        until = time.monotonic() + seconds
        while not self.stopped():
            left = until - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, 0.2))

    # -------------------------------------------------------------- the loop

    def run(self) -> None:
        try:
            self._loop()
        finally:
            self._flush_checkpoint()
            self.api.close()
            connection.close()  # this thread's database connection

    def _loop(self) -> None:
        failures = 0
        while not self.stopped():
            try:
                if self.resource is None:
                    self.resource = self.discovery.resource(self.kind)
                    self.resource_version = checkpoint_resume_version(
                        kind=self.kind, api_version=self.resource.api_version)
                if self.resource_version is None:
                    self._list()
                failures = 0 if self._watch() else failures + 1
                if failures:
                    self._sleep(backoff_delay(failures, base=self.options.backoff_base,
                                              cap=self.options.backoff_cap))
            except Gone as exc:
                # the resourceVersion is too old: what happened since is only in a new list
                self.stats["gone"] += 1
                log.info("%s: %s; listing again", self.kind, exc)
                self.resource_version, self._unsaved_events = None, 0
                failures += 1
                if failures > 1:  # Gone right after a list: do not hammer the server
                    self._sleep(backoff_delay(failures - 1, base=self.options.backoff_base,
                                              cap=self.options.backoff_cap))
            except NotServed as exc:
                self._failed(str(exc), level=logging.WARNING)
                self.resource = None
                self._sleep(self.options.not_served_backoff)
            except (ApiException, *CONNECTION_ERRORS, DatabaseError) as exc:
                if self.stopped():
                    break  # the stop interrupted a read: not a failure
                failures += 1
                delay = backoff_delay(failures, base=self.options.backoff_base, cap=self.options.backoff_cap)
                self._failed(f"{describe_error(exc)}; retrying in {delay:.1f} s from resourceVersion "
                             f"{self.resource_version or '(list)'}")
                if isinstance(exc, DatabaseError):
                    connection.close()  # a broken connection is replaced on the next query
                self._sleep(delay)
            except Exception as exc:  # a bug must not end the mirror of the kind: record it, back off
                failures += 1
                log.exception("%s: unexpected error", self.kind)
                self._failed(describe_error(exc))
                self._sleep(backoff_delay(failures, base=self.options.backoff_base, cap=self.options.backoff_cap))

    def _failed(self, error: str, *, level: int = logging.WARNING) -> None:
        self.stats["errors"] += 1
        self.last_error = error
        log.log(level, "%s: %s", self.kind, error)
        try:
            mirror_error_record(kind=self.kind, error=error)
        except DatabaseError:
            connection.close()

    def _list(self) -> None:
        assert self.resource is not None
        items, resource_version = self.api.list_all(self.resource, page_size=self.options.page_size)
        counts = mirror_list_apply(kind=self.kind, api_version=self.resource.api_version, objects=items,
                                   resource_version=resource_version, observe=self.options.observe)
        self.resource_version = resource_version
        self.stats["lists"] += 1
        if counts["created"] or counts["updated"] or counts["deleted"]:
            self._note_change()
        log.info("%s: listed %d at resourceVersion %s (%d created, %d updated, %d deleted)", self.kind,
                 counts["total"], resource_version, counts["created"], counts["updated"], counts["deleted"])

    def _watch(self) -> bool:
        """One watch request, applied event by event; False when it ended suspiciously (at
        once, with nothing sent), which counts as a failure for the backoff."""
        assert self.resource is not None and self.resource_version is not None
        timeout = self.options.watch_timeout
        if self.deadline is not None:
            timeout = max(1, min(timeout, math.ceil(self.deadline - time.monotonic())))
        read_timeout = self.options.read_timeout or timeout + 30
        started = time.monotonic()
        received = 0
        stream = self.api.watch(self.resource, resource_version=self.resource_version,
                                timeout_seconds=timeout, read_timeout=read_timeout)
        self._stream = stream
        try:
            if self.stopped():
                return True
            for event in stream:
                received += 1
                self._apply(event)
                if self.stopped():
                    break
        finally:
            self._stream = None
            stream.close()
        self._flush_checkpoint()
        return received > 0 or time.monotonic() - started >= 1.0 or self.stopped()

    def _apply(self, event: dict) -> None:
        assert self.resource is not None
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == "ERROR":
            code = obj.get("code")
            message = f"{code} {obj.get('reason', '')}: {obj.get('message', '')}"
            if code == 410:
                raise Gone(message)
            raise WatchError(f"the watch sent an error: {message}")
        resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if event_type == "BOOKMARK":
            if resource_version:
                self.resource_version = resource_version
                self._save_checkpoint()
                self.stats["bookmarks"] += 1
            return
        if event_type not in APPLIED_EVENTS:
            log.warning("%s: ignoring a watch event of type %r", self.kind, event_type)
            return
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.kind)
        save_unchanged = time.monotonic() - self._saved_at >= self.options.checkpoint_every
        changed = mirror_event_apply(kind=self.kind, api_version=self.resource.api_version,
                                     event_type=event_type, obj=obj, observe=self.options.observe,
                                     unsaved_events=self._unsaved_events, save_unchanged=save_unchanged)
        self.resource_version = resource_version or self.resource_version
        self.stats["events"] += 1
        if changed or save_unchanged:
            self._unsaved_events, self._saved_at = 0, time.monotonic()
        else:
            self._unsaved_events += 1
        if changed:
            self._note_change()

    def _flush_checkpoint(self) -> None:
        """Save the checkpoint of events that changed nothing, if any wait (a watch that
        ended or was stopped); best effort: without it, they are replayed and change nothing."""
        if not self._unsaved_events or self.resource is None or self.resource_version is None:
            return
        try:
            self._save_checkpoint()
        except DatabaseError as exc:
            log.warning("%s: could not save the checkpoint: %s", self.kind, describe_error(exc))
            connection.close()

    def _save_checkpoint(self) -> None:
        """Save where the watch stands, with the events since the last save that changed
        nothing (their checkpoint waits up to `checkpoint_every`, so that a stream of
        heartbeats costs no write each)."""
        assert self.resource is not None and self.resource_version is not None
        mirror_bookmark_apply(kind=self.kind, api_version=self.resource.api_version,
                              resource_version=self.resource_version, events=self._unsaved_events)
        self._unsaved_events, self._saved_at = 0, time.monotonic()

    def _note_change(self) -> None:
        """Ask for a scheduling pass (debounced: one per burst of changes). Best effort: the
        change is stored already, and beat's passes read it if the request is lost."""
        if not self.options.request_passes:
            return
        try:
            request_pass()
        except Exception as exc:
            log.warning("%s: could not request a scheduling pass: %s", self.kind, describe_error(exc))


class MirrorRunner:
    """Mirrors the kinds whose locks it holds, until `stop` is set or the window ends.

    Without `wait_for_locks` a run that gets no lock returns at once (another worker is
    mirroring everything); either way, kinds whose lock frees up during the run are taken
    over, so a dead worker's kinds move to a live one within the lock's expiry.
    """

    def __init__(self, *, kinds: Iterable[str] | None = None, api: KubeApi | None = None,
                 options: MirrorOptions | None = None, window_seconds: float | None = None,
                 stop: threading.Event | None = None, wait_for_locks: bool = False) -> None:
        self.kinds = list(kinds or MIRRORED_KINDS)
        unknown = [k for k in self.kinds if k not in MIRRORED_KINDS]
        if unknown:
            raise ValueError(f"kinds {', '.join(unknown)} are not mirrored (known: {', '.join(MIRRORED_KINDS)})")
        self.options = options or MirrorOptions.from_settings()
        self.window_seconds = window_seconds
        self.stop = stop or threading.Event()
        self.wait_for_locks = wait_for_locks
        self._api = api
        self.locks: dict[str, CacheLock] = {}
        self.mirrors: list[KindMirror] = []
        self.threads: list[threading.Thread] = []
        self.lost: list[str] = []
        self.waiting: set[str] = set()

    def run(self) -> dict[str, Any]:
        api = self._api or KubeApi.from_settings()
        discovery = Discovery(api)
        deadline = time.monotonic() + self.window_seconds if self.window_seconds else None
        try:
            try:
                self._acquire(api, discovery, deadline)
            except Exception as exc:
                if not self.wait_for_locks:
                    raise  # a Celery run fails; beat starts the next one
                log.warning("mirror locks: %s; trying again", describe_error(exc))
            if self.locks or self.wait_for_locks:
                self._supervise(api, discovery, deadline)
        finally:
            self._shutdown()
            if self._api is None:
                api.close()
        return self.summary()

    def _supervise(self, api: KubeApi, discovery: Discovery, deadline: float | None) -> None:
        renewed = time.monotonic()
        while not self.stop.wait(self.options.tick):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if now - renewed >= self.options.lock_ttl / 3:
                renewed = now
                try:
                    self._renew()
                    self._acquire(api, discovery, deadline)
                except DeadlineExceeded:
                    raise  # the task's time limit: the run ends here
                except Exception as exc:
                    # the cache (Redis) is unreachable: keep mirroring what we mirror, the
                    # writes being idempotent, and try the locks again on the next round
                    log.warning("mirror locks: %s", describe_error(exc))

    def _acquire(self, api: KubeApi, discovery: Discovery, deadline: float | None) -> None:
        for kind in self.kinds:
            if kind in self.locks:
                continue
            lock = CacheLock(f"mirror:{kind}", ttl=self.options.lock_ttl)
            if not lock.acquire():
                if kind not in self.waiting:
                    self.waiting.add(kind)
                    log.info("%s: another mirror holds the kind's lock", kind)
                continue
            self.locks[kind] = lock
            mirror = KindMirror(kind, api=api.clone(), discovery=discovery, options=self.options,
                                stop=self.stop, deadline=deadline)
            thread = threading.Thread(target=mirror.run, name=f"mirror-{kind}", daemon=True)
            self.mirrors.append(mirror)
            self.threads.append(thread)
            thread.start()
            log.info("%s: mirroring", kind)

    def _renew(self) -> None:
        for kind, lock in list(self.locks.items()):
            if lock.renew():
                continue
            log.warning("%s: lost the mirror lock (it expired); another worker mirrors the kind now", kind)
            del self.locks[kind]
            self.lost.append(kind)
            for mirror in self.mirrors:
                if mirror.kind == kind:
                    mirror.halt()

    def _shutdown(self) -> None:
        self.stop.set()
        for mirror in self.mirrors:
            mirror.interrupt()
        give_up = time.monotonic() + self.options.join_timeout
        for thread in self.threads:
            thread.join(max(0.0, give_up - time.monotonic()))
            if thread.is_alive():
                log.warning("%s did not stop within %.0f s", thread.name, self.options.join_timeout)
        for kind, lock in self.locks.items():
            try:
                lock.release()
            except Exception as exc:  # it expires on its own
                log.warning("%s: could not release the mirror lock: %s", kind, describe_error(exc))

    def summary(self) -> dict[str, Any]:
        totals: Counter[str] = Counter()
        for mirror in self.mirrors:
            totals.update(mirror.stats)
        return {
            "kinds": sorted({m.kind for m in self.mirrors}),
            "skipped": sorted(set(self.kinds) - {m.kind for m in self.mirrors}),
            "lost": sorted(self.lost),
            "events": totals["events"],
            "lists": totals["lists"],
            "bookmarks": totals["bookmarks"],
            "gone": totals["gone"],
            "errors": {m.kind: m.last_error for m in self.mirrors if m.last_error},
        }


def mirror_run(*, window_seconds: float | None, kinds: Iterable[str] | None = None, api: KubeApi | None = None,
               options: MirrorOptions | None = None, stop: threading.Event | None = None,
               wait_for_locks: bool = False) -> dict[str, Any]:
    """Mirror the cluster for `window_seconds` (None: until `stop` is set); a summary of the run."""
    return MirrorRunner(kinds=kinds, api=api, options=options, window_seconds=window_seconds, stop=stop,
                        wait_for_locks=wait_for_locks).run()
