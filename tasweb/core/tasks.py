"""Celery tasks of the core app. Thin: each calls one service and returns."""

from __future__ import annotations

from celery import shared_task

from tasweb.core.services import heartbeat_record


@shared_task
def ping() -> str:
    """Answers "pong": proves a worker consumes from the broker and returns results."""
    return "pong"


@shared_task(ignore_result=True)
def heartbeat() -> None:
    heartbeat_record()
