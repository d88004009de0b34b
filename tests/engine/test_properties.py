"""Random small clusters and PodSets: every assignment is feasible, and placement fails
only when the cluster really lacks the room.

Capacities are computed here from the generated numbers, independently of the engine's
snapshot: a node's free room is allocatable minus its running non-TAS pod, a leaf holds
`min(free // request)` pods, and a domain holds the sum of its leaves (in whole slices at
the slice level).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.topology_assignment import find_topology_assignment, find_topology_assignments_for_flavor

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    flavor_snapshot,
    gates,
    node,
    pod,
    pod_set,
    taint,
    tas_requests,
    tas_setup,
    toleration,
    workload,
)

GIB = 2**30


@dataclass(frozen=True)
class NodeSpec:
    block: str
    rack: str
    name: str
    cpu: int  # milli-CPU
    memory: int  # GiB
    pods: int
    used_cpu: int | None  # milli-CPU of a running non-TAS pod, None when none runs
    tainted: bool

    @property
    def path(self) -> tuple[str, str, str]:
        return (self.block, self.rack, self.name)


@dataclass(frozen=True)
class Case:
    hostname_lowest: bool
    nodes: tuple[NodeSpec, ...]
    mode: str  # required | preferred | unconstrained | implied | slice-only
    level: int
    slice_level: int | None
    slice_size: int
    count: int
    cpu: int  # milli-CPU per pod
    memory: int  # GiB per pod
    tolerate: bool
    profile_mixed: bool
    balanced: bool

    @property
    def levels(self) -> tuple[str, ...]:
        return (BLOCK, RACK, HOSTNAME) if self.hostname_lowest else (BLOCK, RACK)

    @property
    def depth(self) -> int:
        return len(self.levels)


@st.composite
def node_specs(draw) -> tuple[NodeSpec, ...]:
    nodes = []
    for b in range(1, draw(st.integers(1, 3)) + 1):
        for r in range(1, draw(st.integers(1, 3)) + 1):  # rack values repeat across blocks
            for n in range(1, draw(st.integers(1, 3)) + 1):
                nodes.append(NodeSpec(
                    block=f"b{b}", rack=f"r{r}", name=f"b{b}-r{r}-n{n}",
                    cpu=draw(st.integers(0, 12)) * 1000,
                    memory=draw(st.integers(0, 16)),
                    pods=draw(st.integers(0, 10)),
                    used_cpu=draw(st.sampled_from([None, None, 0, 500, 1000, 3000, 9000])),
                    tainted=draw(st.integers(0, 4)) == 0,
                ))
    return tuple(nodes)


@st.composite
def cases(draw) -> Case:
    hostname_lowest = draw(st.integers(0, 3)) > 0
    depth = 3 if hostname_lowest else 2
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained", "implied", "slice-only"]))
    level = draw(st.integers(0, depth - 1)) if mode in ("required", "preferred") else (
        0 if mode == "slice-only" else depth - 1)
    slice_level = None
    slice_size = 1
    if mode == "slice-only" or (mode in ("required", "preferred") and draw(st.booleans())):
        slice_level = draw(st.integers(level, depth - 1))
        slice_size = draw(st.integers(1, 3))
    count = slice_size * draw(st.integers(1, 12 // slice_size))
    return Case(
        hostname_lowest=hostname_lowest,
        nodes=draw(node_specs()),
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        count=count,
        cpu=draw(st.sampled_from([250, 500, 1000, 1500, 2000])),
        memory=draw(st.sampled_from([0, 0, 1, 2])),
        tolerate=draw(st.booleans()),
        profile_mixed=draw(st.booleans()),
        balanced=draw(st.booleans()),
    )


# ---------------------------------------------------------------- the case as objects


def objects_of(case: Case) -> list[dict]:
    objects = tas_setup(levels=case.levels)
    for spec in case.nodes:
        objects.append(node(
            spec.name, block=spec.block, rack=spec.rack, cpu=f"{spec.cpu}m", memory=f"{spec.memory}Gi",
            pods=str(spec.pods), taints=[taint("dedicated", "batch")] if spec.tainted else [],
        ))
        if spec.used_cpu is not None:
            objects.append(pod(f"daemon-{spec.name}", node=spec.name, cpu=f"{spec.used_cpu}m"))
    return objects


def workload_of(case: Case) -> dict:
    levels = case.levels
    kwargs: dict = {}
    if case.mode == "required":
        kwargs["required"] = levels[case.level]
    elif case.mode == "preferred":
        kwargs["preferred"] = levels[case.level]
    elif case.mode == "unconstrained":
        kwargs["unconstrained"] = True
    if case.slice_level is not None:
        kwargs["slice_topology"] = levels[case.slice_level]
        kwargs["slice_size"] = case.slice_size
    tolerations = [toleration("dedicated", "batch")] if case.tolerate else []
    ps = pod_set(count=case.count, cpu=f"{case.cpu}m", memory=f"{case.memory}Gi" if case.memory else None,
                 tolerations=tolerations, **kwargs)
    return workload("w", pod_sets=[ps])


# ---------------------------------------------------------------- the model


def node_room(spec: NodeSpec) -> dict[str, int]:
    used = spec.used_cpu is not None
    return {"cpu": spec.cpu - (spec.used_cpu or 0), "memory": spec.memory * GIB, "pods": spec.pods - int(used)}


def pods_in(room: dict[str, int], case: Case) -> int:
    request = {"cpu": case.cpu, "memory": case.memory * GIB, "pods": 1}
    return max(0, min(room[r] // v for r, v in request.items() if v))


def leaf_capacity(case: Case) -> dict[tuple[str, ...], int]:
    """Pods that fit in each leaf, keyed by the leaf's full path of values."""
    if case.hostname_lowest:
        # node constraints are only checked when the leaves are nodes
        return {s.path: 0 if s.tainted and not case.tolerate else pods_in(node_room(s), case) for s in case.nodes}
    rooms: dict[tuple[str, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in case.nodes:
        for r, v in node_room(s).items():
            rooms[(s.block, s.rack)][r] += v
    return {path: pods_in(room, case) for path, room in rooms.items()}


def slices_per_domain(case: Case, leaves: dict[tuple[str, ...], int], level: int) -> dict[tuple[str, ...], int]:
    """Whole slices each domain at `level` can hold."""
    slice_level = case.slice_level if case.slice_level is not None else case.depth - 1
    at_slice_level: dict[tuple[str, ...], int] = defaultdict(int)
    for path, n in leaves.items():
        at_slice_level[path[: slice_level + 1]] += n
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for path, n in at_slice_level.items():
        out[path[: level + 1]] += n // case.slice_size
    return out


# ---------------------------------------------------------------- the property


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_assignments_are_feasible_and_failures_are_real(case: Case):
    feature_gates = gates(TASProfileMixed=case.profile_mixed, TASBalancedPlacement=case.balanced)
    snap = flavor_snapshot(objects_of(case), feature_gates=feature_gates)
    (request,) = tas_requests(workload_of(case), implied=case.mode == "implied")
    assignments, reason = find_topology_assignment(snap, request, None, gates=feature_gates)
    assignment = assignments.get("main")

    leaves = leaf_capacity(case)
    slices_needed = case.count // case.slice_size
    if case.mode == "required":
        per_domain = slices_per_domain(case, leaves, case.level)
        room = max(per_domain.values(), default=0)
    else:
        room = sum(slices_per_domain(case, leaves, 0).values())

    if room < slices_needed:
        assert assignment is None
        unit = "pod" if case.slice_size == 1 else "slice"
        if room == 0:
            head = f"topology \"default\" doesn't allow to fit any of {slices_needed} {unit}(s)"
        else:
            head = f'topology "default" allows to fit only {room} out of {slices_needed} {unit}(s)'
        assert reason.startswith(head), (reason, head)
        return

    assert reason == "", reason
    assert assignment is not None
    assert assignment.pod_count == case.count
    assert assignment.levels == ((HOSTNAME,) if case.hostname_lowest else (BLOCK, RACK))

    by_hostname = {s.name: s.path for s in case.nodes}
    paths = []
    for dom in assignment.domains:
        assert dom.count > 0
        path = by_hostname.get(dom.values[0]) if case.hostname_lowest else dom.values
        assert path in leaves, f"{dom.values} is not a leaf"
        assert dom.count <= leaves[path], f"{dom.values}: {dom.count} pods, room for {leaves[path]}"
        paths.append(path)
    assert len(set(paths)) == len(paths)
    assert paths == sorted(paths)

    if case.mode == "required":
        assert len({p[: case.level + 1] for p in paths}) == 1
    if case.slice_level is not None:
        per_slice_domain: dict[tuple[str, ...], int] = defaultdict(int)
        for path, dom in zip(paths, assignment.domains, strict=True):
            per_slice_domain[path[: case.slice_level + 1]] += dom.count
        assert all(n % case.slice_size == 0 for n in per_slice_domain.values()), dict(per_slice_domain)


# ---------------------------------------------------------------- several PodSets of one workload


@st.composite
def pod_set_pairs(draw) -> tuple[Case, list[tuple[str, int, int, int]]]:
    """A cluster and two or three PodSets: (mode level, count, milli-CPU, GiB) each."""
    case = draw(cases())
    pod_sets = []
    for _ in range(draw(st.integers(2, 3))):
        pod_sets.append((
            draw(st.sampled_from(["required", "preferred", "unconstrained"])),
            draw(st.integers(0, case.depth - 1)),
            draw(st.integers(1, 8)),
            draw(st.sampled_from([500, 1000, 2000])),
            draw(st.sampled_from([0, 1])),
        ))
    return case, pod_sets


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_set_pairs())
def test_pod_sets_of_one_workload_never_overcommit_together(data):
    case, specs = data
    levels = case.levels
    raw = []
    for i, (mode, level, count, cpu, memory) in enumerate(specs):
        kwargs = {"unconstrained": True} if mode == "unconstrained" else {mode: levels[level]}
        raw.append(pod_set(f"ps{i}", count=count, cpu=f"{cpu}m", memory=f"{memory}Gi" if memory else None,
                           tolerations=[toleration("dedicated", "batch")] if case.tolerate else [], **kwargs))
    feature_gates = gates(TASProfileMixed=case.profile_mixed)
    snap = flavor_snapshot(objects_of(case), feature_gates=feature_gates)
    results = find_topology_assignments_for_flavor(snap, tas_requests(workload("w", pod_sets=raw)),
                                                   gates=feature_gates)

    by_hostname = {s.name: s for s in case.nodes}
    used: dict[tuple[str, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for i, (mode, level, count, cpu, memory) in enumerate(specs):
        placement = results.get(f"ps{i}")
        if placement is None:  # an earlier PodSet failed: placement stopped there
            assert any(results[f"ps{j}"].failure for j in range(i))
            break
        if placement.failure:
            assert placement.assignment is None
            continue
        assignment = placement.assignment
        assert assignment.pod_count == count
        paths = []
        for dom in assignment.domains:
            if case.hostname_lowest:
                spec = by_hostname[dom.values[0]]
                assert not (spec.tainted and not case.tolerate)
                path = spec.path
            else:
                path = dom.values
            paths.append(path)
            used[path]["cpu"] += cpu * dom.count
            used[path]["memory"] += memory * GIB * dom.count
            used[path]["pods"] += dom.count
        if mode == "required":
            assert len({p[: level + 1] for p in paths}) == 1

    rooms: dict[tuple[str, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in case.nodes:
        key = s.path if case.hostname_lowest else (s.block, s.rack)
        for r, v in node_room(s).items():
            rooms[key][r] += v
    for path, usage in used.items():
        for r, v in usage.items():
            if v:
                assert v <= rooms[path][r], (path, r, v, rooms[path][r])
