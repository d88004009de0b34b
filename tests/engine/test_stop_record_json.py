"""A StopRecord's JSON form (what a pass stores for why-pending) and back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from scheduler.stops import QUOTA_LIMIT, QuotaCheck, StopRecord

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)
checks = st.builds(QuotaCheck, flavor=st.text(max_size=5), resource=st.sampled_from(["cpu", "memory", "gpu"]),
                   requested=st.integers(0, 10**12), available=st.integers(-10**6, 10**12),
                   nominal=st.integers(0, 10**12), used=st.integers(0, 10**12), limit=st.text(max_size=10))
records = st.builds(
    StopRecord, step=st.text(max_size=10), message=st.text(max_size=20), verdict=st.text(max_size=5),
    cluster_queue=st.text(max_size=5), reason=st.text(max_size=10),
    at=st.none() | st.datetimes(timezones=st.just(UTC)), pass_number=st.integers(0, 10**6),
    cycle=st.integers(0, 10**6), blocking=st.lists(st.text(max_size=5), max_size=3), quota=st.lists(checks, max_size=3),
    details=st.dictionaries(st.text(max_size=5), json_values, max_size=4), parked=st.booleans(),
    requeue_on=st.lists(st.text(max_size=5), max_size=3), representative=st.text(max_size=5),
    computed_now=st.booleans())


@given(records)
def test_the_json_form_is_asdict_with_the_time_in_iso_and_reads_back(record):
    expected = dataclasses.asdict(record)
    expected["at"] = record.at.isoformat() if record.at is not None else None
    out = record.to_json()
    assert out == expected
    assert list(out) == list(expected)  # the same keys in the same order
    assert StopRecord.from_json(out) == record


def test_the_json_form_shares_no_container_with_the_record():
    record = StopRecord(QUOTA_LIMIT, "quota: short", blocking=["ns/a"], requeue_on=["workload finish"],
                        quota=[QuotaCheck("f", "cpu", 4, 2, 8, 6, "borrowingLimit")],
                        details={"limits": ["borrowingLimit"], "nested": {"targets": [{"workload": "ns/b"}]}},
                        at=datetime(2025, 6, 1, 12, tzinfo=UTC))
    out = record.to_json()
    out["blocking"].append("x")
    out["requeue_on"].clear()
    out["details"]["limits"].append("x")
    out["details"]["nested"]["targets"][0]["workload"] = "x"
    out["quota"][0]["used"] = 0
    assert record.blocking == ["ns/a"] and record.requeue_on == ["workload finish"]
    assert record.details == {"limits": ["borrowingLimit"], "nested": {"targets": [{"workload": "ns/b"}]}}
    assert record.quota[0].used == 6
    assert out["at"] == "2025-06-01T12:00:00+00:00"
