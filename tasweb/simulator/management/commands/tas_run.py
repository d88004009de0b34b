"""Start the embedded stack in the foreground: `make run`."""

from __future__ import annotations

import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from tasweb.simulator.services import simulator_seed
from tasweb.simulator.supervisor import Program, Supervisor, terminal_foreground

INTERRUPTED = 130  # the shells' status for "stopped by SIGINT"


def worker_queues() -> list[str]:
    """The embedded worker's queues: the default one and the scheduler's."""
    default = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")
    return list(dict.fromkeys([default, settings.TAS_SCHEDULER_QUEUE]))


class Command(BaseCommand):
    help = ("Migrate, seed the simulated cluster, then run the web server, a Celery worker and Celery beat "
            "together, their output prefixed; Ctrl-C stops all of them.")
    # the checks run in the web process; migrations run first, here
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address the web server listens on")
        parser.add_argument("--port", type=int, default=8000, help="port of the web server (default 8000)")

    def handle(self, *args, host: str, port: int, **options) -> None:
        with terminal_foreground():
            code = self.run_stack(host, port)
        if code == INTERRUPTED:
            raise CommandError("interrupted before the stack started", returncode=code)
        if code:
            raise CommandError("the stack stopped because one of its programs exited", returncode=code)

    def run_stack(self, host: str, port: int) -> int:
        try:
            call_command("migrate", interactive=False, verbosity=1)
            if settings.TAS_CLUSTER_SOURCE == "simulator":
                report = simulator_seed()
                self.stdout.write(f"simulator: {report.summary()}")
        except KeyboardInterrupt:
            return INTERRUPTED
        finally:
            connections.close_all()  # the supervisor itself never touches the database again

        python = sys.executable
        manage = str(settings.BASE_DIR / "manage.py")
        celery = [python, "-m", "celery", "-A", "tasweb"]
        programs = [
            Program("web", [python, manage, "runserver", f"{host}:{port}", "--noreload"], stop_signal=signal.SIGINT),
            # one process, one task at a time: simulator ticks and scheduling passes never
            # compete for the SQLite write lock, and the passes' engine state stays in memory
            Program("worker", [*celery, "worker", "--pool", "solo", "--loglevel", "INFO", "--hostname",
                               "embedded@%h", "--without-mingle", "--without-gossip",
                               "--queues", ",".join(worker_queues())]),
            Program("beat", [*celery, "beat", "--loglevel", "INFO"]),
        ]
        self.stdout.write(f"web: http://{host}:{port}/  (health: http://{host}:{port}/healthz); "
                          f"data in {settings.VAR_DIR}; Ctrl-C stops everything")
        self.stdout.flush()
        return Supervisor(programs, out=sys.stdout).run()
