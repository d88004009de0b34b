"""`python -m scheduler simulate`: one pass of the engine over a cluster snapshot.

The pass does what Kueue's scheduler and TAS controllers would do, in order (see
docs/CLI.md): node-failure handling, the second pass (node replacement, ProvisioningRequest
topology), one scheduling cycle, the topology ungater. Objects in, decisions out; nothing
is written anywhere. It is a thin wrapper: a cold-started `Engine`, one `run_pass`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from scheduler.cluster import ClusterState
from scheduler.codec import decode_assignment
from scheduler.config import Configuration
from scheduler.engine import Engine
from scheduler.errors import InputError
from scheduler.features import FeatureGates
from scheduler.parse import ParsedObjects, parse_objects
from scheduler.queue_status import STOPPED, active_condition
from scheduler.replacement import annotate_failures
from scheduler.results import PassResult
from scheduler.validate import cross_object_errors


def unknown_level_problems(parsed: ParsedObjects) -> list[InputError]:
    """Topology requests naming a level no Topology has: Kueue keeps such a workload pending
    forever ("does not contain the requested level"), which is almost always a typo. The
    workload is valid all the same (Kueue admits the object), so a pass only warns of them."""
    known = {level for t in parsed.topologies for level in t.levels}
    problems = []
    for wl in parsed.workloads:
        label = f"Workload/{wl.namespace}/{wl.name}"
        for i, ps in enumerate(wl.pod_sets):
            tr = ps.topology_request
            if tr is None:
                continue
            named = [("required", tr.required), ("preferred", tr.preferred),
                     ("podSetSliceRequiredTopology", tr.slice_required_topology)]
            named += [(f"podsetSliceRequiredTopologyConstraints[{j}].topology", c.topology)
                      for j, c in enumerate(tr.slice_constraints)]
            for field, level in named:
                if level is not None and level not in known:
                    choices = ", ".join(sorted(known)) or "none"
                    problems.append(InputError(
                        f"level {level!r} is not a level of any Topology (levels: {choices})",
                        field=f"spec.podSets[{i}].topologyRequest.{field}", obj=label,
                        file=parsed.origins.get(label, "")))
    return problems


def simulate(
    objects: Iterable[tuple[str, dict]],
    *,
    gates: FeatureGates,
    now: datetime,
    warn: Callable[[str], None] = lambda _msg: None,
    cycles: int | None = 1,
    config: Configuration | None = None,
) -> PassResult:
    """One pass over objects read from files: `(file, object)` pairs."""
    parsed = parse_objects(list(objects), decode_assignment=decode_assignment, warn=warn)
    errors = cross_object_errors(parsed)
    if errors:
        raise errors[0]
    return simulate_parsed(parsed, gates=gates, now=now, warn=warn, cycles=cycles, config=config)


def unstated_check_warnings(state: ClusterState) -> list[str]:
    """AdmissionChecks a ClusterQueue names that carry no Active condition: Kueue holds such a
    check inactive (and the ClusterQueues naming it) until its controller marks it; the engine
    takes it as active, so that hand-written inputs run."""
    naming: dict[str, list[str]] = {}
    for cq in state.cluster_queues.values():
        for name in sorted({rule.name for rule in cq.admission_checks}):
            naming.setdefault(name, []).append(cq.name)
    out = []
    for name, check in sorted(state.admission_checks.items()):
        if not check.active_stated and name in naming:
            queues = ", ".join(sorted(naming[name]))
            out.append(f"AdmissionCheck/{name}: no Active condition in its status: taken as active here, but Kueue "
                       f"holds it inactive until its controller ({check.controller_name or 'none named'}) marks it "
                       f"Active, and with it ClusterQueue(s) {queues}")
    return out


def simulate_parsed(
    parsed: ParsedObjects,
    *,
    gates: FeatureGates,
    now: datetime,
    warn: Callable[[str], None] = lambda _msg: None,
    cycles: int | None = 1,
    config: Configuration | None = None,
) -> PassResult:
    """One pass over already parsed objects, with `cycles` scheduling cycles (None: as many
    as it takes until nothing more is admitted): a cold-started engine, one pass, every
    workload's result. The pass updates the Workload and Pod objects in place (admissions,
    conditions, unhealthy nodes), so give it objects of its own."""
    for problem in unknown_level_problems(parsed):
        warn(str(problem))
    engine = Engine.from_parsed(parsed, gates, warn, config=config)
    for warning in unstated_check_warnings(engine.state):
        warn(warning)
    for name, causes in sorted(engine.state.inactive_cluster_queues.items()):
        if any(c.message != STOPPED for c in causes):  # a stopped one is stopped on purpose
            _, reason, message = active_condition(causes)
            warn(f"ClusterQueue/{name}: inactive ({reason}): {message} None of its workloads is admitted")
    for warning in cohort_cycle_warnings(engine.state):
        warn(warning)
    return engine_pass(engine, now, cycles=cycles)


def cohort_cycle_warnings(state: ClusterState) -> list[str]:
    """One line per cycle of Cohorts, naming the ClusterQueues it holds inactive."""
    quota = state.quota
    held: dict[frozenset[str], list[str]] = {}
    for cq in state.cluster_queues.values():
        chain = quota.cycle_of(cq)
        if chain is not None:  # the cycle is the chain's tail from the first time its last Cohort appears
            held.setdefault(frozenset(chain[chain.index(chain[-1]):]), []).append(cq.name)
    out = []
    reported: set[frozenset[str]] = set()
    for name, chain in sorted(quota.cycles.items()):
        members = frozenset(chain)
        if chain[0] != chain[-1] or members in reported:
            continue  # a Cohort that only leads into a cycle, or a cycle already named
        reported.add(members)
        queues = ", ".join(sorted(held.get(members, []))) or "none"
        out.append(f"Cohort/{name}: Cohorts form a cycle ({' -> '.join(chain)}): Kueue holds every ClusterQueue "
                   f"under it inactive until it is broken (here: {queues}); none of their workloads is admitted")
    return out


def engine_pass(engine: Engine, now: datetime, *, cycles: int | None = 1) -> PassResult:
    """One pass of `engine`, with every workload's result (what `simulate_parsed` returns)."""
    result = PassResult()
    outcome = engine.run_pass(now, cycles=cycles, result=result)
    result.workloads = engine.results_for(engine.state.workload_map, outcome)
    annotate_failures(result.workloads, outcome.replacement_failures)
    result.local_queues = engine.state.local_queue_usages()
    return result
