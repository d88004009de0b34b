"""gunicorn's settings for the web process: gunicorn reads this file from its working
directory (the project root, /app in the image), whichever command starts it (the image's,
docker-compose's, the manifests').

A what-if plays one scheduling pass over the whole mirror, and the first request after a
pass rebuilds the engine's view of it: on a cluster of 50,000 nodes and 100,000 workloads
that takes 10-20 s, more on a slow machine. gunicorn's default of 30 s would kill the worker
in the middle of such a request (the client sees the connection reset); `TAS_WEB_TIMEOUT`
(seconds) sets how long a request may take instead.
"""

import os


def _seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name}: expected a whole number of seconds (1 or more), got {raw!r}")
    return int(raw)


timeout = _seconds("TAS_WEB_TIMEOUT", 120)
graceful_timeout = min(timeout, 30)  # how long a restart waits for requests in flight


def post_worker_init(worker) -> None:
    """Each worker keeps its engine view of the mirror current in a thread of its own, from
    the start (tasweb.api.state.view_keeper_start; TAS_API_VIEW_KEEP_SECONDS=0 turns it off)."""
    from tasweb.api.state import view_keeper_start

    view_keeper_start()
