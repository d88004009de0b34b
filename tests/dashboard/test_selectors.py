"""The dashboard's reads: the display snapshot (every node of a flavor, Ready or not), the
topology page's parameters, placements, history filters and queue cards."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from django.http import QueryDict

from tasweb.dashboard import selectors
from tasweb.dashboard.selectors import CORDONED, NOT_READY, TAINTED, BadInput, NotFound
from tasweb.scheduling.models import AssignmentDomain
from tests.dashboard.conftest import CORDONED_NODE, NODES, NOT_READY_NODE, TAINTED_NODE, TOO_BIG

pytestmark = [pytest.mark.services, pytest.mark.django_db]

GPU = "nvidia.com/gpu"


def leaf_of(cap: selectors.FlavorCapacity, node: str) -> int:
    return cap.tree.node_to_leaf[node]


def test_display_snapshot_keeps_notready_and_cordoned_nodes_marked(cluster):
    cap = selectors.flavor_capacity(flavor="tas-gpu")
    assert cap.leaf_count == NODES  # the engine's own snapshot leaves two of them out
    assert [len(cap.tree.levels[lvl]) for lvl in range(3)] == [2, 4, NODES]
    assert cap.leaf_flags[leaf_of(cap, NOT_READY_NODE)] == NOT_READY
    assert cap.leaf_flags[leaf_of(cap, CORDONED_NODE)] == CORDONED
    assert cap.leaf_flags[leaf_of(cap, TAINTED_NODE)] == TAINTED
    assert "nvidia.com/gpu-health=degraded:NoSchedule" in cap.leaf_taints[leaf_of(cap, TAINTED_NODE)]
    assert int((cap.leaf_flags > 0).sum()) == 3
    # per block: how many nodes of each condition
    b2 = cap.domain_index(("b2",))
    assert cap.flag_counts[0][b2].tolist() == [1, 1, 1]
    assert cap.resources[0] == GPU  # extended resources first


def test_usage_is_what_admitted_workloads_hold_per_node(cluster):
    cap = selectors.flavor_capacity(flavor="tas-gpu")
    gpu = cap.column(GPU)
    leaf = cap.tree.levels[-1]
    tas = cap.tas_usage[-1][:, gpu]
    expected = np.zeros(NODES)
    per_pod = {"research/train-rack": 8, "research/train-block": 4, "training/serve-small": 2}
    for key, gpus in per_pod.items():
        namespace, name = key.split("/")
        for node, count in AssignmentDomain.objects.filter(
                workload__namespace=namespace, workload__name=name).values_list("node", "count"):
            expected[leaf.index_by_id[node]] += gpus * count
    assert tas.tolist() == expected.tolist()
    assert cap.allocatable[-1][:, gpu].tolist() == [8] * NODES
    # parents sum their children
    assert cap.tas_usage[0][:, gpu].sum() == tas.sum() == 8 * 3 + 4 * 4 + 2
    assert cap.workloads[("b1", "r1")] == ["research/train-rack"]


def test_topology_query_defaults_and_validation(cluster):
    q = selectors.topology_query(QueryDict(""))
    assert (q.flavor, q.resource, q.metric, q.domain) == ("tas-gpu", GPU, "used", ())
    q = selectors.topology_query(QueryDict("domain=b1/r2/b1-r2-n1&metric=free_units&resource=cpu"))
    assert q.domain == ("b1", "r2")  # a node is shown in its rack
    with pytest.raises(NotFound, match="'nope' is not a TAS flavor"):
        selectors.topology_query(QueryDict("flavor=nope"))
    with pytest.raises(BadInput, match=r"resource 'example\.com/fpga'"):
        selectors.topology_query(QueryDict("resource=example.com/fpga"))
    with pytest.raises(BadInput, match="metric 'hot'"):
        selectors.topology_query(QueryDict("metric=hot"))
    with pytest.raises(NotFound, match="domain 'b9'"):
        selectors.topology_query(QueryDict("domain=b9"))
    with pytest.raises(BadInput, match="level values"):
        selectors.topology_query(QueryDict("domain=b1//r2"))
    with pytest.raises(BadInput, match="only 3 levels"):
        selectors.topology_query(QueryDict("domain=a/b/c/d"))


def test_topology_query_without_any_flavor_is_none(db):
    assert selectors.topology_query(QueryDict("")) is None


def test_workload_placement_decodes_its_domains(cluster):
    row = selectors.workload_or_404("research", "train-rack")
    placement = selectors.workload_placement(workload=row)
    assert placement.flavor == "tas-gpu"
    assert {path[-1] for path in placement.pods_per_path} == cluster.nodes_of("research/train-rack")
    assert sum(placement.pods_per_path.values()) == 3
    assert '"levels"' in placement.encoded_text["main"]
    cap = selectors.flavor_capacity(flavor="tas-gpu")
    assert selectors.placement_scope(cap, list(placement.pods_per_path)) == ("b1",)
    with pytest.raises(NotFound, match="Workload research/ghost not found"):
        selectors.workload_or_404("research", "ghost")


def test_history_filters_are_the_apis(cluster):
    everything = selectors.history_events(QueryDict(""))
    assert everything.count() == cluster.events
    assert {e.kind for e in selectors.history_events(QueryDict("kind=Evicted&kind=Requeued"))} == {
        "Evicted", "Requeued"}
    node = selectors.history_events(QueryDict("kind=Evicted")).first().node
    assert selectors.history_events(QueryDict(f"node={node}")).count() == 3
    assert selectors.history_events(QueryDict("domain=b1")).count() == 3
    assert selectors.history_events(QueryDict("since=2025-06-01T12:03:00Z")).count() == 2
    with pytest.raises(BadInput, match="kind"):
        selectors.history_events(QueryDict("kind=Exploded"))
    with pytest.raises(BadInput, match="domain"):
        selectors.history_events(QueryDict("domain=b1//r2"))
    with pytest.raises(BadInput, match="since"):
        selectors.history_events(QueryDict("since=yesterday"))


def test_queue_cards_list_pending_in_order_with_quota(cluster):
    [card] = selectors.queue_cards()
    assert card.name == "cluster-queue"
    assert [f"{p['namespace']}/{p['name']}" for p in card.pending] == [TOO_BIG]
    assert card.pending[0]["position"] == 1
    assert card.counts.admitted == 3
    gpu = next(r for g in card.quota for f in g["flavors"] for r in f["resources"] if r["name"] == GPU)
    assert gpu["usage"] == str(8 * 3 + 4 * 4 + 2)
    with pytest.raises(NotFound):
        selectors.queue_cards(cluster_queue="nope")


def test_units_and_stored_values():
    assert selectors.unit_of("cpu").show(1500) == "1.5 cores"
    assert selectors.unit_of("memory").show(3 * 2**30) == "3 GiB"
    assert selectors.unit_of(GPU).show(8) == f"8 {GPU}"
    assert selectors.stored_value("cpu", "1500m") == 1500
    assert selectors.stored_value("memory", "2Gi") == 2 * 2**30
    assert selectors.stored_value("cpu", None) is None


def capacity_fields(cap: selectors.FlavorCapacity) -> dict:
    """Every field of a display snapshot, arrays as lists, the tree as its levels."""
    out = {}
    for name in ("flavor", "topology", "levels", "resources", "leaf_taints", "workloads", "nodes_without_levels"):
        out[name] = getattr(cap, name)
    for name in ("allocatable", "tas_usage", "other_usage", "flag_counts"):
        out[name] = [m.tolist() for m in getattr(cap, name)]
    out["leaf_flags"] = cap.leaf_flags.tolist()
    out["tree"] = [(level.key, level.values) for level in cap.tree.levels]
    out["leaf_nodes"] = [[n.name for n in group] for group in cap.tree.leaf_nodes]
    return out


def test_the_kept_frame_gives_what_a_fresh_view_gives_after_every_kind_of_change(cluster):
    """The display's tree and node conditions are kept while the engine's snapshot of the
    flavor stands (workloads and pods change only the usage); a node change brings them up to
    date, a new tree made from the kept one where the node came, went, moved or was resized,
    with the usage moved onto it. After each change the display equals one computed on a
    view built afresh."""
    from tasweb.api import state
    from tasweb.cluster.models import Node, Pod, Workload
    from tasweb.cluster.services import object_upsert
    from tasweb.scheduling.services import scheduling_pass_run
    from tasweb.simulator.objects import RACK_LABEL
    from tests.dashboard.conftest import NOW, cordon, node_update, not_ready, taint, workload_object

    def frame():
        return state.engine_view().kept.get(("display-frame", "tas-gpu"))

    def usage():
        return state.engine_view().kept.get(("display-usage", "tas-gpu"))

    def assert_as_fresh():
        view = state.engine_view()
        fresh = state.build_view(state.mirror_version())
        assert capacity_fields(view.remember(("test", view.caught_up),
                                             lambda: selectors._flavor_capacity(view, "tas-gpu"))) == \
            capacity_fields(selectors._flavor_capacity(fresh, "tas-gpu"))

    def bound_pod(phase: str, version: int) -> None:
        object_upsert(kind="Pod", obj={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "sidecar", "namespace": "infra", "uid": "uid-sidecar",
                         "resourceVersion": str(version)},
            "spec": {"nodeName": "b1-r1-n2", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]},
            "status": {"phase": phase}})

    def finish(namespace: str, name: str) -> None:
        row = Workload.objects.get(namespace=namespace, name=name)
        raw = copy.deepcopy(row.raw)
        raw["status"]["conditions"] = [*raw["status"].get("conditions", []), {
            "type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
            "lastTransitionTime": "2025-06-01T12:30:00Z"}]
        raw["metadata"]["resourceVersion"] = str(int(raw["metadata"].get("resourceVersion") or 0) + 1000)
        object_upsert(kind="Workload", obj=raw)

    selectors.flavor_capacity(flavor="tas-gpu")
    first = frame()
    assert first is not None
    def allocatable(raw: dict) -> None:
        raw["status"]["allocatable"]["cpu"] = "63"

    def smaller(raw: dict) -> None:
        raw["status"]["allocatable"]["cpu"] = "62"

    def holding(name: str) -> str:
        return AssignmentDomain.objects.filter(workload__name=name).order_by("node").values_list(
            "node", flat=True).first()

    def moved(raw: dict) -> None:
        raw["metadata"]["labels"][RACK_LABEL] = "r2"

    def ready(raw: dict) -> None:
        for condition in raw["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition.update(status="True", reason="KubeletReady", message="")

    def new_node(name: str, labels: dict) -> None:
        raw = copy.deepcopy(Node.objects.get(name="b1-r1-n2").raw)
        raw["metadata"].update(name=name, uid=f"uid-{name}", resourceVersion="1", labels=labels)
        object_upsert(kind="Node", obj=raw)

    def without_levels(name: str) -> dict:
        return {"node-group": "tas-gpu", "kubernetes.io/hostname": name}

    def of_the_flavor(name: str) -> dict:
        return {**Node.objects.get(name="b1-r1-n2").raw["metadata"]["labels"], "kubernetes.io/hostname": name}

    # (what, a new frame, a new tree): a node's conditions make a new frame on the same tree,
    # whose usage is kept; its allocatable or its place in the topology make a new tree
    steps = [
        ("a pod outside Kueue bound to a node", False, False, lambda: bound_pod("Running", 5)),
        ("that pod succeeded", False, False, lambda: bound_pod("Succeeded", 6)),
        ("a workload finished", False, False, lambda: finish("research", "train-rack")),
        ("a workload admitted by a pass", False, False, lambda: (
            object_upsert(kind="Workload", obj=workload_object("research", "late", count=1, gpus=2)),
            scheduling_pass_run(now=NOW))),
        ("a pod deleted", False, False, lambda: Pod.objects.filter(pk=Pod.objects.order_by("id").first().pk).delete()),
        ("a node holding pods resized", True, True, lambda: node_update(holding("train-block"), smaller)),
        ("a workload deleted", False, False, lambda: Workload.objects.filter(name="train-block").delete()),
        ("a node NotReady", True, False, lambda: node_update("b1-r1-n1", not_ready)),
        ("a node cordoned", True, False, lambda: node_update("b1-r2-n2", cordon)),
        ("a node tainted", True, False, lambda: node_update("b1-r2-n3", taint)),
        ("a pass after them", False, False, lambda: scheduling_pass_run(now=NOW)),
        ("a node's allocatable changed", True, True, lambda: node_update("b2-r1-n2", allocatable)),
        ("a node moved to another rack", True, True, lambda: node_update("b1-r1-n3", moved)),
        ("a pass after those", False, False, lambda: scheduling_pass_run(now=NOW)),
        ("the NotReady node Ready again", True, False, lambda: node_update("b1-r1-n1", ready)),
        ("a node of another flavor added", False, False, lambda: new_node("cpu-1", {"node-group": "cpu"})),
        ("a node of the flavor without its levels", True, False, lambda: new_node("bare-1", without_levels("bare-1"))),
        ("that node deleted", True, False, lambda: Node.objects.filter(name="bare-1").delete()),
        ("a node of the flavor added", True, True, lambda: new_node("b1-r1-extra", of_the_flavor("b1-r1-extra"))),
        ("a node of the flavor deleted", True, True, lambda: Node.objects.filter(name="b1-r1-extra").delete()),
    ]
    made_afresh = []
    original = selectors._frame_made

    def counting(*args, **kwargs):
        made_afresh.append(args)
        return original(*args, **kwargs)

    selectors._frame_made = counting
    try:
        for what, anew, new_tree, change in steps:
            before, counted = frame(), usage()
            counted_tree = counted.snap.tree
            change()
            selectors.flavor_capacity(flavor="tas-gpu")
            assert (frame() is not before) == anew, what
            # the tree, and the usage counted on it, are kept where only conditions changed;
            # a new tree is made from the kept one, and the usage moved onto it
            assert (frame().tree is not before.tree) == new_tree, what
            assert usage() is counted and (usage().snap.tree is not counted_tree) == new_tree, what
            assert usage().snap.tree is frame().tree, what
            assert made_afresh == [], what  # nothing made afresh for the kept view
            assert_as_fresh()
            made_afresh.clear()
    finally:
        selectors._frame_made = original
    assert frame().leaf_flags[frame().tree.node_to_leaf["b1-r1-n1"]] == 0
    assert frame().leaf_flags[frame().tree.node_to_leaf["b1-r2-n2"]] != 0
