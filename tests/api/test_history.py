"""History: cluster-wide and per workload, every filter."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tasweb.scheduling.models import EventKind
from tests.api.conftest import DEMO_NOW, event, results, upsert

pytestmark = [pytest.mark.services, pytest.mark.django_db]


@pytest.fixture
def events(scheduled):
    """The pass's Admitted/Pending events, plus a node failure history on b1/r3."""
    early = DEMO_NOW - timedelta(hours=2)
    return {
        "unhealthy": event("ml/job-llm-pretrain", EventKind.NODE_UNHEALTHY, node="b1-r3-n2",
                           domain="b1/r3/b1-r3-n2", at=early, message="node NotReady"),
        "replaced": event("ml/job-llm-pretrain", EventKind.NODE_REPLACED, node="b1-r3-n2", domain="b1/r3/b1-r3-n2",
                          at=early + timedelta(minutes=1)),
        "evicted": event("ml/job-vision-train", EventKind.EVICTED, node="b2-r1-n1", domain="b2/r1/b2-r1-n1",
                         at=early + timedelta(minutes=2)),
        "elsewhere": event("other/job", EventKind.REQUEUED, at=early + timedelta(minutes=3), cluster_queue="other"),
    }


def ids(response) -> list[int]:
    return [item["id"] for item in results(response)]


def test_history_filters(events, client):
    def history(**query) -> list[int]:
        return ids(client.get("/api/v1/history/", {"page_size": 500, **query}))

    everything = history()
    assert len(everything) == 8 + 4  # the pass's 7 Admitted + 1 Pending, and the four above
    times = [item["at"] for item in results(client.get("/api/v1/history/", {"page_size": 500}))]
    assert times == sorted(times, reverse=True)  # newest first
    e = {name: ev.id for name, ev in events.items()}
    assert history(kind="NodeMarkedUnhealthy") == [e["unhealthy"]]
    assert set(history(kind=["NodeReplaced", "Evicted"])) == {e["replaced"], e["evicted"]}
    assert set(history(node="b1-r3-n2")) == {e["unhealthy"], e["replaced"]}
    assert set(history(domain="b1/r3")) == {e["unhealthy"], e["replaced"]}
    assert set(history(domain="b1")) == {e["unhealthy"], e["replaced"]}
    assert history(domain="b2/r1/b2-r1-n1") == [e["evicted"]]
    assert history(domain="b1/r") == []  # a path, not a text prefix
    assert history(cluster_queue="other") == [e["elsewhere"]]
    assert history(workload="other/job") == [e["elsewhere"]]
    assert set(history(namespace="other")) == {e["elsewhere"]}
    assert set(history(queue="team-a", kind="NodeReplaced")) == {e["replaced"]}
    until = (DEMO_NOW - timedelta(hours=2) + timedelta(minutes=2)).isoformat()
    assert set(history(until=until)) == {e["unhealthy"], e["replaced"]}
    assert set(history(since=until, kind=["Evicted", "Requeued"])) == {e["evicted"], e["elsewhere"]}
    assert history(ordering="at")[:2] == [e["unhealthy"], e["replaced"]]


def test_history_item_and_per_workload(events, client):
    items = results(client.get("/api/v1/workloads/ml/job-llm-pretrain/history/"))
    assert [i["kind"] for i in items] == ["Admitted", "NodeReplaced", "NodeMarkedUnhealthy"]
    unhealthy = items[-1]
    assert unhealthy["workload"] == "ml/job-llm-pretrain" and unhealthy["node"] == "b1-r3-n2"
    assert unhealthy["domain"] == "b1/r3/b1-r3-n2" and unhealthy["message"] == "node NotReady"
    assert unhealthy["details"] == {"test": True} and unhealthy["schedulingPass"] is None
    admitted = items[0]
    assert admitted["schedulingPass"] is not None and admitted["details"]["podSets"]
    only = results(client.get("/api/v1/workloads/ml/job-llm-pretrain/history/", {"kind": "NodeReplaced"}))
    assert [i["kind"] for i in only] == ["NodeReplaced"]
    # history outlives the workload
    assert [i["kind"] for i in results(client.get("/api/v1/workloads/other/job/history/"))] == ["Requeued"]


def test_history_records_a_real_node_failure(scheduled, client):
    from tasweb.scheduling.services import scheduling_pass_run

    node = next(o for o in scheduled if o["kind"] == "Node" and o["metadata"]["name"] == "b1-r3-n2")
    node["status"]["conditions"] = [{"type": "Ready", "status": "False",
                                     "lastTransitionTime": "2025-06-01T11:00:00Z"}]
    node["metadata"]["resourceVersion"] = "99"
    upsert(node)
    scheduling_pass_run(now=DEMO_NOW + timedelta(hours=1))
    items = results(client.get("/api/v1/history/", {"node": "b1-r3-n2"}))
    assert items and all(i["node"] == "b1-r3-n2" for i in items)
    assert {i["workload"] for i in items} == {"ml/job-llm-pretrain"}
    assert results(client.get("/api/v1/history/", {"domain": "b1/r3", "workload": "ml/job-llm-pretrain"}))


@pytest.mark.parametrize(("query", "field"), [({"kind": "Exploded"}, "kind"), ({"since": "soon"}, "since"),
                                               ({"until": "2025-13-01"}, "until"), ({"workload": "noslash"},
                                                                                     "workload"),
                                               ({"domain": "//"}, "domain"), ({"ordering": "message"}, "ordering")])
def test_bad_history_filters_are_400(scheduled, client, query, field):
    response = client.get("/api/v1/history/", query)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
