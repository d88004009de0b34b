"""What-if: one engine pass over the mirror plus objects a client sends, nothing stored.

It is the pass `python -m scheduler simulate` runs (and the scheduler's Celery task): the
objects of the mirror as they are now, with the posted ones added (or replacing mirrored
objects of the same kind, namespace and name). The answer says, for each posted Workload,
where it would be placed or why it would not fit, and which mirrored workloads the pass
would change (admitted alongside it, or preempted for it).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import selectors
import signal
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.cluster import ClusterState
from scheduler.codec import decode_assignment
from scheduler.cycle import unchanged_result, unchanged_status
from scheduler.engine import Engine, PassOutcome
from scheduler.errors import InputError
from scheduler.explain import Shared, explain_workload
from scheduler.loader import flatten_objects
from scheduler.memory import gc_paused
from scheduler.output import workload_json
from scheduler.parse import ParsedObjects, object_label, parse_objects
from scheduler.replacement import annotate_failures
from scheduler.results import Answers, PassResult, WorkloadResult
from scheduler.simulate import unknown_level_problems
from tasweb.api.selectors import explanation_json
from tasweb.api.state import EngineView, engine_view
from tasweb.cluster.models import WAITING_STATUSES
from tasweb.scheduling.selectors import active_workload_rows, engine_pods, engine_workloads
from tasweb.scheduling.services import feature_gates, kueue_configuration

BODY = "request body"
MAX_OBJECTS = 5_000
logger = logging.getLogger(__name__)


def _identity(kind: str, obj: Any) -> tuple[str, str, str]:
    return kind, getattr(obj, "namespace", "") or "", obj.name


LISTS = {  # ParsedObjects field -> Kubernetes kind
    "nodes": "Node", "pods": "Pod", "topologies": "Topology", "flavors": "ResourceFlavor",
    "cluster_queues": "ClusterQueue", "local_queues": "LocalQueue", "cohorts": "Cohort",
    "admission_checks": "AdmissionCheck", "priority_classes": "WorkloadPriorityClass", "workloads": "Workload",
}


TYPE_FIELDS = ("apiVersion", "kind")


def require_type_fields(doc: Any, where: str = "") -> None:
    """Every object of the body (and a `kind: List` itself) names its apiVersion and kind:
    the engine would skip an object without them, and the answer would be silently empty."""
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            require_type_fields(item, f"{where}[{i}]")
        return
    if not isinstance(doc, Mapping):
        return  # flatten_objects names the item that is not an object
    for name in TYPE_FIELDS:
        value = doc.get(name)
        if not isinstance(value, str) or not value.strip():
            reason = "is missing" if value is None else f"must be a non-empty string, got {value!r}"
            raise InputError(f"{reason}: every object needs apiVersion and kind (e.g. apiVersion: "
                             "kueue.x-k8s.io/v1beta2, kind: Workload)", field=f"{where}.{name}".lstrip("."),
                             obj=object_label({**doc, "kind": None} if name == "kind" else doc), file=BODY)
    items = doc.get("items")
    if str(doc["kind"]).endswith("List") and isinstance(items, list):
        require_type_fields(items, f"{where}.items".lstrip("."))


def posted_objects(body: Any, *, now: datetime | None = None) -> tuple[ParsedObjects, list[str]]:
    """The objects of a request body (one object, a JSON array, or a `kind: List`), parsed
    and validated as the CLI reads files; `InputError` names the object and the field. A
    Workload without a creationTimestamp is created `now`, as the API server would stamp it
    (else it would have waited since Go's zero time, about 292 years)."""
    if not isinstance(body, Mapping | list):
        raise InputError("expected a Kubernetes object, a list of objects or a `kind: List`", file=BODY)
    if isinstance(body, Mapping) and not body:
        raise InputError("empty: send a Workload, a list of objects or a `kind: List`", file=BODY)
    require_type_fields(body)
    objects = flatten_objects([body], file=BODY)
    if not objects:
        raise InputError("no objects: send a Workload, a list of objects or a `kind: List`", file=BODY)
    if len(objects) > MAX_OBJECTS:
        raise InputError(f"at most {MAX_OBJECTS} objects per request, got {len(objects)}", file=BODY)
    if now is not None:
        objects = [_created(obj, now) for obj in objects]
    warnings: list[str] = []
    parsed = parse_objects([(BODY, obj) for obj in objects], decode_assignment=decode_assignment,
                           warn=warnings.append)
    return parsed, warnings


def _created(obj: Any, now: datetime) -> Any:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(metadata, Mapping) or obj.get("kind") != "Workload" or metadata.get("creationTimestamp"):
        return obj
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**obj, "metadata": {**metadata, "creationTimestamp": stamp}}


def view_definitions(state: ClusterState) -> ParsedObjects:
    """The objects of the view a pass never changes in place (a pass on a state built from
    them leaves them as they are): nodes, Topologies, flavors, queues, Cohorts, checks and
    priority classes."""
    return ParsedObjects(
        nodes=list(state.nodes.values()), topologies=list(state.topologies.values()),
        flavors=list(state.flavors.values()), cluster_queues=list(state.cluster_queues.values()),
        local_queues=list(state.local_queues.values()), cohorts=list(state.cohorts.values()),
        admission_checks=list(state.admission_checks.values()),
        priority_classes=list(state.priority_classes.values()), namespaces=dict(state.namespaces))


def merged(base: ParsedObjects, posted: ParsedObjects, order: dict[str, int] | None = None) -> ParsedObjects:
    """`base` with the posted objects added, replacing those of the same kind and name."""
    lists = {}
    for f in fields(ParsedObjects):
        if f.name not in LISTS:
            continue
        kind = LISTS[f.name]
        extra = getattr(posted, f.name)
        replaced = {_identity(kind, obj) for obj in extra}
        kept = [obj for obj in getattr(base, f.name) if _identity(kind, obj) not in replaced]
        lists[f.name] = kept + list(extra)
    return ParsedObjects(**lists, namespaces={**base.namespaces, **posted.namespaces}, origins=dict(posted.origins),
                         workload_order=dict(order or {}))


def merged_inputs(definitions: ParsedObjects, posted: ParsedObjects) -> ParsedObjects:
    """The mirror with the posted objects added. Objects a pass never changes (nodes,
    queues, flavors) are the process's view's `definitions`; workloads and pods are fresh
    copies, the workloads parsed anew (a pass changes the objects it is given) and read as
    the scheduler's cold start reads them, in its order (their row ids; the posted ones after)."""
    order: dict[str, int] = {}
    base = replace(definitions, workloads=engine_workloads(order=order), pods=engine_pods())
    return merged(base, posted, order)


def _topology_levels(state: ClusterState, flavors: Mapping[str, str]) -> list[str] | None:
    for flavor in flavors.values():
        snap = state.tas_snapshots.get(flavor)
        if snap is not None:
            return list(snap.level_keys)
    return None


def _placement(state: ClusterState, wj: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pod set's domains with the value of every topology level (block, rack, node)."""
    out = []
    for ps in wj["podSets"]:
        if not ps.get("topologyAssignment"):
            continue
        levels = _topology_levels(state, ps.get("flavors") or {}) or list(ps["levels"])
        domains = []
        for domain in ps["domains"]:
            values = list(domain["values"])
            node = state.node_for_hostname(values[-1]) if ps["levels"][-1:] == [HOSTNAME_LABEL] else None
            if node is not None and len(values) < len(levels):
                values = [node.labels.get(level, "") for level in levels[:-1]] + [values[-1]]
            domains.append({"values": values, "count": domain["count"], "node": node.name if node else None})
        out.append({"podSet": ps["name"], "levels": levels, "domains": domains})
    return out


def what_if(*, body: Any, now: datetime | None = None) -> dict[str, Any]:
    # a what-if plays the whole mirror: a million short-lived objects, next to no cycles
    with gc_paused():
        return _what_if(body=body, now=now or timezone.now())


def _what_if(*, body: Any, now: datetime) -> dict[str, Any]:
    posted, warnings = posted_objects(body, now=now)
    view = engine_view()
    with view.lock:
        definitions = view_definitions(view.state)
    # a level no Topology has in what was posted: almost always a typo, refused before the
    # mirror's workloads are read
    problems = unknown_level_problems(merged(definitions, posted))
    if problems:
        raise problems[0]
    # what the mirror says of the workloads the pass plays (finished ones it does not), in no
    # order (sorting 100,000 rows by name took half the read)
    stored = dict(((ns, name), status) for ns, name, status in
                  active_workload_rows().order_by().values_list("namespace", "name", "status"))
    if fork_what_if():
        answer = forked_answer(view, posted, stored, now)
        if answer is not None:
            return {**answer, "warnings": warnings + answer["warnings"]}
    engine, built = fresh_engine(definitions, posted)
    answer = play(engine, posted, stored, now, built)
    return {**answer, "warnings": warnings + answer["warnings"]}


def fresh_engine(definitions: ParsedObjects, posted: ParsedObjects) -> tuple[Engine, list[str]]:
    """An engine built afresh from the mirror's objects and the posted ones, and what its
    build warned of: the levels the mirror's workloads name that no Topology has, then the
    engine's own warnings."""
    inputs = merged_inputs(definitions, posted)
    warnings = _mirror_level_warnings(unknown_level_problems(inputs), posted)
    engine = Engine.from_parsed(inputs, feature_gates(), warnings.append, config=kueue_configuration()[1])
    engine.state.tas_snapshots  # noqa: B018 -- its warnings before the pass's
    return engine, warnings


def followed_engine(engine: Engine, posted: ParsedObjects) -> tuple[Engine, list[str]]:
    """The view's `engine` (a copy of its own: this changes it) with the posted objects
    applied as changes, as `fresh_engine` would build it, and the same warnings."""
    state = engine.state
    engine.answered, engine.decisions = Answers(), {}  # a fresh engine has given no answers yet
    built: list[str] = []
    state.warn = built.append
    state.load(posted)  # as changes, in the order a cold start takes them
    order = state.order
    mirrored = ParsedObjects(topologies=list(state.topologies.values()),
                             workloads=sorted(state.workload_map.values(), key=lambda wl: order[wl.key]))
    warnings = _mirror_level_warnings(unknown_level_problems(mirrored), posted)
    state.warn_unusable_flavors()
    engine.sync(None)  # the posted workloads are queued as a cold start queues its own
    return engine, warnings + built


def _mirror_level_warnings(problems: list[InputError], posted: ParsedObjects) -> list[str]:
    """The mirror's workloads' level problems (the posted ones' were refused already)."""
    posted_labels = {f"Workload/{w.namespace}/{w.name}" for w in posted.workloads}
    return [str(problem) for problem in problems if problem.obj not in posted_labels]


def play(engine: Engine, posted: ParsedObjects, stored: Mapping[tuple[str, str], str], now: datetime,
         warnings: list[str]) -> dict[str, Any]:
    """The pass on `engine` and the answer: each posted Workload in the order posted, the
    mirror's workloads it changes in the mirror's order, the posted workloads' events and
    `warnings` with those of the pass after them."""
    # cycles=None: as many scheduling cycles as it takes until nothing more is admitted, so the
    # answer is where the workload lands, not only whether it heads its queue this cycle
    result = PassResult()
    engine.state.warn = warnings.append
    outcome = engine.run_pass(now, cycles=None, result=result)
    posted_order = {w.key: i for i, w in enumerate(posted.workloads)}
    # the engine after the pass: placements name its nodes; a posted workload it did not admit is
    # explained by where the pass stopped it, details counted on the cluster as the pass left it
    after = engine.state
    told = _told(after, outcome, posted_order, stored)
    annotate_failures(told, outcome.replacement_failures)
    workloads, changes = [], []
    shared = Shared()  # the state does not change while the posted workloads are explained
    for wr in told:
        if wr.key in posted_order:
            wj = workload_json(wr)
            explanation = None
            if wr.workload.admission is None:
                explanation = explanation_json(explain_workload(after, wr.workload, shared=shared,
                                                                stop=engine.stop_record(wr.key, now)))
            workloads.append((posted_order[wr.key], {**wj, "placement": _placement(after, wj),
                                                     "explanation": explanation}))
        else:
            before = stored.get((wr.workload.namespace, wr.workload.name))
            if not wr.decided and wr.status in WAITING_STATUSES and before in WAITING_STATUSES:
                continue  # a waiting workload the pass did not get to: nothing new to say of it
            if before is not None and before != wr.status:
                changes.append((after.order.get(wr.key, -1), {
                    "namespace": wr.workload.namespace, "name": wr.workload.name,
                    "clusterQueue": wr.cluster_queue or None, "statusBefore": before,
                    "status": wr.status, "message": wr.message}))
    return {
        "workloads": [wj for _, wj in sorted(workloads, key=lambda item: item[0])],
        "changes": [change for _, change in sorted(changes, key=lambda item: item[0])],
        "events": [{"key": e.key, "type": e.type, "reason": e.reason, "message": e.message}
                   for e in result.events if e.key in posted_order],
        "warnings": warnings,
        "objects": {LISTS[f.name]: len(getattr(posted, f.name)) for f in fields(ParsedObjects)
                    if f.name in LISTS and getattr(posted, f.name)},
    }


def _told(state: ClusterState, outcome: PassOutcome, posted: Mapping[str, int],
          stored: Mapping[tuple[str, str], str]) -> list[WorkloadResult]:
    """The results an answer may tell of: every posted workload's, and those of the mirror's
    workloads the pass decided on or whose status is not what the mirror says. Of the others
    (nearly all of 100,000) only the status is worked out, not a whole result."""
    out = []
    for key, wl in state.workload_map.items():
        wr = outcome.decided.get(key)
        if wr is None:
            if key not in posted:
                before = stored.get((wl.namespace, wl.name))
                if before is None or before == unchanged_status(wl):
                    continue
            wr = unchanged_result(state, wl)
        out.append(wr)
    return out


# ------------------------------------------------------------------ the pass in a forked child

_fork_lock = threading.Lock()  # one child per process at a time: each may copy much of the view
# a child still playing after this long is stuck (one pass at 100,000 workloads takes seconds):
# it is stopped and the pass played in the process (gunicorn's own timeout is TAS_WEB_TIMEOUT, 120 s)
CHILD_SECONDS = 60.0
# gunicorn's worker handles these; a child of the worker takes them as a plain process does
_WORKER_SIGNALS = ("SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGABRT", "SIGWINCH")


def fork_what_if() -> bool:
    return bool(getattr(settings, "TAS_WHAT_IF_FORK", True)) and hasattr(os, "fork")


def forked_answer(view: EngineView, posted: ParsedObjects, stored: Mapping[tuple[str, str], str],
                  now: datetime) -> dict[str, Any] | None:
    """The what-if's answer from a child process forked from this one: the child applies the
    posted objects to its copy-on-write image of the view's engine (which is the mirror as it
    is now) and plays the pass there, so that nothing is read from the mirror or built, and
    the view itself stays as it is. None when the child failed (logged): the caller then
    plays the pass in this process."""
    with _fork_lock:
        read_end, write_end = os.pipe()
        try:
            with view.lock:  # no other thread changes the view while it is copied
                view.state.derive()  # kept in the view for the next what-ifs' children
                pid = os.fork()
        except OSError as exc:  # out of memory or processes
            os.close(read_end)
            os.close(write_end)
            logger.error("what-if: could not fork the web process (%s); the pass is played here", exc)
            return None
        if pid == 0:
            _play_in_child(read_end, write_end, view, posted, stored, now)  # does not return
        os.close(write_end)
        try:
            payload = _read_to_end(read_end, pid, time.monotonic() + CHILD_SECONDS)
        finally:
            os.close(read_end)
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped already (SIGCHLD ignored): its answer says how it went
                status = 0
    try:
        if payload is None:
            ok, value = False, f"it was still playing after {CHILD_SECONDS:g}s and was stopped"
        else:
            ok, value = pickle.loads(payload) if payload else (
                False, f"it exited with code {os.waitstatus_to_exitcode(status)} and sent nothing")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        ok, value = False, f"its answer could not be read: {exc}"
    if ok:
        return value
    logger.error("what-if: the pass forked from the web's engine view failed; played here instead. %s", value)
    return None


def _read_to_end(fd: int, pid: int, deadline: float) -> bytes | None:
    """What the child sends until it closes the pipe; None if that is not by `deadline` (the
    child, stuck, is killed)."""
    chunks = []
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _play_in_child(read_end: int, write_end: int, view: EngineView, posted: ParsedObjects,
                   stored: Mapping[tuple[str, str], str], now: datetime) -> None:
    """The child: play, send (True, answer) or (False, why) back, exit without any cleanup
    (the parent's database connections and files are not this process's to close)."""
    code = 1
    try:
        os.close(read_end)
        for name in _WORKER_SIGNALS:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        gc.disable()  # nothing to collect that matters before this process exits
        try:
            engine, warnings = followed_engine(view.runtime.engine, posted)
            data = pickle.dumps((True, play(engine, posted, stored, now, warnings)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # whatever it is, the parent plays the pass itself
            data = pickle.dumps((False, traceback.format_exc()))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        code = 0
    finally:
        os._exit(code)
