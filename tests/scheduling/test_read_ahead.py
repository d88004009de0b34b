"""The cold start reads the mirror's workloads on a thread of its own while it parses those
already read (`selectors.rows_read_ahead`): the same rows in the same order, the reader's
errors raised in the caller, nothing left running when the caller stops early, and inside a
transaction the caller's own connection (another would not see what it wrote)."""

from __future__ import annotations

import threading

import pytest
from django.db import DatabaseError, transaction

from tasweb.cluster import models as cluster
from tasweb.cluster.services import object_upsert
from tasweb.scheduling import runtime as rt
from tasweb.scheduling import selectors, services

from .support import import_example_cluster, small_workload

pytestmark = [pytest.mark.services]


def readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name in ("mirror-read-ahead", "mirror-read-beside")]


def seed(count: int) -> None:
    import_example_cluster()
    for i in range(count):
        object_upsert(kind="Workload", obj=small_workload(f"w{i:03d}", gpus=1 + i % 2))


@pytest.mark.django_db(transaction=True)
class TestOnAThreadOfItsOwn:
    def test_the_same_rows_in_the_same_order(self):
        seed(40)
        rows = cluster.Workload.objects.order_by("id").values_list("id", "name", "rv_number")
        seen: list[str] = []
        out = []
        for row in selectors.rows_read_ahead(rows, chunk_size=3):
            seen.extend(t.name for t in readers())
            out.append(row)
        assert out == list(rows) and len(out) > 40
        assert seen, "the rows were not read by a thread of their own"
        assert readers() == []

    def test_the_build_reads_what_a_plain_read_gives(self):
        seed(25)
        assert selectors.engine_workloads() == selectors.engine_workloads(cluster.Workload.objects.all())
        built = rt.runtime_build(gates_text="", gates=services.feature_gates())
        waiting = cluster.Workload.objects.filter(status__in=("Pending", "Inadmissible")).count()
        assert len(built.engine.answered) == waiting > 0

    def test_a_caller_stopping_early_leaves_nothing_running(self):
        seed(40)
        rows = cluster.Workload.objects.order_by("id").values_list("id", flat=True)
        reading = selectors.rows_read_ahead(rows, chunk_size=1)  # the queue fills up behind the caller
        assert next(reading) is not None
        reading.close()
        assert readers() == []

    def test_a_read_beside_gives_its_result_or_its_error_once_done(self):
        seed(3)
        def names() -> list[str]:
            return sorted(cluster.Workload.objects.values_list("name", flat=True))

        thread, read = selectors.read_beside(lambda: (threading.current_thread().name, names()))()
        assert thread == "mirror-read-beside" and read == names()
        failing = selectors.read_beside(lambda: list(cluster.Workload.objects.extra(where=["1 / (id - id) = 1"])))
        with pytest.raises(DatabaseError):
            failing()
        assert readers() == []

    def test_the_readers_error_is_raised_in_the_caller(self):
        seed(1)
        rows = cluster.Workload.objects.extra(where=["1 / (id - id) = 1"]).values_list("id", flat=True)
        with pytest.raises(DatabaseError):
            list(selectors.rows_read_ahead(rows, chunk_size=2))
        assert readers() == []


@pytest.mark.django_db
def test_inside_a_transaction_the_callers_connection_reads_what_it_wrote():
    with transaction.atomic():
        seed(5)
        rows = cluster.Workload.objects.order_by("id").values_list("name", flat=True)
        assert list(selectors.rows_read_ahead(rows, chunk_size=2)) == list(rows)
        assert len(rows) >= 5
        assert selectors.read_beside(lambda: (threading.current_thread().name, list(rows)))() == (
            threading.current_thread().name, list(rows))
