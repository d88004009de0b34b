"""Mirror the Kubernetes cluster into the database in the foreground, until Ctrl-C."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from tasweb.sources.kubeapi import MIRRORED_KINDS, KubeConfigError
from tasweb.sources.mirror import mirror_run


class Command(BaseCommand):
    help = ("Mirror the Kubernetes cluster (list, then watch) into the database until Ctrl-C or SIGTERM. "
            "The cluster comes from KUBECONFIG, ~/.kube/config or the in-cluster service account; "
            "TAS_KUBE_CONTEXT names a kubeconfig context.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--kinds", default="",
                            help=f"comma-separated kinds to mirror (default: all: {','.join(MIRRORED_KINDS)})")
        parser.add_argument("--seconds", type=float, default=None,
                            help="stop after this many seconds (default: run until stopped)")

    def handle(self, *args, kinds: str, seconds: float | None, **options) -> None:
        selected = [k.strip() for k in kinds.split(",") if k.strip()] or None
        stop = threading.Event()

        def on_signal(signum, frame) -> None:
            if stop.is_set():
                raise KeyboardInterrupt  # asked twice: do not wait for the watches to end
            self.stderr.write(f"{signal.Signals(signum).name}: stopping the mirror ...")
            stop.set()

        previous = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            summary = mirror_run(window_seconds=seconds, kinds=selected, stop=stop, wait_for_locks=True)
        except (KubeConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        errors = "; ".join(f"{kind}: {error}" for kind, error in summary["errors"].items())
        self.stdout.write(
            f"mirror stopped: {', '.join(summary['kinds']) or 'no kind'} mirrored, {summary['lists']} list(s), "
            f"{summary['events']} event(s), {summary['bookmarks']} bookmark(s), {summary['gone']} 410 Gone"
            + (f"; last errors: {errors}" if errors else ""))
