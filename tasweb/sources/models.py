"""State of the cluster sources: how far the mirror of each kind has got, and the delivery
state of the writes sent back to the cluster."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from tasweb.scheduling.models import ClusterWrite


class MirrorCheckpoint(models.Model):
    """Where the mirror of one kind stands: every event up to `resource_version` is applied.

    It is written in the same transaction as the events (or the list) it covers, so a
    mirror that restarts, however it stopped, watches from here and applies nothing twice.
    """

    kind = models.CharField(max_length=64, unique=True)
    api_version = models.CharField(max_length=128, blank=True, default="")  # e.g. kueue.x-k8s.io/v1beta2
    resource_version = models.CharField(max_length=64, blank=True, default="")  # "" = list first
    listed_at = models.DateTimeField(null=True, blank=True)  # the last full list (resync)
    events_applied = models.BigIntegerField(default=0)  # watch events applied, over every run
    updated_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["kind"]

    def __str__(self) -> str:
        return f"{self.kind}@{self.resource_version or '-'}"


class ClusterWriteRetry(models.Model):
    """Delivery state of a ClusterWrite whose sending failed: when to try again, or that it
    was given up (the cluster rejected it as invalid, or it failed too many times)."""

    write = models.OneToOneField(ClusterWrite, on_delete=models.CASCADE, primary_key=True, related_name="retry")
    next_attempt_at = models.DateTimeField(db_index=True)
    abandoned = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"write {self.write_id}: {'abandoned' if self.abandoned else self.next_attempt_at.isoformat()}"
