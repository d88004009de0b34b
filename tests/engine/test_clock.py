"""Deadlines computed from valid input never overflow: Kubernetes times reach the year 9999
and Kueue's durations about 292 years, past the last instant a datetime holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from scheduler.cli import main
from scheduler.clock import FAR_FUTURE, FAR_PAST, later

from .factories import HOSTNAME, admitted, domains_json, grid, taint, tas_setup, toleration, workload

END_OF_TIME = "9999-12-31T23:59:59Z"


def test_later_adds_within_range():
    t = datetime(2025, 6, 1, tzinfo=UTC)
    assert later(t, 90) == t + timedelta(seconds=90)
    assert later(t, timedelta(hours=-1)) == t - timedelta(hours=1)


@pytest.mark.parametrize(("delta", "expected"), [
    (timedelta(days=1), FAR_FUTURE), (30.0, FAR_FUTURE), (9.3e18, FAR_FUTURE), (-9.3e18, FAR_PAST),
])
def test_later_saturates_at_the_ends_of_time(delta, expected):
    t = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) if expected is FAR_FUTURE else datetime(1, 1, 1, tzinfo=UTC)
    assert later(t, delta) == expected


def run(tmp_path, capsys, objects: list[dict], *args: str) -> dict:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    code = main(["simulate", str(path), "-o", "json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {w["name"]: w for w in json.loads(out)["workloads"]}


def test_a_pass_at_the_end_of_time_times_out_pods_ready_without_overflow(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                      "waitForPodsReady": {"timeout": "5m"}}))
    running = admitted(workload("running", cpu="1", created=-3600), assignments={})
    for condition in running["status"]["conditions"]:
        condition["lastTransitionTime"] = "9999-12-31T23:00:00Z"
    out = run(tmp_path, capsys, [*tas_setup(), *grid(), running], "--now", END_OF_TIME, "--config", str(config))
    assert out["running"]["status"] == "Evicted"  # its pods were never ready; the requeue is "never"


def test_a_toleration_of_any_length_is_compared_without_overflow(tmp_path, capsys):
    nodes = grid()
    for n in nodes:
        n["spec"] = {"taints": [taint("maintenance", effect="NoExecute", time_added=0)]}
    pending = workload("train", cpu="1", tolerations=[toleration("maintenance", effect="NoExecute",
                                                                 seconds=9_000_000_000_000_000_000)])
    running = admitted(workload("running", cpu="1", tolerations=pending["spec"]["podSets"][0]["template"]["spec"]
                                ["tolerations"]),
                       assignments={"main": domains_json([HOSTNAME], [("b1-r1-n1", 1)])})
    out = run(tmp_path, capsys, [*tas_setup(), *nodes, pending, running], "--now", END_OF_TIME)
    # tolerated until after the end of time, so still tolerated: the pending one is admitted;
    # the running one's node is being drained all the same (its pods will be evicted, however
    # late), so Kueue replaces it
    assert out["train"]["status"] == "Admitted"
    assert out["running"]["unhealthyNodes"] == ["b1-r1-n1"]
