"""The web process's engine view follows the mirror's change log: after every kind of change
it is the same view, brought up to date, and equal to one built afresh from the database;
where it cannot follow, it is built afresh."""

from __future__ import annotations

import time
import weakref

import pytest
from django.db import connection

from tasweb.api import selectors, state
from tasweb.cluster.models import Node, Pod, Workload
from tasweb.scheduling import runtime as rt
from tasweb.scheduling.services import scheduling_pass_run
from tests.api.conftest import DEMO_NOW, upsert, workload_object
from tests.engine.test_incremental_state import index_view, quota_view, snapshot_view
from tests.scheduling.support import alive_when_state_is_read

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def assert_equal_to_a_rebuild(view: state.EngineView) -> None:
    fresh = state.build_view(state.mirror_version())
    ours, theirs = view.state, fresh.state
    assert set(ours.workload_map) == set(theirs.workload_map)
    assert {k: (w.is_admitted, w.is_finished) for k, w in ours.workload_map.items()} == {
        k: (w.is_admitted, w.is_finished) for k, w in theirs.workload_map.items()}
    assert set(ours.nodes) == set(theirs.nodes) and set(ours.pod_map()) == set(theirs.pod_map())
    assert snapshot_view(ours) == snapshot_view(theirs)
    assert quota_view(ours) == quota_view(theirs)
    assert index_view(ours) == index_view(theirs)
    assert selectors._tree(view, "tas-gpu") == selectors._tree(fresh, "tas-gpu")


def node_object(scheduled: list[dict], name: str) -> dict:
    return next(o for o in scheduled if o["kind"] == "Node" and o["metadata"]["name"] == name)


def test_the_view_follows_every_kind_of_change(scheduled):
    view = state.engine_view()
    steps = [
        ("a new workload", lambda: upsert(workload_object("new-one", count=2, gpus=4))),
        ("a pass admits it", lambda: scheduling_pass_run(now=DEMO_NOW)),
        ("a node cordoned", lambda: upsert({**node_object(scheduled, "b2-r4-n1"), "spec": {"unschedulable": True}})),
        ("a pod deleted", lambda: Pod.objects.filter(name="llm-inference-0").delete()),
        ("a workload deleted", lambda: Workload.objects.filter(name="new-one").delete()),
        ("a node deleted", lambda: Node.objects.filter(name="b2-r4-n2").delete()),
        ("a ClusterQueue's quota", lambda: upsert(_cluster_queue_with_gpus(scheduled, "256"))),
        ("a pass after them", lambda: scheduling_pass_run(now=DEMO_NOW)),
    ]
    for i, (what, change) in enumerate(steps, start=1):
        change()
        assert state.engine_view() is view, what
        assert view.caught_up == i, what
        assert_equal_to_a_rebuild(view)
    assert selectors.cluster_queue_quota(name="cluster-queue")[0]["flavors"][0]["resources"][-1][
        "nominalQuota"] == "256"


def _cluster_queue_with_gpus(scheduled: list[dict], gpus: str) -> dict:
    import copy

    cq = copy.deepcopy(next(o for o in scheduled if o["kind"] == "ClusterQueue"))
    for rg in cq["spec"]["resourceGroups"]:
        for flavor in rg["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == "nvidia.com/gpu":
                    resource["nominalQuota"] = gpus
    cq["metadata"]["resourceVersion"] = "9"
    return cq


def test_a_view_not_caught_up_for_long_is_built_afresh(scheduled):
    view = state.engine_view()
    view.runtime.applied_at = time.monotonic() - rt.follower_seconds()  # what it missed may be pruned
    upsert(workload_object("new-one"))
    fresh = state.engine_view()
    assert fresh is not view and "ml/new-one" in fresh.workloads


def test_a_view_built_afresh_is_built_once_the_one_it_replaces_is_freed(scheduled, settings, monkeypatch):
    """Two views at once would double the web process's memory while the new one is read."""
    old = weakref.ref(state.engine_view())
    alive_at_build = alive_when_state_is_read(monkeypatch, old)
    settings.TAS_FEATURE_GATES = "TASBalancedPlacement=true"
    fresh = state.engine_view()
    assert alive_at_build == [False] and fresh.state.gates.enabled("TASBalancedPlacement")


def test_a_view_is_built_afresh_when_the_feature_gates_change(scheduled, settings):
    view = state.engine_view()
    settings.TAS_FEATURE_GATES = "TASBalancedPlacement=true"
    fresh = state.engine_view()
    assert fresh is not view and fresh.state.gates.enabled("TASBalancedPlacement")


def test_a_view_is_built_afresh_when_a_table_is_emptied(scheduled):
    view = state.engine_view()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE cluster_pod")
    fresh = state.engine_view()
    assert fresh is not view and not fresh.state.pod_map()


def test_applied_changes_stay_in_the_log_for_the_views(scheduled):
    """The scheduler prunes what it applied only once the views had time to apply it too."""
    from datetime import timedelta

    from django.utils import timezone

    from tasweb.cluster.models import MirrorChange

    upsert(workload_object("new-one"))
    scheduling_pass_run(now=DEMO_NOW)  # the scheduler applies it
    rt.change_log_prune()
    assert MirrorChange.objects.filter(name="new-one").exists()
    view = state.engine_view()
    assert "ml/new-one" in view.workloads
    rt.change_log_prune(now=timezone.now() + timedelta(seconds=rt.follower_seconds() + 1))
    # gone, but for the notes of the pass's own writes, which the scheduler applies next pass
    assert not MirrorChange.objects.filter(name="new-one", id__lte=rt.runtime_current().cursor).exists()


def test_a_view_another_thread_is_reading_is_served_as_it_is(scheduled):
    """Bringing the view up to date waits for no reader (one that asked for the view while
    reading would wait for ever): the request gets the view as it is, a later one updates it."""
    import threading

    view = state.engine_view()
    reading, done = threading.Event(), threading.Event()

    def reader() -> None:
        with view.lock:
            reading.set()
            done.wait(10)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        reading.wait(10)
        upsert(workload_object("new-one"))
        assert state.engine_view() is view and view.caught_up == 0 and "ml/new-one" not in view.workloads
    finally:
        done.set()
        thread.join()
    assert state.engine_view() is view and view.caught_up == 1 and "ml/new-one" in view.workloads


def test_the_views_queues_let_go_of_deleted_workloads(scheduled):
    view = state.engine_view()
    upsert(workload_object("short-lived"))
    state.engine_view()
    queues = view.runtime.engine.queues
    assert "ml/short-lived" in queues.assigned
    Workload.objects.filter(name="short-lived").delete()
    assert state.engine_view() is view and view.caught_up == 2
    assert "ml/short-lived" not in queues.assigned and "ml/short-lived" not in view.workloads
    assert not view.state.changes.any()  # nothing piles up between requests


def test_a_view_with_too_many_holes_in_what_it_read_is_built_afresh(scheduled):
    """As the scheduler's state: past MAX_GAP_RANGES change-log ids not visible yet, asking for
    each costs more than building afresh."""
    view = state.engine_view()
    view.runtime.gaps = [rt.Gap(i, i, time.monotonic()) for i in range(1, rt.MAX_GAP_RANGES + 2)]
    upsert(workload_object("new-one"))
    fresh = state.engine_view()
    assert fresh is not view and "ml/new-one" in fresh.workloads
