"""Logging filters of the project (used by LOGGING in tasweb/settings/base.py)."""

from __future__ import annotations

import logging


class TaskChatterFilter(logging.Filter):
    """Turn Celery's per-task "Task ... received" and "Task ... succeeded in ...s" lines into
    DEBUG records.

    At INFO the worker writes both for every simulator tick and scheduling pass, several a
    second, which buries the lines that say what happened. Only those two messages move:
    retries, rejections and failures keep their level, so they stay visible. Setting the
    logger to DEBUG (or DJANGO_LOG_LEVEL=DEBUG) shows the per-task lines again.
    """

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        # imported here: the logging configuration is read before Celery is needed
        from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS

        self.chatter = frozenset({LOG_RECEIVED, LOG_SUCCESS})

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not isinstance(record.msg, str) or record.msg not in self.chatter:
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
