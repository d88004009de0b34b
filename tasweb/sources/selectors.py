"""Reads of the sources app: the mirror's checkpoints and the writes waiting to be sent."""

from __future__ import annotations

from django.db.models import QuerySet

from tasweb.scheduling.models import ClusterWrite
from tasweb.sources.models import MirrorCheckpoint


def checkpoint_resume_version(*, kind: str, api_version: str) -> str | None:
    """The resourceVersion to watch `kind` from, or None when it has to be listed first
    (never listed, or last mirrored from another API version)."""
    row = MirrorCheckpoint.objects.filter(kind=kind).values_list("api_version", "resource_version").first()
    if row is None or not row[1] or row[0] != api_version:
        return None
    return row[1]


def mirror_checkpoints() -> QuerySet[MirrorCheckpoint]:
    return MirrorCheckpoint.objects.all()


def cluster_writes_pending() -> QuerySet[ClusterWrite]:
    """Writes not sent yet and not given up, oldest first."""
    return (ClusterWrite.objects.filter(sent_at__isnull=True).exclude(retry__abandoned=True)
            .select_related("retry").order_by("id"))
