"""The scheduler process's long-lived engine state: built once, then kept current by the
mirror's change log; rebuilt whenever memory may disagree with the database; always equal
to a state built from scratch from the same rows."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import weakref
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from scheduler.codec import decode_assignment
from scheduler.parse import Where, object_label, parse_workload
from tasweb.cluster import models as cluster
from tasweb.cluster.apps import restore_change_triggers
from tasweb.cluster.changelog import ensure_change_triggers, missing_change_triggers
from tasweb.cluster.services import object_delete, object_upsert, rows_insert
from tasweb.scheduling import estimates, selectors, services
from tasweb.scheduling import runtime as rt
from tasweb.scheduling.models import SchedulingPass, WorkloadStop
from tasweb.simulator.services import simulator_seed, simulator_tick
from tests.engine.test_incremental_state import index_view, quota_view, snapshot_view
from tests.simulator.conftest import START, quiet

from .support import alive_when_state_is_read, import_example_cluster, small_workload

pytestmark = [pytest.mark.services, pytest.mark.django_db]
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def namespace_object(name: str, *, rv: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": f"ns-{name}", "resourceVersion": rv, "labels": labels}}


def changes() -> list[tuple[str, str, bool]]:
    return list(cluster.MirrorChange.objects.order_by("id").values_list("kind", "name", "deleted"))


def built_from_scratch() -> rt.SchedulerRuntime:
    return rt.runtime_build(gates_text="", gates=services.feature_gates())


def assert_equal_to_a_rebuild(runtime: rt.SchedulerRuntime) -> None:
    fresh = built_from_scratch()
    ours, theirs = runtime.engine.state, fresh.engine.state
    assert snapshot_view(ours) == snapshot_view(theirs)
    assert quota_view(ours) == quota_view(theirs)
    assert index_view(ours) == index_view(theirs)
    assert ours.namespaces == theirs.namespaces
    pending = {k for k in theirs.workload_map if theirs.workload(k).admission is None}
    assert set(runtime.engine.queues.assigned) | set(runtime.engine.queues.orphans) == pending


class TestChangeLog:
    def test_every_write_of_a_mirrored_row_is_noted(self):
        obj = small_workload("noted")
        object_upsert(kind="Workload", obj=obj)
        obj["metadata"]["resourceVersion"] = "999"
        obj["metadata"]["labels"] = {"x": "y"}
        object_upsert(kind="Workload", obj=obj)
        object_delete(kind="Workload", obj=obj)
        assert changes() == [("Workload", "noted", False), ("Workload", "noted", False),
                             ("Workload", "noted", True)]

    def test_bulk_inserts_are_noted_row_by_row(self):
        rows = [{"uid": f"u{i}", "name": f"n{i}", "raw": {}, "labels": {}, "allocatable": {}} for i in range(300)]
        rows_insert(model=cluster.Node, rows=rows)
        assert len(changes()) == 300
        assert {name for _, name, _ in changes()} == {f"n{i}" for i in range(300)}

    def test_emptying_a_table_is_noted_as_a_reset(self):
        if connection.vendor != "postgresql":
            pytest.skip("TRUNCATE is PostgreSQL's")  # pragma: no cover - the suite runs on PostgreSQL
        import_example_cluster()
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {cluster.Pod._meta.db_table}")
        assert cluster.MirrorChange.objects.filter(kind="").exists()


def drop_trigger(name: str, table: str) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f'DROP TRIGGER "{name}" ON "{table}"')
        else:  # pragma: no cover - the suite runs on PostgreSQL
            cursor.execute(f'DROP TRIGGER "{name}"')


class TestChangeLogTriggers:
    """A migration that rebuilds a mirrored table on SQLite drops its triggers with it."""

    def test_every_mirrored_table_has_its_triggers(self):
        assert missing_change_triggers(connection) == []

    def test_a_missing_trigger_is_named_and_made_again(self):
        drop_trigger("cluster_pod_change_insert", "cluster_pod")
        assert missing_change_triggers(connection) == ["cluster_pod_change_insert"]
        assert ensure_change_triggers(connection) == ["cluster_pod_change_insert"]
        assert missing_change_triggers(connection) == []
        rows_insert(model=cluster.Pod, rows=[{"uid": "p", "namespace": "ml", "name": "p", "raw": {}}])
        assert changes() == [("Pod", "p", False)]

    def test_migrate_makes_missing_triggers_again(self):
        from django.apps import apps
        drop_trigger("cluster_workload_change_update", "cluster_workload")
        drop_trigger("cluster_node_change_delete", "cluster_node")
        restore_change_triggers(sender=apps.get_app_config("cluster"), using="default")
        assert missing_change_triggers(connection) == []

    def test_a_table_whose_writes_are_not_noted_is_read_again_at_every_pass(self, caplog):
        import_example_cluster()
        services.scheduling_pass_run()
        drop_trigger("cluster_workload_change_insert", "cluster_workload")
        rt.runtime_discard("test")  # the next build finds the trigger missing
        services.scheduling_pass_run()
        assert "misses 1 trigger(s) (cluster_workload_change_insert)" in caplog.text
        object_upsert(kind="Workload", obj=small_workload("unnoted"))
        assert not cluster.MirrorChange.objects.filter(name="unnoted").exists()
        record = services.scheduling_pass_run()
        # without the log, only reading the tables again can see it
        assert record.admitted == 1
        assert cluster.Workload.objects.get(name="unnoted").status == cluster.WorkloadStatus.ADMITTED
        ensure_change_triggers(connection)
        services.scheduling_pass_run()  # rebuilt, and the triggers found again
        assert rt.runtime_current().unnoted == []
        follows = rt.runtime_current()
        object_upsert(kind="Workload", obj=small_workload("noted-again"))
        services.scheduling_pass_run()
        assert rt.runtime_current() is follows  # followed, not rebuilt


SQLITE_REBUILD = """
import django
django.setup()
from django.core.management import call_command
from django.db import connection, models
from tasweb.cluster.changelog import missing_change_triggers
from tasweb.cluster.models import Pod

call_command("migrate", verbosity=0)
assert missing_change_triggers(connection) == [], "fresh"
# what a migration that changes a column does on SQLite: a new table, the rows copied over
old = Pod._meta.get_field("phase")
new = models.CharField(max_length=40, blank=True, default="")
new.set_attributes_from_name("phase")
new.model = Pod
with connection.schema_editor() as editor:
    editor.alter_field(Pod, old, new)
print("after the rebuild:", missing_change_triggers(connection))
call_command("migrate", verbosity=0)
print("after migrate:", missing_change_triggers(connection))
"""


def test_migrate_on_sqlite_makes_again_the_triggers_a_table_rebuild_dropped(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"} and not k.startswith("TAS_")}
    env.update(TAS_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="tasweb.settings")
    done = subprocess.run([sys.executable, "-c", SQLITE_REBUILD], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == ("after the rebuild: ['cluster_pod_change_delete', 'cluster_pod_change_insert', "
                        "'cluster_pod_change_update']"), done.stdout
    assert lines[1] == "after migrate: []", done.stdout
    assert "made 3 missing trigger(s) again" in done.stderr


class TestIncrementalPasses:
    def test_the_second_pass_applies_only_what_changed(self):
        import_example_cluster()
        services.scheduling_pass_run()
        first = rt.runtime_current()
        assert first is not None and first.changes_applied == 0
        object_upsert(kind="Workload", obj=small_workload("late"))
        record = services.scheduling_pass_run()
        second = rt.runtime_current()
        assert second is first  # not rebuilt
        # the new workload, plus the pass's own writes read back (idempotent)
        assert 1 <= second.changes_applied <= 40
        assert cluster.Workload.objects.get(name="late").status == cluster.WorkloadStatus.ADMITTED
        assert record.admitted == 1
        assert_equal_to_a_rebuild(second)

    def test_namespaces_are_mirrored_and_followed_for_the_namespace_selectors(self):
        """A Namespace in the mirror is what the ClusterQueue's namespaceSelector is matched
        against, in the pass and in a runtime kept current by the change log."""
        import_example_cluster()
        object_upsert(kind="Namespace", obj=namespace_object("ml", team="sales", rv="1"))
        queue = cluster.ClusterQueue.objects.get(name="cluster-queue").raw
        queue["spec"]["namespaceSelector"] = {"matchLabels": {"team": "research"}}
        queue["metadata"]["resourceVersion"] = "2"
        object_upsert(kind="ClusterQueue", obj=queue)
        services.scheduling_pass_run()
        runtime = rt.runtime_current()
        late = cluster.Workload.objects.get
        object_upsert(kind="Workload", obj=small_workload("late"))
        services.scheduling_pass_run()
        assert (late(name="late").status, late(name="late").message) == (
            cluster.WorkloadStatus.INADMISSIBLE, "workload namespace doesn't match ClusterQueue selector")

        # relabelled so that the ClusterQueue selects it: Kueue requeues the ClusterQueue
        object_upsert(kind="Namespace", obj=namespace_object("ml", team="research", rv="3"))
        services.scheduling_pass_run()
        assert rt.runtime_current() is runtime  # followed, not rebuilt
        assert runtime.engine.state.namespaces == {"ml": {"team": "research"}}
        assert late(name="late").status == cluster.WorkloadStatus.ADMITTED
        assert_equal_to_a_rebuild(runtime)

    def test_a_pass_writes_only_what_it_changed(self):
        import_example_cluster()
        services.scheduling_pass_run()
        before = {w.key: w.updated_at for w in cluster.Workload.objects.all()}
        services.scheduling_pass_run()
        after = {w.key: w.updated_at for w in cluster.Workload.objects.all()}
        assert after == before

    def test_a_pass_that_does_not_commit_leaves_a_state_to_rebuild(self):
        import_example_cluster()
        services.scheduling_pass_run()

        def fail(record):
            raise RuntimeError("lost the lock")

        object_upsert(kind="Workload", obj=small_workload("late"))
        with pytest.raises(RuntimeError):
            services.scheduling_pass_run(before_commit=fail)
        assert rt.runtime_current() is None
        assert cluster.Workload.objects.get(name="late").status == cluster.WorkloadStatus.PENDING
        services.scheduling_pass_run()
        assert cluster.Workload.objects.get(name="late").status == cluster.WorkloadStatus.ADMITTED

    def test_a_pass_by_another_process_makes_it_rebuild(self):
        import_example_cluster()
        services.scheduling_pass_run()
        first = rt.runtime_current()
        SchedulingPass.objects.create(started_at=START, trigger="manual", mode="control")  # someone else's
        services.scheduling_pass_run()
        assert rt.runtime_current() is not first

    @pytest.mark.parametrize("why", ["rolled back", "not trusted"])
    def test_a_state_built_again_is_built_once_the_one_it_replaces_is_freed(self, monkeypatch, why):
        """Two states at once would double the process's memory: the replaced one (held by the
        runtime and by the estimates, frozen, in reference cycles) is freed before the new
        one is read."""
        import_example_cluster()
        services.scheduling_pass_run()
        old = weakref.ref(rt.runtime_current().engine)
        assert estimates.estimate_source() is not None and estimates.estimate_source().engine is old()
        if why == "rolled back":
            with pytest.raises(RuntimeError):
                services.scheduling_pass_run(before_commit=lambda record: (_ for _ in ()).throw(RuntimeError("lost")))
            assert rt.runtime_current() is None and estimates.estimate_source() is None
        else:  # a pass by another process: what this one holds may be stale
            SchedulingPass.objects.create(started_at=START, trigger="manual", mode="control")
        alive_at_build = alive_when_state_is_read(monkeypatch, old)
        services.scheduling_pass_run()
        assert alive_at_build == [False]
        assert rt.runtime_current() is not None and estimates.estimate_source().engine is rt.runtime_current().engine

    def test_a_change_that_becomes_visible_late_is_applied(self):
        import_example_cluster()
        services.scheduling_pass_run()
        runtime = rt.runtime_current()
        # ids are handed out at write time: a transaction may commit an id below ones read already
        object_upsert(kind="Workload", obj=small_workload("early-id"))
        early = cluster.MirrorChange.objects.filter(name="early-id").get()
        early_id = early.id
        held = {"kind": early.kind, "row_id": early.row_id, "namespace": early.namespace, "name": early.name,
                "deleted": early.deleted, "at": early.at}
        early.delete()  # not visible yet
        object_upsert(kind="Workload", obj=small_workload("later-id"))
        services.scheduling_pass_run()
        assert any(g.low <= early_id <= g.high for g in runtime.gaps)
        assert not rt.runtime_current().engine.state.workload("ml/early-id")
        cluster.MirrorChange.objects.create(id=early_id, **held)  # committed now
        services.scheduling_pass_run()
        assert rt.runtime_current() is runtime
        assert runtime.engine.state.workload("ml/early-id") is not None
        assert not any(g.low <= early_id <= g.high for g in runtime.gaps)

    def test_pruning_keeps_what_the_runtime_has_not_applied(self):
        import_example_cluster()
        services.scheduling_pass_run()
        object_upsert(kind="Workload", obj=small_workload("late"))
        rt.change_log_prune()
        assert cluster.MirrorChange.objects.filter(name="late").exists()
        services.scheduling_pass_run()
        rt.change_log_prune()  # applied, but kept a while for the processes that follow the log
        assert cluster.MirrorChange.objects.filter(name="late").exists()
        later = timezone.now() + timedelta(seconds=rt.follower_seconds() + 1)
        rt.change_log_prune(now=later)
        assert not cluster.MirrorChange.objects.filter(name="late", deleted=False).exclude(
            id__gt=rt.runtime_current().cursor).exists()


class _Cycle:
    """An object in a reference cycle: only the cyclic garbage collector frees it."""

    def __init__(self) -> None:
        self.me = self


class TestGarbageCollection:
    def test_what_outlives_a_pass_is_left_out_of_collections_until_the_periodic_one(self, settings):
        settings.TAS_SCHEDULER_FULL_COLLECTION_SECONDS = 3600
        import_example_cluster()
        services.scheduling_pass_run()
        before = gc.get_freeze_count()
        kept = _Cycle()  # alive when the pass ends, dropped after it
        held = weakref.ref(kept)
        services.scheduling_pass_run()
        assert gc.get_freeze_count() > before
        del kept
        gc.collect()
        assert held() is not None  # frozen: ordinary collections leave it
        settings.TAS_SCHEDULER_FULL_COLLECTION_SECONDS = 0
        services.scheduling_pass_run()
        assert held() is None  # the periodic full collection freed it

    def test_the_garbage_a_pass_makes_is_collected_once_it_ends(self, settings):
        """The pass runs with the collector paused; what it made and dropped in cycles is
        collected as it ends, not frozen with the state."""
        settings.TAS_SCHEDULER_FULL_COLLECTION_SECONDS = 3600
        import_example_cluster()
        services.scheduling_pass_run()
        made: list[weakref.ref] = []
        real = services.engine_pass_run

        def pass_making_garbage(engine, now, **kwargs):
            assert not gc.isenabled()  # paused for the pass
            made.append(weakref.ref(_Cycle()))
            return real(engine, now, **kwargs)

        services.engine_pass_run = pass_making_garbage
        try:
            services.scheduling_pass_run()
        finally:
            services.engine_pass_run = real
        assert gc.isenabled() and made and made[0]() is None

    def test_what_a_pass_wrote_is_freed_as_it_ends_without_the_collector(self, monkeypatch):
        """No reference cycle holds the pass's recorder (its rows, events and results): they
        are freed by reference counting, before anything is collected or frozen (a cycle
        there would freeze them with the state, pass after pass)."""
        import_example_cluster()
        services.scheduling_pass_run()
        # something to write: one admitted, and one that waits (its why-pending record is compared
        # with the stored one)
        object_upsert(kind="Workload", obj=small_workload("late"))
        object_upsert(kind="Workload", obj=small_workload("too-big", gpus=100_000))
        recorders: list[weakref.ref] = []
        alive_at_commit: list[bool] = []
        record, committed = services.PassRecorder.record, services.runtime_committed

        def recording(self, result, **kwargs):
            recorders.append(weakref.ref(self))
            return record(self, result, **kwargs)

        def on_commit(*args, **kwargs):
            alive_at_commit.append(recorders[0]() is not None)
            return committed(*args, **kwargs)

        monkeypatch.setattr(services.PassRecorder, "record", recording)
        monkeypatch.setattr(services, "runtime_committed", on_commit)
        gc.disable()  # nothing but reference counting frees anything during the pass
        try:
            services.scheduling_pass_run()
        finally:
            gc.enable()
        assert recorders and alive_at_commit == [False]
        assert WorkloadStop.objects.filter(workload_key="ml/too-big").exists()


def test_the_state_stays_equal_to_a_rebuild_through_a_busy_simulated_cluster():
    config = quiet(initial_workloads=12, arrivals_per_minute=20, node_failures_per_minute=10, drains_per_minute=4,
                   runtime_min_seconds=20, runtime_max_seconds=60, give_up_seconds=90)
    simulator_seed(config=config, now=START)
    for tick in range(40):
        now = START + timedelta(seconds=2 * tick)
        simulator_tick(now=now, config=config, rng=random.Random(tick))
        services.scheduling_pass_run(now=now)
        runtime = rt.runtime_current()
        if tick % 5 == 4:
            assert_equal_to_a_rebuild(runtime)
    assert rt.runtime_current().changes_applied > 100  # it did follow the changes


def test_stored_objects_read_as_text_give_the_engine_what_the_json_field_gives():
    """The engine reads `raw` as text and parses it itself: the workloads and pods it builds
    are those it builds from the JSON field's values, an integer beyond 64 bits in a field it
    never reads included."""
    import_example_cluster()
    huge = small_workload("huge")
    huge["spec"]["x-extra"] = 10**30
    object_upsert(kind="Workload", obj=huge)
    rows = cluster.Workload.objects.filter(invalid_reason="").order_by("id")
    from_field = [parse_workload(raw, Where(object_label(raw)), decode_assignment)
                  for raw in rows.values_list("raw", flat=True)]
    assert selectors.engine_workloads() == from_field and "ml/huge" in {w.key for w in from_field}
    pods = cluster.Pod.objects.all()
    assert pods.exists()
    assert [raw for raw, in selectors.raw_objects(pods.order_by("id"))] == list(
        pods.order_by("id").values_list("raw", flat=True))
