"""Load Kubernetes/Kueue objects from YAML/JSON files (e.g. `kubectl get ... -o json`) into the mirror."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.errors import InputError
from scheduler.loader import read_objects
from tasweb.cluster.models import KINDS
from tasweb.cluster.services import object_upsert


class Command(BaseCommand):
    help = "Load Kubernetes and Kueue objects from YAML/JSON files into the mirrored cluster."

    def add_arguments(self, parser) -> None:
        parser.add_argument("files", nargs="+")

    def handle(self, *args, files: list[str], **options) -> None:
        counts: dict[str, int] = {}
        for path in files:
            try:
                objects = read_objects(path)
            except InputError as exc:
                raise CommandError(str(exc)) from None
            for obj in objects:
                kind = obj.get("kind")
                if kind not in KINDS:
                    self.stderr.write(f"{path}: kind {kind!r} is not mirrored; skipped")
                    continue
                object_upsert(kind=kind, obj=obj)
                counts[kind] = counts.get(kind, 0) + 1
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing"
        self.stdout.write(f"imported {summary}")
