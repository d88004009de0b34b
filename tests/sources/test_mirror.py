"""The Kubernetes mirror against a fake API server, through the official client: list, watch,
bookmarks, 410 Gone, dropped and stalled connections, restarts and locks."""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import replace

import pytest
from django.core.cache import cache

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert as real_object_upsert
from tasweb.sources import services as source_services
from tasweb.sources.kubeapi import MIRRORED_KINDS
from tasweb.sources.locks import lock_holder, lock_key
from tasweb.sources.mirror import backoff_delay, mirror_run
from tasweb.sources.models import MirrorCheckpoint

from . import objects
from .conftest import FAST, in_sync, mirror_differences, running_mirror, wait_until, watching
from .fakekube import FakeKube

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def upserts(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every watch event the mirror applies, as (kind, uid, resourceVersion) -> times applied."""
    applied: Counter = Counter()

    def spy(*, kind: str, obj):
        applied[kind, obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]] += 1
        return real_object_upsert(kind=kind, obj=obj)

    monkeypatch.setattr(source_services, "object_upsert", spy)
    return applied


def seed(kube: FakeKube) -> None:
    for obj in objects.small_cluster():
        kube.create(obj)


def watch_requests(kube: FakeKube, path: str) -> list:
    return [r for r in kube.requests_to("GET", path) if r.query.get("watch") == "true"]


def list_requests(kube: FakeKube, path: str) -> list:
    return [r for r in kube.requests_to("GET", path) if r.query.get("watch") != "true"]


def test_lists_every_kind_then_follows_the_watch(kube: FakeKube, kubeconfig, upserts: Counter):
    seed(kube)
    with running_mirror():
        wait_until(lambda: in_sync(kube), what="the first list of every kind")

        # paginated: 8 nodes in pages of 2, the continue token passed back
        node_lists = list_requests(kube, "/api/v1/nodes")
        assert [r.query.get("limit") for r in node_lists] == ["2"] * 4
        assert node_lists[0].query.get("continue") is None
        assert all(r.query.get("continue") for r in node_lists[1:])
        # the watch starts at the list's resourceVersion, with bookmarks
        first_watch = watch_requests(kube, "/api/v1/nodes")[0]
        assert first_watch.query["resourceVersion"] == str(node_lists[0].list_rv)
        assert first_watch.query["allowWatchBookmarks"] == "true"
        assert watch_requests(kube, "/apis/kueue.x-k8s.io/v1beta2/workloads")

        kube.create(objects.node("b3-r1-n1", block="b3", rack="r1"))
        kube.update("Node", "b1-r1-n2", lambda n: n["metadata"]["labels"].update(drained="true"))
        kube.delete("Node", "b2-r2-n2")
        kube.update("Workload", "train", lambda w: w["spec"].update(priority=5), namespace="ml")
        kube.delete("Pod", "inference-0", namespace="serving")
        wait_until(lambda: not mirror_differences(kube), what="the watched changes")

    assert cluster.Node.objects.count() == 8
    assert cluster.Node.objects.get(name="b1-r1-n2").labels["drained"] == "true"
    assert not cluster.Pod.objects.filter(name="inference-0").exists()
    assert cluster.Workload.objects.get(name="train").raw["spec"]["priority"] == 5
    # core list items come without kind/apiVersion: the mirror stores them as kubectl shows them
    assert cluster.Node.objects.get(name="b1-r1-n1").raw["kind"] == "Node"
    assert set(MirrorCheckpoint.objects.values_list("kind", flat=True)) == set(MIRRORED_KINDS)
    assert max(upserts.values()) == 1


def test_mirror_equals_the_server_after_a_410_and_a_dropped_connection(kube: FakeKube, kubeconfig, upserts: Counter):
    seed(kube)
    with running_mirror() as runner:
        wait_until(lambda: in_sync(kube), what="the first sync")
        node_watches_before = len(watch_requests(kube, "/api/v1/nodes"))

        # Nodes: the connection drops in the middle of the second event; the mirror reconnects
        # from the first event's resourceVersion and gets the rest.
        kube.drop_watch("Node", after_events=1)
        first = kube.create(objects.node("b3-r1-n1", block="b3", rack="r1"))
        kube.update("Node", "b1-r1-n1", lambda n: n["metadata"]["labels"].update(rack_power="a"))
        kube.delete("Node", "b1-r2-n1")
        kube.create(objects.node("b3-r1-n2", block="b3", rack="r1"))

        # Pods: the history is compacted (ERROR event with code 410) while pods change;
        # the mirror lists again and the deletion reaches it through the list.
        kube.expire("Pod")
        kube.delete("Pod", "inference-0", namespace="serving")
        kube.update("Pod", "train-1", lambda p: p["status"].update(phase="Failed"), namespace="ml")
        kube.create(objects.running_pod("inference-1", "b1-r1-n2"))

        # Workloads: the watch drops, and the new watch is refused with HTTP 410 Gone.
        kube.fail_next_watches("Workload", 410)
        kube.drop_watch("Workload")
        kube.create(objects.workload("evaluate", count=1))
        kube.delete("Workload", "train", namespace="ml")

        wait_until(lambda: not mirror_differences(kube) and all(watching(kube, k) for k in ("Node", "Pod", "Workload")),
                   what="the mirror to catch up after the faults")
        # the dropped node watch resumed exactly after the event it had applied
        node_watches = watch_requests(kube, "/api/v1/nodes")[node_watches_before:]
        assert node_watches[0].query["resourceVersion"] == first["metadata"]["resourceVersion"]
        # both 410s led to a new list
        assert len(list_requests(kube, "/api/v1/pods")) >= 2
        assert len(list_requests(kube, "/apis/kueue.x-k8s.io/v1beta2/workloads")) >= 2

    summary = runner.result
    assert summary["gone"] >= 2
    assert mirror_differences(kube) == []
    # nothing duplicated, deletions applied
    assert cluster.Node.objects.count() == len(kube.objects("Node")) == 9
    assert not cluster.Node.objects.filter(name="b1-r2-n1").exists()
    assert set(cluster.Pod.objects.values_list("name", flat=True)) == {"train-0", "train-1", "inference-1"}
    assert list(cluster.Workload.objects.values_list("name", flat=True)) == ["evaluate"]
    assert cluster.Pod.objects.get(name="train-1").phase == "Failed"
    # no watch event was applied twice, though the node events were sent twice
    assert max(upserts.values()) == 1


def test_bookmarks_move_the_checkpoint(kube: FakeKube, kubeconfig):
    seed(kube)
    with running_mirror():
        wait_until(lambda: in_sync(kube), what="the first sync")
        nodes_before = MirrorCheckpoint.objects.get(kind="Node")
        for i in range(3):
            kube.create(objects.running_pod(f"batch-{i}", "b2-r1-n1"))
        latest = kube.resource_version

        def node_checkpoint_at_latest() -> bool:
            return int(MirrorCheckpoint.objects.get(kind="Node").resource_version) >= latest

        wait_until(node_checkpoint_at_latest, what="a BOOKMARK for nodes")
    nodes_after = MirrorCheckpoint.objects.get(kind="Node")
    assert nodes_after.events_applied == nodes_before.events_applied  # only bookmarks, no node event


def test_a_silent_watch_is_abandoned_after_the_read_timeout(kube: FakeKube, kubeconfig):
    seed(kube)
    with running_mirror(kinds=["Node"], read_timeout=1.0):
        wait_until(lambda: watching(kube, "Node"), what="the node watch")
        watches = len(watch_requests(kube, "/api/v1/nodes"))
        kube.stall_watches("Node")
        kube.update("Node", "b2-r1-n1", lambda n: n["spec"].update(unschedulable=True))
        wait_until(lambda: cluster.Node.objects.get(name="b2-r1-n1").unschedulable, what="the node update")
        assert watch_requests(kube, "/api/v1/nodes")[watches:], "no new watch after the stalled one"
    checkpoint = MirrorCheckpoint.objects.get(kind="Node")
    assert checkpoint.last_error_at is not None  # the timeout was recorded ...
    assert checkpoint.last_error == ""  # ... and cleared by the next event applied


def test_backoff_grows_is_capped_and_jittered():
    delays = [backoff_delay(n, base=0.5, cap=30) for n in range(1, 12)]
    assert 0.25 <= delays[0] <= 0.5
    assert all(15 <= d <= 30 for d in delays[7:])
    assert len({round(backoff_delay(5, base=0.5, cap=30), 6) for _ in range(20)}) > 1
    assert backoff_delay(3, base=0.5, cap=30) <= 2.0


def test_falls_back_to_v1beta1_when_the_server_lacks_v1beta2(kubeconfig, tmp_path, monkeypatch):
    old = FakeKube(kueue_versions=("v1beta1",)).start()
    try:
        path = tmp_path / "kubeconfig-old"
        path.write_text(old.kubeconfig())
        monkeypatch.setenv("KUBECONFIG", str(path))
        for obj in objects.small_cluster():
            old.create(obj)
        with running_mirror():
            wait_until(lambda: in_sync(old), what="the v1beta1 mirror")
        assert watch_requests(old, "/apis/kueue.x-k8s.io/v1beta1/workloads")
        assert MirrorCheckpoint.objects.get(kind="Workload").api_version == "kueue.x-k8s.io/v1beta1"
        assert MirrorCheckpoint.objects.get(kind="Node").api_version == "v1"
    finally:
        old.stop()


def test_restarted_mirror_resumes_from_its_checkpoints(kube: FakeKube, kubeconfig, upserts: Counter):
    seed(kube)
    with running_mirror():
        wait_until(lambda: in_sync(kube), what="the first run")
        kube.update("Node", "b1-r1-n1", lambda n: n["metadata"]["labels"].update(generation="1"))
        wait_until(lambda: not mirror_differences(kube), what="the first run's event")
    stopped_at = kube.resource_version
    checkpoints = dict(MirrorCheckpoint.objects.values_list("kind", "resource_version"))
    applied_before = sum(MirrorCheckpoint.objects.values_list("events_applied", flat=True))
    requests_before = len(kube.requests)

    # changes while no mirror runs
    kube.update("Node", "b1-r1-n1", lambda n: n["metadata"]["labels"].update(generation="2"))
    kube.delete("Node", "b2-r2-n2")
    kube.create(objects.workload("evaluate", count=1))
    kube.update("Workload", "train", lambda w: objects.kueue_admission(w, [("b1-r1-n1", 1), ("b1-r1-n2", 1)]),
                namespace="ml")
    missed = kube.events_since(stopped_at)

    with running_mirror():
        wait_until(lambda: in_sync(kube), what="the restarted mirror")
    restart_requests = kube.requests[requests_before:]
    # no list: every kind resumed its watch at its checkpoint
    gets = [r for r in restart_requests if r.method == "GET" and "/namespaces/" not in r.path
            and not r.path.endswith(("/v1beta2", "/v1beta1"))]
    assert all(r.query.get("watch") == "true" for r in gets)
    first_watch = {}
    for r in gets:
        first_watch.setdefault(r.path, r.query["resourceVersion"])
    assert first_watch["/api/v1/nodes"] == checkpoints["Node"]
    assert first_watch["/apis/kueue.x-k8s.io/v1beta2/workloads"] == checkpoints["Workload"]
    # exactly the events missed were applied, each once
    applied_after = sum(MirrorCheckpoint.objects.values_list("events_applied", flat=True))
    assert applied_after - applied_before == missed
    assert max(upserts.values()) == 1
    assert mirror_differences(kube) == []


def report_status(beat: str, **ready):
    """A kubelet's status report: every condition's lastHeartbeatTime and the kubelet's
    managedFields time are new; `ready` changes the Ready condition too."""
    def change(node: dict) -> None:
        node["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update", "time": beat,
                                              "subresource": "status"}]
        for condition in node["status"]["conditions"]:
            condition["lastHeartbeatTime"] = beat
            if condition["type"] == "Ready":
                condition.update(ready)
    return change


def node_events(runner) -> int:
    return sum(mirror.stats["events"] for mirror in runner.mirrors if mirror.kind == "Node")


def test_node_heartbeats_are_not_written_and_their_checkpoint_waits(kube: FakeKube, kubeconfig):
    """A kubelet reports its node's status every few minutes with nothing but heartbeats
    new: the mirror neither writes the row (nor does the change log note it, so the scheduler
    reads nothing) nor saves its checkpoint for each; a real change is written at once."""
    seed(kube)
    with running_mirror(kinds=["Node"], checkpoint_every=3600) as runner:
        wait_until(lambda: not node_differences(kube) and watching(kube, "Node"), what="the first list")
        row = cluster.Node.objects.get(name="b1-r1-n1")
        checkpoint = MirrorCheckpoint.objects.get(kind="Node")
        last_change = cluster.MirrorChange.objects.order_by("-id").values_list("id", flat=True).first() or 0

        for minute in range(5):
            kube.update("Node", "b1-r1-n1", report_status(f"2025-06-01T12:0{minute}:00Z"))
        kube.update("Node", "b1-r1-n2", lambda n: n["metadata"]["labels"].update(drained="true"))
        wait_until(lambda: cluster.Node.objects.get(name="b1-r1-n2").labels.get("drained"), what="the label")

        # the heartbeats changed no row and noted no change; the label, once
        assert cluster.Node.objects.get(name="b1-r1-n1").resource_version == row.resource_version
        assert cluster.Node.objects.get(name="b1-r1-n1").raw == row.raw
        noted = cluster.MirrorChange.objects.filter(id__gt=last_change).order_by("id")
        assert list(noted.values_list("kind", "name")) == [("Node", "b1-r1-n2")]
        assert node_differences(kube) == []
        # the change saved the checkpoint, counting the heartbeats before it
        saved = MirrorCheckpoint.objects.get(kind="Node")
        assert saved.resource_version == str(kube.resource_version)
        assert saved.events_applied == checkpoint.events_applied + 6

        for minute in range(3):  # heartbeats alone: the checkpoint waits (checkpoint_every)
            kube.update("Node", "b1-r1-n1", report_status(f"2025-06-01T12:1{minute}:00Z"))
        wait_until(lambda: node_events(runner) >= 9, what="the heartbeats")
        assert MirrorCheckpoint.objects.get(kind="Node").resource_version == saved.resource_version

        # a report that changes the Ready condition is a change
        kube.update("Node", "b1-r1-n1", report_status("2025-06-01T12:20:00Z", status="False",
                                                      lastTransitionTime="2025-06-01T12:20:00Z"))
        wait_until(lambda: cluster.Node.objects.get(name="b1-r1-n1").ready == "False", what="NotReady")
        assert MirrorCheckpoint.objects.get(kind="Node").events_applied == checkpoint.events_applied + 10
        for minute in range(2):
            kube.update("Node", "b1-r1-n1", report_status(f"2025-06-01T12:3{minute}:00Z"))
        latest = kube.resource_version
        wait_until(lambda: node_events(runner) >= 12, what="the last heartbeats")
    # stopping saves the checkpoint of the heartbeats that waited
    stopped = MirrorCheckpoint.objects.get(kind="Node")
    assert stopped.resource_version == str(latest)
    assert stopped.events_applied == checkpoint.events_applied + 12
    assert node_differences(kube) == []


def test_a_relist_does_not_rewrite_nodes_whose_only_change_is_heartbeats(db):
    from tasweb.cluster.services import objects_resync

    listed = [dict(objects.node(f"n{i}", block="b1", rack="r1"), metadata={
        "name": f"n{i}", "uid": f"uid-{i}", "resourceVersion": str(10 + i),
        "labels": objects.node(f"n{i}", block="b1", rack="r1")["metadata"]["labels"]}) for i in range(3)]
    assert objects_resync(kind="Node", objects=listed)["created"] == 3
    relisted = []
    for i, node in enumerate(listed):
        node = copy.deepcopy(node)
        node["metadata"]["resourceVersion"] = str(100 + i)
        report_status("2025-06-01T12:00:00Z")(node)
        if i == 2:
            node["spec"]["unschedulable"] = True
        relisted.append(node)
    assert objects_resync(kind="Node", objects=relisted) == {"created": 0, "updated": 1, "deleted": 0, "total": 3}
    assert list(cluster.Node.objects.order_by("name").values_list("resource_version", "unschedulable")) == [
        ("10", False), ("11", False), ("102", True)]


def test_two_runs_never_mirror_one_kind_at_once(kube: FakeKube, kubeconfig):
    seed(kube)
    with running_mirror(kinds=["Node", "Pod"]):
        wait_until(lambda: watching(kube, "Node") and watching(kube, "Pod"))
        second = mirror_run(window_seconds=1, kinds=["Node", "Pod", "Topology"],
                            options=replace(FAST, lock_ttl=5))
        assert second["kinds"] == ["Topology"]
        assert second["skipped"] == ["Node", "Pod"]
    # once the first run has stopped, its kinds are free
    third = mirror_run(window_seconds=1, kinds=["Node"], options=FAST)
    assert third["kinds"] == ["Node"]


def test_locks_lost_with_the_cache_are_taken_again(kube: FakeKube, kubeconfig):
    seed(kube)
    with running_mirror(kinds=["Node"]) as runner:
        wait_until(lambda: watching(kube, "Node") and not node_differences(kube), what="the node mirror")
        cache.delete(lock_key("mirror:Node"))  # as after Redis restarted empty
        wait_until(lambda: runner.lost == ["Node"] and lock_holder("mirror:Node") is not None,
                   what="the lock taken again")
        kube.create(objects.node("b3-r1-n1", block="b3", rack="r1"))
        wait_until(lambda: not node_differences(kube), what="the node mirror after the takeover")
    assert cluster.Node.objects.count() == 9
    assert len(list_requests(kube, "/api/v1/nodes")) == 4  # resumed from the checkpoint: no second list


def node_differences(kube: FakeKube) -> list[str]:
    return [d for d in mirror_differences(kube) if d.startswith("Node ")]
