"""The why-pending panel tells what has changed since the scheduling cycle decided (quota
used or freed, room freed) apart from what would help: the quota lines it shows are the
cycle's, and a change since is not a remedy."""

from __future__ import annotations

import pytest
from django.test import Client

from tasweb.api.state import engine_view_reset
from tasweb.cluster.services import object_upsert
from tasweb.scheduling.services import scheduling_pass_run
from tests.engine.factories import HOSTNAME, NOW, admitted, domains_json, workload
from tests.engine.test_why_pending_no_room import two_racks_one_node_taken_in_each

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def upsert(obj: dict) -> None:
    obj = {**obj, "metadata": {"resourceVersion": "1", **obj["metadata"]}}
    object_upsert(kind=obj["kind"], obj=obj)


def test_quota_used_since_the_cycle_is_told_apart_from_what_would_help():
    for obj in two_racks_one_node_taken_in_each(16):
        upsert(obj)
    scheduling_pass_run(now=NOW)
    # another workload takes the quota's last 4 CPUs (on a free node) after the pass
    upsert(admitted(workload("c", queue="lq", cpu="4", created=-30), cluster_queue_name="cq",
                    assignments={"main": domains_json([HOSTNAME], [("b1-r1-n2", 1)])}))
    engine_view_reset()

    response = Client().get("/workloads/default/big/why-pending/")
    assert response.status_code == 200, response.content[:300]
    html = response.json()["html"]
    since, _, helps = html.partition("Since the scheduling cycle decided:")[2].partition("What would help:")
    assert "quota has been used since the scheduling cycle decided" in since
    assert "insufficient unused quota for cpu in flavor tas-flavor, 4 more needed" in since
    assert "quota has been used since" not in helps
    assert "the topology has no room for pod set main now either" in helps
