"""The simulator's shape and rates: defaults, overridden by `settings.TAS_SIMULATOR` (a dict),
overridden by `TAS_SIM_<FIELD>` environment variables (e.g. `TAS_SIM_NODES_PER_RACK=16`).

Rates are per minute of simulated time and drawn from a Poisson distribution each tick, so
a tick of 2 s with `arrivals_per_minute=10` brings 1/3 of a workload on average.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MAX_NODES = 100_000
ENV_PREFIX = "TAS_SIM_"
# The stand-in Kueue's profiles: feature gates of this engine that make it place otherwise
# than the engine's defaults do (TASProfileMixed on: LeastFreeCapacity for unconstrained
# requests, BestFit for the others).
KUEUE_PROFILES = {
    # BestFit for every request: Kueue before v0.15, or with TASProfileMixed off
    "BestFit": "TASProfileMixed=false",
    # TASBalancedPlacement (alpha): balanced domains for `preferred` requests
    "BalancedPlacement": "TASBalancedPlacement=true",
    # BestFit everywhere and balanced `preferred` requests together
    "BestFitBalanced": "TASProfileMixed=false,TASBalancedPlacement=true",
    # the engine's own defaults: the comparison should agree (a check of the comparison itself)
    "Default": "",
}


@dataclass(frozen=True)
class SimulatorSettings:
    # reproducibility: every tick draws from Random(f"{seed}:{tick number}")
    seed: int = 1
    # how often beat runs a tick (seconds); also the step assumed when ticks are missed
    tick_seconds: int = 2

    # --- the cluster (seeded once) ------------------------------------------------------
    blocks: int = 2
    racks_per_block: int = 4
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    # share of nodes that also run a 4-GPU inference server outside Kueue (non-TAS usage)
    serving_node_fraction: float = 0.05

    # --- jobs ---------------------------------------------------------------------------
    # workloads submitted on the first tick, so the cluster fills at once
    initial_workloads: int = 12
    arrivals_per_minute: float = 10.0
    # no arrivals while this many workloads wait: the queue stays readable
    max_waiting: int = 40
    runtime_min_seconds: float = 45.0
    runtime_max_seconds: float = 240.0
    # share of arrivals asking for more than a rack under a `required` rack constraint
    too_big_fraction: float = 0.05
    # share of arrivals with two PodSets (a learner and its actors)
    two_pod_sets_fraction: float = 0.15
    # a workload still waiting after this long is deleted by its owner
    give_up_seconds: float = 900.0
    # finished workloads (and their pods) are deleted this long after finishing
    finished_retention_seconds: float = 600.0
    # terminated pods are garbage-collected this long after they stopped
    pod_gc_seconds: float = 30.0

    # --- faults -------------------------------------------------------------------------
    node_failures_per_minute: float = 2.0
    failure_min_seconds: float = 30.0
    failure_max_seconds: float = 120.0
    drains_per_minute: float = 1.0
    drain_min_seconds: float = 60.0
    drain_max_seconds: float = 180.0

    # --- the cluster autoscaler behind Kueue's ProvisioningRequest admission checks ----------
    # (AdmissionChecks whose controllerName is kueue.x-k8s.io/provisioning-request; the
    # simulator seeds none: they come with imported or added ClusterQueues)
    # how long a request takes before its check turns Ready
    provisioning_seconds: float = 20.0
    # share of requests that fail: the check goes to Retry, with Kueue's retry backoff
    provisioning_failure_fraction: float = 0.1
    # Kueue's retryStrategy: after this many retries a failure rejects the check; the delay
    # asked for (requeueAfterSeconds) is the base doubled per retry, at most the maximum
    provisioning_retry_limit: int = 3
    provisioning_backoff_base_seconds: float = 60.0
    provisioning_backoff_max_seconds: float = 1800.0

    # --- a stand-in Kueue (observe mode on the simulator) ----------------------------------
    # "" (the default): the engine admits, as in control mode. A profile name: with TAS_MODE
    # observe, a stand-in Kueue admits instead, running this same engine with that profile
    # (`KUEUE_PROFILES`), and the scheduling passes observe and compare, as beside a real Kueue.
    kueue_profile: str = ""

    @property
    def racks(self) -> int:
        return self.blocks * self.racks_per_block

    @property
    def node_count(self) -> int:
        return self.racks * self.nodes_per_rack

    def validate(self) -> SimulatorSettings:
        def fail(name: str, reason: str) -> None:
            raise ImproperlyConfigured(f"{ENV_PREFIX}{name.upper()} (simulator setting {name!r}): {reason}")

        for name in ("blocks", "racks_per_block", "nodes_per_rack", "gpus_per_node"):
            if getattr(self, name) < 1:
                fail(name, f"must be at least 1, got {getattr(self, name)}")
        if self.node_count > MAX_NODES:
            fail("nodes_per_rack", f"the cluster would have {self.node_count} nodes (blocks x racks_per_block x "
                                   f"nodes_per_rack = {self.blocks} x {self.racks_per_block} x {self.nodes_per_rack}); "
                                   f"at most {MAX_NODES} are supported")
        if self.tick_seconds <= 0:
            fail("tick_seconds", f"must be positive, got {self.tick_seconds}")
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, int | float) and value < 0:
                fail(item.name, f"must not be negative, got {value}")
        if self.kueue_profile and self.kueue_profile not in KUEUE_PROFILES:
            fail("kueue_profile", f"unknown profile {self.kueue_profile!r} (profiles: {', '.join(KUEUE_PROFILES)}, "
                                  "or empty for none)")
        for name in ("serving_node_fraction", "too_big_fraction", "two_pod_sets_fraction",
                     "provisioning_failure_fraction"):
            if getattr(self, name) > 1:
                fail(name, f"is a fraction between 0 and 1, got {getattr(self, name)}")
        for low, high in (("runtime_min_seconds", "runtime_max_seconds"),
                          ("failure_min_seconds", "failure_max_seconds"),
                          ("drain_min_seconds", "drain_max_seconds"),
                          ("provisioning_backoff_base_seconds", "provisioning_backoff_max_seconds")):
            if getattr(self, low) > getattr(self, high):
                fail(low, f"is above {high} ({getattr(self, low)} > {getattr(self, high)})")
        return self

    def with_overrides(self, **values: Any) -> SimulatorSettings:
        return replace(self, **values).validate()


def stand_in_kueue(config: SimulatorSettings) -> bool:
    """Whether the simulated cluster has a Kueue of its own: a profile, and TAS_MODE observe
    (in control mode the engine admits, whatever the profile)."""
    return bool(config.kueue_profile) and getattr(settings, "TAS_MODE", "observe") == "observe"


def simulator_observed() -> bool:
    """Whether the simulator is the cluster and its stand-in Kueue admits: passes observe."""
    if getattr(settings, "TAS_CLUSTER_SOURCE", "simulator") != "simulator":
        return False
    return stand_in_kueue(simulator_settings())


def kueue_gates(config: SimulatorSettings) -> str:
    """The stand-in Kueue's feature gates (`--feature-gates` syntax)."""
    return KUEUE_PROFILES[config.kueue_profile]


def _kind(item: Any) -> type:
    if item.type in ("str", str):
        return str
    return int if item.type in ("int", int) else float


def _converted(name: str, raw: Any, kind: type, source: str) -> Any:
    if kind is str:
        return str(raw).strip()
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise ImproperlyConfigured(f"{source}: expected {'an integer' if kind is int else 'a number'} "
                                   f"for simulator setting {name!r}, got {raw!r}") from None


def simulator_settings(environ: dict[str, str] | None = None) -> SimulatorSettings:
    """The settings in force: defaults < settings.TAS_SIMULATOR < TAS_SIM_* variables."""
    environ = os.environ if environ is None else environ
    configured = dict(getattr(settings, "TAS_SIMULATOR", None) or {})
    kinds = {item.name: _kind(item) for item in fields(SimulatorSettings)}
    unknown = sorted(set(configured) - set(kinds))
    if unknown:
        raise ImproperlyConfigured(f"settings.TAS_SIMULATOR: unknown simulator setting {unknown[0]!r} "
                                   f"(known: {', '.join(kinds)})")
    values: dict[str, Any] = {}
    for name, kind in kinds.items():
        if name in configured:
            values[name] = _converted(name, configured[name], kind, "settings.TAS_SIMULATOR")
        env_name = ENV_PREFIX + name.upper()
        raw = environ.get(env_name, "").strip()
        if raw:
            values[name] = _converted(name, raw, kind, env_name)
    return SimulatorSettings(**values).validate()
