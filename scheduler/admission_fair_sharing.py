"""Admission fair sharing (Kueue's KEP-4136): a ClusterQueue whose admissionScope asks for it
orders its workloads first by their LocalQueues' usage, the LocalQueues that used less first.

A LocalQueue's usage is what its admitted workloads held, decayed with a half-life
(`status.fairSharing.admissionFairSharingStatus.consumedResources`, which Kueue's LocalQueue
controller samples every `usageSamplingInterval`), plus an entry penalty for every workload
admitted since the last sample (so that a queue does not take every admission of a cycle before
its usage catches up). Resources are weighed by the Configuration's `resourceWeights` (1 for
one not named) and the sum divided by the LocalQueue's `spec.fairSharing.weight`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.config import AdmissionFairSharing
from scheduler.quantity import afs_amount


def alpha(elapsed_seconds: float, half_life_seconds: float) -> float:
    """The weight a sample taken after `elapsed_seconds` gives the current usage: half of the
    old usage is gone after one half-life (none of it stays with a half-life of 0)."""
    if half_life_seconds == 0:
        return 0.0
    return 1.0 - 0.5 ** (elapsed_seconds / half_life_seconds)


NANO = 1_000_000_000


def scaled(amount: float, factor: float) -> float:
    """`amount` x `factor` to the nano-unit, rounded down, as Kueue scales a quantity by a float
    (to 9 decimal digits): what Kueue keeps, what the status holds and what a state built
    again from it reads back, to the same float."""
    return math.floor(amount * factor * NANO) / NANO


def summed(a: float, b: float) -> float:
    """The sum of two nano-unit amounts, exact as Kueue's decimal sum (the float sum of two
    such amounts can miss by a hair)."""
    return round((a + b) * NANO) / NANO


def entry_penalty(requests: Mapping[str, int], config: AdmissionFairSharing) -> dict[str, float]:
    """What admitting a workload asking for `requests` adds to its LocalQueue's usage until the
    next sample: the share of it one sampling interval would add."""
    rate = alpha(config.usage_sampling_interval_seconds, config.usage_half_life_seconds)
    return {name: scaled(afs_amount(name, value), rate) for name, value in requests.items()}


def add_into(total: dict[str, float], more: Mapping[str, float]) -> None:
    for name, amount in more.items():
        total[name] = summed(total.get(name, 0.0), amount)


@dataclass(slots=True)
class UsageEntry:
    """One LocalQueue's admission fair sharing usage."""

    consumed: dict[str, float] = field(default_factory=dict)
    sampled_at: datetime | None = None  # None: never sampled (Kueue's controller starts the clock)
    penalty: dict[str, float] = field(default_factory=dict)
    # Kueue keeps a penalty entry until the next sample takes it in, even one that adds nothing
    has_penalty: bool = False

    def weighted(self, weights: Mapping[str, float]) -> float:
        """The usage with resources weighed (1 for a resource without a weight)."""
        total = 0.0
        for name in sorted(self.consumed.keys() | self.penalty.keys()):  # one order: one float sum
            amount = summed(self.consumed.get(name, 0.0), self.penalty.get(name, 0.0))
            total += weights.get(name, 1.0) * amount
        return total

    def sample(self, now: datetime, admitted: Mapping[str, float], half_life_seconds: float) -> None:
        """Kueue's LocalQueue sample: the old usage decays towards what the queue's admitted
        workloads hold now, and the penalties since the last sample are taken in."""
        if half_life_seconds == 0:
            self.consumed = {}
        else:
            elapsed = max(0.0, (now - self.sampled_at).total_seconds()) if self.sampled_at is not None else 0.0
            rate = alpha(elapsed, half_life_seconds)
            consumed = {name: scaled(amount, 1.0 - rate) for name, amount in self.consumed.items()}
            add_into(consumed, {name: scaled(amount, rate) for name, amount in admitted.items()})
            add_into(consumed, self.penalty)
            self.consumed = consumed
            self.penalty = {}
            self.has_penalty = False
        self.sampled_at = now


@dataclass(frozen=True, slots=True)
class LocalQueueUsage:
    """What admission fair sharing knows of one LocalQueue, as shown to people."""

    namespace: str
    name: str
    cluster_queue: str
    weight: float
    usage: float | None  # what its ClusterQueue orders by; None past any number (weight 0)
    orders_by_usage: bool  # whether its ClusterQueue orders by it
    entry: UsageEntry  # its consumed resources and last sample (a copy)

    def consumed_text(self) -> str:
        consumed = sorted(self.entry.consumed.items())
        return ", ".join(f"{name} {display_text(amount)}" for name, amount in consumed) or "-"

    def json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "clusterQueue": self.cluster_queue,
                "weight": self.weight, "usage": self.usage, "ordersByUsage": self.orders_by_usage,
                "admissionFairSharingStatus": written_status_json(self.entry)}


def quantity_text(amount: float) -> str:
    """An amount as Kueue writes it in a LocalQueue's status: a quantity to the nano-unit."""
    nano = round(amount * NANO)  # amounts are kept to the nano-unit (`scaled`)
    for factor, suffix in ((1_000_000_000, ""), (1_000_000, "m"), (1_000, "u")):
        if nano % factor == 0:
            return f"{nano // factor}{suffix}"
    return f"{nano}n"


def display_text(amount: float) -> str:
    """An amount for people: to the milli-unit."""
    milli = round(amount * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def status_json(entry: UsageEntry) -> dict[str, Any]:
    """A LocalQueue's `status.fairSharing.admissionFairSharingStatus` for its usage."""
    out: dict[str, Any] = {"consumedResources": {name: quantity_text(amount)
                                                 for name, amount in sorted(entry.consumed.items())}}
    if entry.sampled_at is not None:
        out["lastUpdate"] = entry.sampled_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


def written_status_json(entry: UsageEntry) -> dict[str, Any] | None:
    """`status_json`, or None when there is nothing to say: never sampled, nothing consumed."""
    return status_json(entry) if entry.sampled_at is not None or entry.consumed else None


def usage_order(usage: float, lq_weight: float) -> float:
    """The key a LocalQueue's usage sorts by: usage / weight with Go's float arithmetic (a
    weight of 0 makes any usage infinite, and no usage NaN, which Go's cmp.Compare puts first)."""
    if lq_weight == 0:
        return math.inf if usage > 0 else -math.inf
    return usage / lq_weight
