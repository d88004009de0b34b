"""The bulk write paths a pass and the mirror take on PostgreSQL (COPY, one-statement
upserts, batched updates) store exactly what the row-by-row ORM writes would."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from tasweb.cluster.models import Node, Pod, Workload
from tasweb.cluster.services import (
    BatchedUpdate,
    ids_reserve,
    object_upsert,
    objects_resync,
    prepared_insert,
    rows_insert,
    rows_prepare,
    rows_update,
    rows_update_beside,
    statement_beside,
)
from tasweb.core.queries import json_key
from tasweb.scheduling.models import ClusterWrite, EventKind, PodSetAssignment, SchedulingPass, WorkloadEvent
from tasweb.scheduling.services import assignments_replace, scheduling_pass_run

from .support import EXAMPLE_ADMISSIBLE, assert_results_whole, import_example_cluster, small_workload

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def node(name: str, rv: int, *, cpu: str = "8", valid: bool = True) -> dict:
    status = {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
              "conditions": [{"type": "Ready", "status": "True"}]}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": str(rv),
                         "labels": {"kubernetes.io/hostname": name}},
            "status": status if valid else {"allocatable": {"cpu": "lots"}}}


def test_database_is_postgresql():
    assert connection.vendor == "postgresql"  # the paths under test are PostgreSQL's


def test_upsert_creates_updates_and_ignores_stale_events():
    first = object_upsert(kind="Node", obj=node("n1", 5))
    assert (first.created, first.changed) == (True, True)
    row = Node.objects.get(uid="uid-n1")
    assert row.allocatable["cpu"] == 8000 and row.rv_number == 5 and row.hostname == "n1"

    newer = object_upsert(kind="Node", obj=node("n1", 7, cpu="16"))
    assert (newer.created, newer.changed) == (False, True)
    stale = object_upsert(kind="Node", obj=node("n1", 6, cpu="1"))
    assert (stale.created, stale.changed) == (False, False)
    row.refresh_from_db()
    assert row.allocatable["cpu"] == 16000 and row.rv_number == 7
    assert Node.objects.count() == 1


def test_an_invalid_object_is_kept_with_its_reason_and_its_last_good_columns():
    object_upsert(kind="Node", obj=node("n1", 1))
    object_upsert(kind="Node", obj=node("n1", 2, valid=False))
    row = Node.objects.get(uid="uid-n1")
    assert row.invalid_reason and row.rv_number == 2
    assert row.allocatable["cpu"] == 8000  # the typed columns are not reset

    object_upsert(kind="Node", obj=node("n2", 1, valid=False))
    fresh = Node.objects.get(uid="uid-n2")
    assert fresh.invalid_reason and fresh.labels == {} and fresh.allocatable == {} and fresh.hostname == ""


def test_resync_creates_updates_skips_and_deletes():
    objects_resync(kind="Node", objects=[node("a", 1), node("b", 1), node("c", 1)])
    assert set(Node.objects.values_list("name", flat=True)) == {"a", "b", "c"}
    object_upsert(kind="Node", obj=node("b", 9, cpu="4"))  # a watch event newer than the next list

    result = objects_resync(kind="Node", objects=[node("a", 2, cpu="2"), node("b", 3, cpu="3"), node("d", 1)])

    assert result == {"created": 1, "updated": 1, "deleted": 1, "total": 3}
    cpus = dict(Node.objects.values_list("name", "allocatable__cpu"))
    assert cpus == {"a": 2000, "b": 4000, "d": 8000}


def test_resync_never_overwrites_a_newer_row_written_meanwhile():
    objects_resync(kind="Node", objects=[node("a", 1)])
    listed = node("a", 5, cpu="5")
    Node.objects.filter(uid="uid-a").update(rv_number=9)  # a watch event landed after the list was read
    objects_resync(kind="Node", objects=[listed])
    assert Node.objects.get(uid="uid-a").allocatable["cpu"] == 8000


def test_pods_keep_their_extracted_columns():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ml", "uid": "uid-p", "resourceVersion": "3",
                        "annotations": {"kueue.x-k8s.io/workload": "job-x",
                                        "kueue.x-k8s.io/podset-required-topology": "rack"},
                        "labels": {"kueue.x-k8s.io/podset": "workers"}},
           "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
           "status": {"phase": "Pending"}}
    objects_resync(kind="Pod", objects=[pod])
    row = Pod.objects.get(uid="uid-p")
    assert (row.workload_name, row.pod_set, row.gated, row.tas, row.phase) == ("job-x", "workers", True, True,
                                                                               "Pending")
    assert row.requests == {"cpu": 2000}
    assert row.raw == pod and row.updated_at is not None


def test_rows_update_and_insert_write_what_save_and_bulk_create_would():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    row = Workload.objects.get(name="w1")
    before = row.updated_at
    row.message = "changed"
    row.raw = {**row.raw, "status": {"note": "quote \" and backslash \\ survive"}}
    rows_update(rows=[row], fields=["message", "raw", "updated_at"])
    row.refresh_from_db()
    assert row.message == "changed" and row.raw["status"]["note"] == "quote \" and backslash \\ survive"
    assert row.updated_at > before

    rows_insert(model=WorkloadEvent, rows=[{"workload": row, "workload_key": row.key, "kind": EventKind.QUEUED,
                                            "at": before, "details": {"a": [1, 2]}}])
    event = WorkloadEvent.objects.get()
    assert (event.workload_id, event.kind, event.details, event.message) == (row.id, "Queued", {"a": [1, 2]}, "")


def test_copied_times_are_stored_as_django_stores_them(settings):
    settings.TIME_ZONE = "Europe/Paris"  # where a naive time is taken to be
    aware = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5)))
    naive = datetime(2025, 6, 1, 12, 0, 0)
    with pytest.warns(RuntimeWarning, match="naive datetime"):
        rows_insert(model=WorkloadEvent, rows=[
            {"workload_key": "ns/aware", "kind": EventKind.QUEUED, "at": aware},
            {"workload_key": "ns/naive", "kind": EventKind.QUEUED, "at": naive},
            {"workload_key": "ns/text", "kind": EventKind.QUEUED, "at": "2025-06-01T12:00:00+00:00"}])
    stored = dict(WorkloadEvent.objects.values_list("workload_key", "at"))
    assert stored["ns/aware"] == aware  # to the microsecond, whatever its zone
    assert stored["ns/naive"] == naive.replace(tzinfo=ZoneInfo("Europe/Paris"))
    assert stored["ns/text"] == datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def test_assignments_replace_stores_what_a_pass_decided():
    import_example_cluster()
    scheduling_pass_run()
    assert_results_whole()
    admitted = list(Workload.objects.filter(status="Admitted"))
    assert len(admitted) == EXAMPLE_ADMISSIBLE
    before = {(r.workload_id, r.pod_set): (r.encoded, r.count, r.levels, r.topology_levels)
              for r in PodSetAssignment.objects.all()}
    domains_before = sorted(PodSetAssignment.objects.values_list("domains__workload_id", "domains__values",
                                                                 "domains__count", "domains__node"))

    # storing the same admissions again, from the workloads' JSON, gives the same rows
    assignments_replace(admissions=[(wl, copy.deepcopy(wl.raw["status"]["admission"]["podSetAssignments"]))
                                    for wl in admitted])
    after = {(r.workload_id, r.pod_set): (r.encoded, r.count, r.levels, r.topology_levels)
             for r in PodSetAssignment.objects.all()}
    assert after == before
    assert sorted(PodSetAssignment.objects.values_list("domains__workload_id", "domains__values", "domains__count",
                                                       "domains__node")) == domains_before
    assert SchedulingPass.objects.count() == 1


def test_a_control_pass_queues_its_cluster_writes():
    import_example_cluster()
    record = scheduling_pass_run(send_to_cluster=True)

    # one status write for every workload whose status the pass changed
    writes = list(ClusterWrite.objects.order_by("id"))
    assert all(w.kind == ClusterWrite.Kind.WORKLOAD_STATUS and w.created_at and w.sent_at is None for w in writes)
    assert {w.name: w.payload["status"] for w in writes} == {wl.name: wl.raw["status"] for wl in Workload.objects.all()}
    assert sum(1 for w in writes if w.payload["status"].get("admission")) == record.admitted == EXAMPLE_ADMISSIBLE
    # a workload left waiting says why, in Kueue's conditions, on the cluster as in the mirror
    [waiting] = Workload.objects.filter(status__in=["Pending", "Inadmissible"])
    [write] = [w for w in writes if w.name == waiting.name]
    conditions = {c["type"]: c for c in write.payload["status"]["conditions"]}
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["QuotaReserved"]["message"] == waiting.message and waiting.message
    assert (conditions["Admitted"]["status"], conditions["Admitted"]["reason"]) == ("False", "NoReservation")
    events = WorkloadEvent.objects.filter(kind=EventKind.ADMITTED)
    assert events.count() == EXAMPLE_ADMISSIBLE and all(e.scheduling_pass_id == record.id for e in events)


def test_a_control_pass_writes_every_change_of_a_status_not_only_admissions():
    """A node failing under an admitted workload marks it (status and admission unchanged
    until its replacement): the cluster gets that status too, with the conditions it
    already had keeping their lastTransitionTime."""
    import_example_cluster()
    scheduling_pass_run(send_to_cluster=True)
    admitted = Workload.objects.filter(status="Admitted").order_by("name").first()
    host = PodSetAssignment.objects.filter(workload=admitted).values_list("domains__node", flat=True).first()
    assert host
    row = Node.objects.get(name=host)
    failed = copy.deepcopy(row.raw)
    failed["metadata"]["resourceVersion"] = str(int(row.resource_version or 0) + 1000)
    failed["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "lastTransitionTime": "2025-06-01T11:00:00Z"}]
    object_upsert(kind="Node", obj=failed)
    before = ClusterWrite.objects.order_by("-id").values_list("id", flat=True).first()
    admitted_at = {c["type"]: c["lastTransitionTime"] for c in admitted.raw["status"]["conditions"]}["Admitted"]

    scheduling_pass_run(send_to_cluster=True)
    admitted.refresh_from_db()
    assert admitted.unhealthy_nodes == [host]
    [write] = ClusterWrite.objects.filter(id__gt=before, name=admitted.name)
    assert write.payload["status"] == admitted.raw["status"]
    assert write.payload["status"]["unhealthyNodes"] == [{"name": host}]
    kept = {c["type"]: c["lastTransitionTime"] for c in write.payload["status"]["conditions"]}
    assert kept["Admitted"] == admitted_at


def test_rows_update_sets_one_key_of_a_document_and_keeps_the_rest():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    object_upsert(kind="Workload", obj=small_workload("w2"))
    stored = {row.name: row.raw for row in Workload.objects.all()}
    rows = list(Workload.objects.defer("raw").order_by("name"))
    rows[0].raw_status = {"note": "quote \" and backslash \\ survive", "n": [1, 2]}
    rows[1].raw_status = None  # a JSON null, not SQL NULL: the document keeps its key
    for row in rows:
        row.message = f"changed {row.name}"
    rows_update(rows=rows, fields=["message", "updated_at"], set_keys=[("raw", "status", "raw_status")])
    after = {row.name: row for row in Workload.objects.all()}
    assert after["w1"].raw == {**stored["w1"], "status": {"note": "quote \" and backslash \\ survive", "n": [1, 2]}}
    assert after["w2"].raw == {**stored["w2"], "status": None}
    assert after["w1"].message == "changed w1" and after["w2"].message == "changed w2"


def test_an_update_beside_runs_in_the_transaction_while_the_block_works():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    row = Workload.objects.defer("raw").get(name="w1")
    row.raw_status = {"seen": True}
    row.message = "beside"
    with transaction.atomic():
        with rows_update_beside(rows=[row], fields=["message"], set_keys=[("raw", "status", "raw_status")]):
            # a database call within waits for the statement, then sees what it wrote
            assert Workload.objects.get(name="w1").message == "beside"
        assert Workload.objects.get(name="w1").raw["status"] == {"seen": True}
        transaction.set_rollback(True)
    assert Workload.objects.get(name="w1").message == ""  # rolled back with the transaction


def test_a_failed_statement_beside_raises_at_the_end_of_the_block():
    ran = []
    with pytest.raises(DatabaseError, match="no_such_table"), transaction.atomic(), \
            statement_beside("UPDATE no_such_table SET x = 1"):
        ran.append(True)  # the block runs all the same
    assert ran == [True]


def test_a_batched_update_saves_each_full_batch_while_the_next_rows_come():
    for name in ("w1", "w2", "w3"):
        object_upsert(kind="Workload", obj=small_workload(name))
    rows = list(Workload.objects.defer("raw").order_by("name"))
    with transaction.atomic(), BatchedUpdate(fields=["message"], set_keys=[("raw", "status", "raw_status")],
                                             batch_size=2) as updates:
        for row in rows:
            row.message = f"batched {row.name}"
            row.raw_status = {"batch": row.name}
            updates.add(row)
        # the first two went as a batch; a query waits for it, then sees it; the third is not sent yet
        assert dict(Workload.objects.values_list("name", "message")) == {
            "w1": "batched w1", "w2": "batched w2", "w3": ""}
        updates.send()
    assert updates.rows == rows
    stored = {row.name: row for row in Workload.objects.all()}
    assert {name: (row.message, row.raw["status"]) for name, row in stored.items()} == {
        name: (f"batched {name}", {"batch": name}) for name in ("w1", "w2", "w3")}
    assert stored["w1"].raw["metadata"]["name"] == "w1"  # the rest of the document is as stored


def test_another_update_runs_while_a_batch_is_running():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    object_upsert(kind="Node", obj=node("n1", 1))
    workload, node_row = Workload.objects.get(name="w1"), Node.objects.get(name="n1")
    with transaction.atomic(), BatchedUpdate(fields=["message"], batch_size=1) as updates:
        workload.message = "batched"
        updates.add(workload)  # a full batch: its UPDATE runs
        node_row.ready = "False"
        rows_update(rows=[node_row], fields=["ready"])
    assert Workload.objects.get(name="w1").message == "batched"
    assert Node.objects.get(name="n1").ready == "False"


def test_a_batched_update_that_fails_leaves_nothing_written():
    for name in ("w1", "w2", "w3"):
        object_upsert(kind="Workload", obj=small_workload(name))
    rows = list(Workload.objects.order_by("name"))
    rows[2].message = "a NUL \x00 is no text to PostgreSQL"
    with pytest.raises(DatabaseError), transaction.atomic(), BatchedUpdate(fields=["message"], batch_size=2) as updates:
        rows[0].message = rows[1].message = "fine"
        for row in rows:
            updates.add(row)
        updates.send()
    assert set(Workload.objects.values_list("message", flat=True)) == {""}


def test_a_copy_that_fails_raises_a_database_error_of_django():
    # as Django's own cursors raise them: a task retries an OperationalError whatever wrote it
    with pytest.raises(DatabaseError, match="NUL"), transaction.atomic():
        rows_insert(model=WorkloadEvent, rows=[{"workload_key": "ns/w", "kind": EventKind.QUEUED,
                                                "at": datetime(2025, 6, 1, tzinfo=UTC), "message": "\x00"}])
    assert not WorkloadEvent.objects.exists()


def test_an_error_of_the_caller_waits_for_the_running_batch_and_rolls_it_back():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    row = Workload.objects.get(name="w1")
    row.message = "sent"
    with pytest.raises(RuntimeError, match="the caller failed"), transaction.atomic(), \
            BatchedUpdate(fields=["message"], batch_size=1) as updates:
        updates.add(row)  # sent at once: a full batch
        raise RuntimeError("the caller failed")
    assert Workload.objects.get(name="w1").message == ""
    assert Workload.objects.count() == 1  # the connection is free and usable again


def test_a_pass_saved_in_small_batches_stores_what_one_batch_stores(monkeypatch):
    from tasweb.scheduling import runtime, services

    import_example_cluster()
    now = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

    def stored_by_a_pass() -> tuple:
        with transaction.atomic():
            scheduling_pass_run(now=now)
            assert_results_whole()
            stored = (
                sorted(Workload.objects.values_list("name", "status", "message", "cluster_queue", "raw")),
                sorted(PodSetAssignment.objects.values_list("workload__name", "pod_set", "encoded", "count")),
                sorted(WorkloadEvent.objects.values_list("workload_key", "kind", "message")),
            )
            transaction.set_rollback(True)
        runtime.runtime_discard("rolled back")
        return stored

    whole = stored_by_a_pass()
    monkeypatch.setattr(services, "UPDATE_BATCH", 2)
    assert stored_by_a_pass() == whole
    assert sum(1 for _, status, *_ in whole[0] if status == "Admitted") == EXAMPLE_ADMISSIBLE


def test_reserved_ids_are_the_ones_the_rows_get():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    row = Workload.objects.get(name="w1")
    ids = ids_reserve(model=PodSetAssignment, count=3)
    assert len(set(ids)) == 3 and ids_reserve(model=PodSetAssignment, count=0) == []
    prepared = rows_prepare(model=PodSetAssignment, rows=[{"id": pk, "workload_id": row.pk, "pod_set": f"ps{i}"}
                                                         for i, pk in enumerate(ids)], with_pk=True)
    prepared_insert(prepared)
    assert dict(PodSetAssignment.objects.values_list("pod_set", "id")) == {"ps0": ids[0], "ps1": ids[1],
                                                                           "ps2": ids[2]}
    # the sequence went past them: a row inserted without an id gets a new one
    rows_insert(model=PodSetAssignment, rows=[{"workload_id": row.pk, "pod_set": "ps3"}])
    assert PodSetAssignment.objects.get(pod_set="ps3").id > max(ids)


def test_json_key_reads_what_a_path_of_names_reads():
    object_upsert(kind="Workload", obj=small_workload("w1"))
    by_path = list(Workload.objects.values_list("raw__metadata__name", "raw__metadata__missing", "raw__spec"))
    by_key = list(Workload.objects.annotate(
        a=json_key("raw", "metadata", "name"), b=json_key("raw", "metadata", "missing"), c=json_key("raw", "spec"),
    ).values_list("a", "b", "c"))
    assert by_key == by_path and by_key[0][0] == "w1" and by_key[0][1] is None
    with pytest.raises(ValueError, match="at least one key"):
        json_key("raw")


# ---------------------------------------------------------------- the indexes every write pays for


def _pattern_indexes(table: str) -> set[str]:
    """The columns of `table` with a LIKE (varchar_pattern_ops) index."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", [table])
        definitions = [row[0] for row in cursor.fetchall()]
    return {d.split("(", 1)[1].split()[0].strip('"') for d in definitions if "pattern_ops" in d}


def test_only_the_columns_searched_by_prefix_have_a_like_index():
    # a pass writes thousands of Workload, event and domain rows: an index no query uses is
    # paid for on every one of them; history is searched by namespace and domain prefix
    assert _pattern_indexes("scheduling_workloadevent") == {"workload_key", "domain"}
    for table in ("cluster_workload", "cluster_pod", "cluster_node", "scheduling_assignmentdomain"):
        assert _pattern_indexes(table) == set(), table


def test_a_uid_is_still_unique_in_a_mirrored_table():
    Node.objects.create(uid="uid-n1", name="n1", raw={})
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(uid="uid-n1", name="n1-again", raw={})
    object_upsert(kind="Node", obj=node("n1", 5))  # the mirror's upsert still finds the row by uid
    assert Node.objects.filter(uid="uid-n1").count() == 1
    assert Node.objects.get(uid="uid-n1").rv_number == 5
