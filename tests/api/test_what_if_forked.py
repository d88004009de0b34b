"""What-if played in a child forked from the web worker, on its copy of the engine view, gives
the answer of a what-if that reads the mirror and builds an engine afresh; the view itself is
left as it was."""

from __future__ import annotations

import copy
import logging
import time

import pytest

from tasweb.api import state, whatif
from tasweb.cluster.models import Workload
from tasweb.scheduling.services import scheduling_pass_run
from tests.api.conftest import BLOCK, DEMO_NOW, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

TOPOLOGY_LEVELS = ["cloud.example.com/topology-block", "cloud.example.com/topology-rack", "kubernetes.io/hostname"]


def kind(objects: list[dict], name: str) -> dict:
    return copy.deepcopy(next(o for o in objects if o["kind"] == name))


def cluster_queue(objects: list[dict], *, gpus: str | None = None, selector: dict | None = None,
                  preemption: dict | None = None, first_flavor: str | None = None) -> dict:
    cq = kind(objects, "ClusterQueue")
    if first_flavor is not None:  # tried before the others
        flavors = cq["spec"]["resourceGroups"][0]["flavors"]
        flavors.insert(0, {**copy.deepcopy(flavors[0]), "name": first_flavor})
    if preemption is not None:
        cq["spec"]["preemption"] = preemption
    if selector is not None:
        cq["spec"]["namespaceSelector"] = selector
    for rg in cq["spec"]["resourceGroups"]:
        for flavor in rg["flavors"]:
            for resource in flavor["resources"]:
                if gpus is not None and resource["name"] == "nvidia.com/gpu":
                    resource["nominalQuota"] = gpus
    return cq


def unusable_flavor(topology: str = "spare") -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "spare-gpu"},
            "spec": {"nodeLabels": {"node-group": "spare"}, "topologyName": topology}}


def topology(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]}}


def namespace(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.fixture
def mirrored(scheduled) -> list[dict]:
    """The example cluster after a pass, with what gives warnings (a workload naming a level
    no Topology has, a TAS flavor without its Topology) and a view that has followed changes
    since it was built (a workload added, a pass that admitted it, a waiting one)."""
    upsert(workload_object("typo", level="cloud.example.com/topology-rak"))
    upsert(unusable_flavor())
    view = state.engine_view()
    upsert(workload_object("later", count=4, gpus=2))
    scheduling_pass_run(now=DEMO_NOW)
    upsert(workload_object("waiting", count=4, gpus=8, level=BLOCK, priority=5))
    assert state.engine_view() is view and view.caught_up == 1
    view.state.tas_snapshots  # noqa: B018 -- read since (a capacity tree was asked for): its warnings were said
    return scheduled


def cordoned(objects: list[dict], name: str) -> dict:
    node = copy.deepcopy(next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == name))
    node["spec"] = {**node.get("spec", {}), "unschedulable": True}
    return node


def with_failed_node(name: str, node: str) -> dict:
    """A mirrored admitted workload as it is once Kueue noted one of its nodes failed: its
    second pass looks for a replacement."""
    raw = copy.deepcopy(Workload.objects.get(name=name).raw)
    raw["status"]["unhealthyNodes"] = [{"name": node}]
    return raw


BODIES = {
    "a workload that fits": lambda objs: workload_object("fits", count=2, gpus=1),
    "one too large, explained": lambda objs: workload_object("huge", count=64, gpus=8),
    "a priority one that preempts": lambda objs: [
        cluster_queue(objs, preemption={"withinClusterQueue": "LowerPriority"}),
        workload_object("urgent", count=24, gpus=8, level=BLOCK, priority=10_000)],
    "a mirrored workload replaced, then a new one": lambda objs: [
        workload_object("waiting", count=1, gpus=1), workload_object("after", count=3, gpus=2)],
    "more quota: waiting workloads admitted": lambda objs: [
        cluster_queue(objs, gpus="4096"), workload_object("with-more", count=8, gpus=8)],
    "the flavor's Topology and a node for it": lambda objs: [
        topology("spare"), cluster_queue(objs, first_flavor="spare-gpu"), {**kind(objs, "Node"), "metadata": {
            **kind(objs, "Node")["metadata"], "name": "spare-1",
            "labels": {**kind(objs, "Node")["metadata"]["labels"], "node-group": "spare",
                       "kubernetes.io/hostname": "spare-1"}}},
        workload_object("spare-fits", count=1, gpus=1)],
    "Namespaces the ClusterQueue does not select": lambda objs: [
        namespace("ml", {"team": "b"}), cluster_queue(objs, selector={"matchLabels": {"team": "a"}}),
        workload_object("not-selected", count=1, gpus=1)],
    "mirrored nodes cordoned, and a workload for their rack": lambda objs: [
        cordoned(objs, f"b2-r4-n{i}") for i in range(1, 5)] + [workload_object("beside", count=4, gpus=8)],
    "an admitted workload whose node failed": lambda objs: with_failed_node("job-bert-finetune", "b1-r1-n5"),
    "many workloads at once": lambda objs: [
        workload_object(f"batch-{i}", count=1 + i % 5, gpus=1 + i % 8, priority=i % 3,
                        level=None if i % 4 == 0 else BLOCK if i % 4 == 1 else None, mode="preferred")
        for i in range(24)],
}


def answers(body, settings, monkeypatch) -> tuple[dict, dict]:
    """The answer played in this process on a fresh engine, then forked on the view's."""
    settings.TAS_WHAT_IF_FORK = False
    fresh = whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW)
    settings.TAS_WHAT_IF_FORK = True

    def not_here(*_args, **_kwargs):
        raise AssertionError("played in the web process: the forked child failed")

    monkeypatch.setattr(whatif, "fresh_engine", not_here)
    forked = whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW)
    monkeypatch.undo()
    return fresh, forked


@pytest.mark.parametrize("what", list(BODIES))
def test_the_forked_answer_is_the_fresh_one(mirrored, settings, monkeypatch, what):
    fresh, forked = answers(BODIES[what](mirrored), settings, monkeypatch)
    assert forked == fresh
    assert fresh["workloads"]  # what it answers of
    assert any("topology-rak" in w for w in fresh["warnings"])  # the mirror's warnings said too
    assert any("spare-gpu" in w for w in fresh["warnings"]) == (what != "the flavor's Topology and a node for it")


def test_the_bodies_cover_what_they_are_named_for(mirrored, settings, monkeypatch):
    """The cases above are not vacuous: each shows what it is named for."""
    said = {what: answers(BODIES[what](mirrored), settings, monkeypatch)[1] for what in BODIES}
    status = {what: [w["status"] for w in body["workloads"]] for what, body in said.items()}
    assert status["a workload that fits"] == ["Admitted"]
    assert status["one too large, explained"] == ["Inadmissible"]
    assert said["one too large, explained"]["workloads"][0]["explanation"]["fits"] is False
    assert any(c["status"] == "Preempted" and c["statusBefore"] == "Admitted"
               for c in said["a priority one that preempts"]["changes"])
    assert [w["name"] for w in said["a mirrored workload replaced, then a new one"]["workloads"]] == [
        "waiting", "after"]
    assert any(c["name"] == "waiting" and c["status"] == "Admitted"
               for c in said["more quota: waiting workloads admitted"]["changes"])
    spare = said["the flavor's Topology and a node for it"]["workloads"][-1]
    assert spare["status"] == "Admitted" and spare["placement"][0]["domains"][0]["node"] == "spare-1"
    assert status["Namespaces the ClusterQueue does not select"] == ["Inadmissible"]
    assert len(said["many workloads at once"]["workloads"]) == 24
    beside = said["mirrored nodes cordoned, and a workload for their rack"]["workloads"][0]
    assert beside["status"] == "Admitted" and beside["placement"][0]["domains"]
    assert not any(d["node"].startswith("b2-r4-") for p in beside["placement"] for d in p["domains"])
    # its second pass ran in this pass (its rack has no node to spare: it is evicted)
    replaced = said["an admitted workload whose node failed"]["workloads"][0]
    assert replaced["status"] == "Evicted" and "unhealthy node(s): b1-r1-n5" in replaced["message"]


def test_the_view_is_left_as_it_was(mirrored, settings):
    settings.TAS_WHAT_IF_FORK = True
    view = state.engine_view()
    before = {key: (wl.admission is not None, wl.is_finished) for key, wl in view.workloads.items()}
    queue = view.state.cluster_queues["cluster-queue"]
    answer = whatif.what_if(body=[cluster_queue(mirrored, gpus="4096"),
                                  workload_object("urgent", count=16, gpus=8, level=BLOCK, priority=1000)],
                            now=DEMO_NOW)
    assert answer["workloads"][0]["status"] == "Admitted"
    assert state.engine_view() is view
    assert {key: (wl.admission is not None, wl.is_finished) for key, wl in view.workloads.items()} == before
    assert "ml/urgent" not in view.workloads
    assert view.state.cluster_queues["cluster-queue"] is queue
    assert not Workload.objects.filter(name="urgent").exists()


def broken(*_args, **_kwargs):
    raise RuntimeError("broken in the child")


def stuck(*_args, **_kwargs):
    time.sleep(30)


@pytest.mark.parametrize(("child", "said"), [(broken, "broken in the child"),
                                             (stuck, "still playing after 0.5s and was stopped")])
def test_a_child_that_fails_or_hangs_is_logged_and_the_pass_played_here(mirrored, settings, monkeypatch, caplog,
                                                                         child, said):
    settings.TAS_WHAT_IF_FORK = False
    body = workload_object("fits", count=2, gpus=1)
    expected = whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW)
    settings.TAS_WHAT_IF_FORK = True
    monkeypatch.setattr(whatif, "followed_engine", child)
    monkeypatch.setattr(whatif, "CHILD_SECONDS", 0.5)
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="tasweb.api.whatif"):
        assert whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW) == expected
    assert time.monotonic() - started < 10  # a stuck child is not waited for
    assert said in caplog.text and "played here instead" in caplog.text


def test_a_process_that_ignores_its_children_still_gets_the_answer(mirrored, settings, monkeypatch):
    """Where SIGCHLD is ignored, the kernel reaps the child itself: waiting for it fails."""
    import signal

    body = workload_object("fits", count=2, gpus=1)
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        fresh, forked = answers(body, settings, monkeypatch)
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert forked == fresh and forked["workloads"][0]["status"] == "Admitted"


def test_the_lean_results_give_the_answer_every_result_gives(mirrored, settings, monkeypatch):
    """What-if makes a whole result only for the workloads it may tell of; made for all of
    them, as the pass's own results are, the answer is the same."""
    from scheduler.cycle import unchanged_result

    def every(state, outcome, _posted, _stored):
        return [outcome.decided.get(key) or unchanged_result(state, wl) for key, wl in state.workload_map.items()]

    settings.TAS_WHAT_IF_FORK = False
    for what in ("a priority one that preempts", "more quota: waiting workloads admitted",
                 "an admitted workload whose node failed", "many workloads at once"):
        body = BODIES[what](mirrored)
        lean = whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW)
        with monkeypatch.context() as patched:
            patched.setattr(whatif, "_told", every)
            assert whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW) == lean, what
        assert lean["changes"] or what == "many workloads at once", what


def test_a_fork_refused_by_the_system_plays_the_pass_here(mirrored, settings, monkeypatch, caplog):
    import errno
    import os

    settings.TAS_WHAT_IF_FORK = False
    body = workload_object("fits", count=2, gpus=1)
    expected = whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW)
    settings.TAS_WHAT_IF_FORK = True

    def refused():
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", refused)
    with caplog.at_level(logging.ERROR, logger="tasweb.api.whatif"):
        assert whatif.what_if(body=copy.deepcopy(body), now=DEMO_NOW) == expected
    assert "could not fork the web process" in caplog.text and "Cannot allocate memory" in caplog.text
