"""What-if and why-pending through the service agree with the passes that follow.

On the example cluster after a pass, a random Workload is posted to what-if; then it is
added to the mirror and the scheduler runs its pass. A workload what-if says would be
admitted is admitted by that pass; one it says would wait is not. Then, for every waiting
workload, why-pending's verdict `waits` holds for the next pass over the unchanged mirror.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasweb.api.selectors import why_pending
from tasweb.api.state import engine_view_reset
from tasweb.cluster.models import Workload
from tasweb.scheduling.runtime import runtime_discard
from tasweb.scheduling.services import scheduling_pass_run
from tests.api.conftest import BLOCK, DEMO_NOW, RACK, upsert, workload_object

pytestmark = [pytest.mark.services, pytest.mark.django_db]

WAITING = ("Pending", "Inadmissible")


class Rollback(Exception):
    pass


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(count=st.integers(1, 12), gpus=st.integers(1, 8), level=st.sampled_from([RACK, BLOCK, None]),
       priority=st.integers(0, 200))
def test_what_if_and_why_pending_hold_for_the_next_passes(scheduled, token_client, count, gpus, level, priority):
    runtime_discard("each example starts from the database")
    engine_view_reset()
    try:
        with transaction.atomic():
            posted = workload_object("probe", count=count, gpus=gpus, level=level, priority=priority)
            response = token_client.post("/api/v1/what-if/", data=json.dumps(posted),
                                         content_type="application/json")
            assert response.status_code == 200, response.content
            (answer,) = response.json()["workloads"]
            upsert(posted)
            scheduling_pass_run(now=DEMO_NOW + timedelta(seconds=5))
            stored = Workload.objects.get(namespace="ml", name="probe")
            if answer["status"] == "Admitted":
                assert stored.status == "Admitted", (answer, stored.message)
            elif answer["status"] in WAITING:
                assert stored.status in WAITING, (answer, stored.message)
                assert answer["explanation"]["verdict"] != "fits"
            engine_view_reset()
            verdicts = {w.key: why_pending(workload=w)["explanation"]["verdict"]
                        for w in Workload.objects.filter(status__in=WAITING)}
            scheduling_pass_run(now=DEMO_NOW + timedelta(seconds=10))
            for key, verdict in verdicts.items():
                namespace, name = key.split("/")
                status = Workload.objects.get(namespace=namespace, name=name).status
                if verdict == "waits":
                    assert status in WAITING, key
                elif verdict == "fits":
                    assert status == "Admitted", key
            raise Rollback
    except Rollback:
        pass
    finally:
        runtime_discard("the example's passes were rolled back")
        engine_view_reset()
