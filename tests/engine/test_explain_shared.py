"""Explanations of many workloads on one state may share what they compute once (`Shared`,
what-if's posted workloads): each is the explanation the workload gets alone."""

from __future__ import annotations

from scheduler.explain import Shared, explain_workload

from .factories import HOSTNAME, RACK, admitted, cluster_state, domains_json, grid, tas_setup, workload


def test_shared_explanations_are_those_made_alone():
    nodes = grid(blocks=2, racks=2, nodes=2, cpu="4")  # 8 nodes of 4 CPUs, 2 a rack
    running = [
        admitted(workload(f"run-{i}", count=2, cpu="4", required=RACK, priority=i),
                 assignments={"main": domains_json(
                     [HOSTNAME], [(f"b{1 + i // 2}-r{1 + i % 2}-n1", 1), (f"b{1 + i // 2}-r{1 + i % 2}-n2", 1)])})
        for i in range(4)  # every rack full
    ]
    waiting = [workload(f"wait-{i}", count=count, cpu="4", required=RACK, created=10 + i)
               for i, count in enumerate((2, 3, 2, 1))]
    state = cluster_state([*tas_setup(quota={"cpu": 1000}), *nodes, *running, *waiting])
    pending = [w for w in state.workloads if w.name.startswith("wait-")]
    alone = [explain_workload(state, wl) for wl in pending]
    shared = Shared()
    together = [explain_workload(state, wl, shared=shared) for wl in pending]
    assert together == alone
    kinds = {s.kind for e in alone for ps in e.pod_sets for s in ps.suggestions} | {
        s.kind for e in alone for s in e.suggestions}
    assert "free-capacity" in kinds  # the search ran, on the shared list
    # the state is as it was: explaining again, alone, gives the same
    assert [explain_workload(state, wl) for wl in pending] == alone
