"""The start-time estimate in the scheduler's worker: queued after a pass, run in the
process that holds the pass's engine, its predictions stored."""

from __future__ import annotations

import re
import time

import pytest

from tasweb.scheduling.models import PredictionRun, SchedulingPass, WorkloadPrediction
from tasweb.scheduling.services import request_pass

from .support import EXAMPLE_ADMISSIBLE, admitted_count, import_example_cluster, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("fork", ["true", "false"])
def test_the_scheduler_worker_estimates_after_its_pass(workers, fork):
    """In a child process it forks (the default where the OS can fork), or in the worker."""
    worker = workers("scheduler", env={"TAS_ETA_FORK": fork})
    worker.wait_ready()
    import_example_cluster()
    request_pass()
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE, timeout=30, what="the first pass", workers=(worker,))
    # the example's one workload that never fits: the estimate says so
    wait_for(lambda: WorkloadPrediction.objects.exists(), timeout=30, what="the estimate", workers=(worker,))
    row = WorkloadPrediction.objects.get()
    assert row.workload_key == "ml/job-moe-too-big"
    assert row.start is None and row.reason
    assert PredictionRun.objects.get().scheduling_pass_id == SchedulingPass.objects.latest("id").id
    # the child logs once its predictions are stored: the line may follow the row by a moment
    line = wait_for(lambda: next((line for line in worker.log().splitlines()
                                  if "start-time estimate: 1 waiting workloads" in line), None),
                    timeout=10, what="the estimate's log line", workers=(worker,))
    process = int(re.search(r"\[process (\d+)\]", line).group(1))
    assert (process != worker.proc.pid) == (fork == "true")


def test_no_estimate_when_turned_off(workers):
    worker = workers("scheduler", env={"TAS_ETA_ENABLED": "false"})
    worker.wait_ready()
    import_example_cluster()
    request_pass()
    wait_for(lambda: admitted_count() == EXAMPLE_ADMISSIBLE, timeout=30, what="the first pass", workers=(worker,))
    time.sleep(2)  # an estimate would follow within this
    assert not WorkloadPrediction.objects.exists()
    assert "start-time estimate" not in worker.log()


def test_estimates_are_never_forked_on_sqlite(settings, monkeypatch):
    """A child forked beside SQLite connections can find the database locked by itself for
    good: on SQLite the estimate runs in the worker, whatever TAS_ETA_FORK says."""
    from types import SimpleNamespace

    from tasweb.scheduling import estimates

    settings.TAS_ETA_FORK = True
    assert estimates.eta_fork_enabled()  # PostgreSQL, the test database
    monkeypatch.setattr(estimates, "connection", SimpleNamespace(vendor="sqlite"))
    assert not estimates.eta_fork_enabled()
