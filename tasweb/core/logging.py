"""Logging filters of the project (used by LOGGING in tasweb/settings/base.py)."""

from __future__ import annotations

import logging

# celery.beat's line for every task it sends (not a named constant in Celery)
BEAT_SENDING = "Scheduler: Sending due task %s (%s)"


class TaskChatterFilter(logging.Filter):
    """Turn Celery's per-task lines into DEBUG records: the worker's "Task ... received" and
    "Task ... succeeded in ...s", and beat's "Scheduler: Sending due task ...".

    At INFO they come for every simulator tick and scheduling pass, several a second, and
    bury the lines that say what happened. Only those messages move: retries, rejections
    and failures keep their level, so they stay visible. A program run at DEBUG (`celery
    worker --loglevel DEBUG`) shows the per-task lines again.
    """

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        # imported here: the logging configuration is read before Celery is needed
        from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS

        self.chatter = frozenset({LOG_RECEIVED, LOG_SUCCESS, BEAT_SENDING})

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not isinstance(record.msg, str) or record.msg not in self.chatter:
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
