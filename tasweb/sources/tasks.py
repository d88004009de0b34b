"""Celery tasks of the sources app. Thin: each calls one service and returns.

Both are idempotent and acknowledged late: a mirror run resumes from its checkpoints, and a
write sent twice changes nothing. Beat starts them regularly (settings: the Kubernetes
source), which is also what restarts a mirror whose worker died.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from tasweb.celery import task_time_limit
from tasweb.sources.kubeapi import KubeConfigError
from tasweb.sources.mirror import mirror_run
from tasweb.sources.services import cluster_writes_deliver

log = logging.getLogger(__name__)

# The longest mirror run, and the time it leaves before the task's limit (TAS_TASK_TIME_LIMIT,
# kept in the worker's process: tasweb.celery.LimitedTask) to stop its watches and return.
MAX_WINDOW_SECONDS = 20 * 60
WINDOW_MARGIN_SECONDS = 60


def mirror_window(requested: float | None) -> float:
    """The window of a mirror run: the one asked for (else TAS_MIRROR_WINDOW_SECONDS), at most
    MAX_WINDOW_SECONDS, and ending a margin before the task's time limit."""
    window = min(float(requested or settings.TAS_MIRROR_WINDOW_SECONDS), MAX_WINDOW_SECONDS)
    limit = task_time_limit()
    if limit > 0:
        window = min(window, max(limit - WINDOW_MARGIN_SECONDS, limit / 2))
    return window


@shared_task(acks_late=True, reject_on_worker_lost=True)
def mirror_kubernetes(window_seconds: float | None = None) -> dict[str, object]:
    """Mirror every kind whose lock this worker gets, for a bounded window; returns a summary."""
    if settings.TAS_CLUSTER_SOURCE != "kubernetes":
        return {"skipped": f"TAS_CLUSTER_SOURCE is {settings.TAS_CLUSTER_SOURCE!r}, not 'kubernetes'"}
    window = mirror_window(window_seconds)
    try:
        return mirror_run(window_seconds=window)
    except KubeConfigError as exc:
        log.error("%s", exc)
        return {"error": str(exc)}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def send_cluster_writes() -> dict[str, object]:
    """Send the engine's unsent decisions to the cluster (control mode only)."""
    if settings.TAS_CLUSTER_SOURCE != "kubernetes":
        return {"skipped": f"TAS_CLUSTER_SOURCE is {settings.TAS_CLUSTER_SOURCE!r}, not 'kubernetes'"}
    if settings.TAS_MODE != "control":
        return {"skipped": f"TAS_MODE is {settings.TAS_MODE!r}: Kueue decides, nothing is written"}
    try:
        return cluster_writes_deliver()
    except KubeConfigError as exc:
        log.error("%s", exc)
        return {"error": str(exc)}
