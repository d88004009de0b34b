"""Rendering a pass result: JSON (the CLI contract), YAML, or a table for people."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import yaml

from scheduler.codec import encode_assignment
from scheduler.results import PassResult, PodSetResult, WorkloadResult


def _time(value) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def pod_set_json(ps: PodSetResult, *, by_hostname_prefix: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "flavors": dict(ps.flavors)}
    if ps.assignment is not None:
        out["topologyAssignment"] = encode_assignment(ps.assignment, by_hostname_prefix=by_hostname_prefix)
        decoded = ps.assignment.to_decoded_json()
        out["levels"], out["domains"] = decoded["levels"], decoded["domains"]
    else:
        out["topologyAssignment"] = None
    out["delayedTopologyRequest"] = ps.delayed_topology_request
    if ps.failure_reason:
        out["failureReason"] = ps.failure_reason
    return out


def workload_json(w: WorkloadResult, *, by_hostname_prefix: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": w.workload.namespace,
        "name": w.workload.name,
        "clusterQueue": w.cluster_queue,
        "status": w.status,
        "message": w.message,
        "podSets": [pod_set_json(ps, by_hostname_prefix=by_hostname_prefix) for ps in w.pod_sets],
        "unhealthyNodes": list(w.unhealthy_nodes),
    }
    if w.eviction_reason:
        out["evictionReason"] = w.eviction_reason
    out["conditions"] = [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
         "lastTransitionTime": _time(c.last_transition_time)}
        for c in w.conditions
    ]
    return out


def pods_json(result: PassResult) -> list[dict[str, Any]]:
    pods = [{"namespace": p.namespace, "name": p.name, "ungated": p.ungated, "nodeSelector": p.node_selector}
            for p in result.pods]
    pods += [{"namespace": t.namespace, "name": t.name, "ungated": False, "phase": "Failed", "nodeName": t.node,
              "conditions": [{"type": "TerminatedByKueue", "status": "True", "reason": t.reason,
                              "message": t.message}]}
             for t in result.terminated_pods]
    return pods


def result_json(result: PassResult, *, by_hostname_prefix: bool = True) -> dict[str, Any]:
    return {
        "workloads": [workload_json(w, by_hostname_prefix=by_hostname_prefix) for w in result.workloads],
        "pods": pods_json(result),
        "events": [{"key": e.key, "type": e.type, "reason": e.reason, "message": e.message} for e in result.events],
        "decisions": [
            {"key": d.key, "kind": d.kind, "node": d.node, "trigger": d.trigger, "message": d.message,
             "replacement": d.replacement, "podSet": d.pod_set}
            for d in result.decisions
        ],
        # with admission fair sharing: each LocalQueue's usage after the pass
        **({"localQueues": [lq.json() for lq in result.local_queues]} if result.local_queues else {}),
    }


def _domains_text(ps: PodSetResult, limit: int = 6) -> str:
    if ps.assignment is None:
        return "-"
    parts = [f"{'/'.join(d.values)} ({d.count})" for d in ps.assignment.domains[:limit]]
    more = len(ps.assignment.domains) - limit
    if more > 0:
        parts.append(f"… +{more} more")
    return ", ".join(parts)


# Kueue writes wait times in whole seconds ("wait time since queued was 47318400s"); JSON and
# YAML keep its messages exact, the table shows the duration as people read it.
_WAIT_TIME = re.compile(r"(wait time since [a-z ]+? was )(\d+)s\b")
_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def human_duration(seconds: int) -> str:
    """The two largest units of a duration: "547d 16h", "3h 5m", "2m", "42s", "0s"."""
    for index, (unit, size) in enumerate(_UNITS[:-1]):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            small_unit, small_size = _UNITS[index + 1]
            small = rest // small_size
            return f"{whole}{unit} {small}{small_unit}" if small else f"{whole}{unit}"
    return f"{seconds}s"


def humanize_wait_times(message: str) -> str:
    return _WAIT_TIME.sub(lambda m: m.group(1) + human_duration(int(m.group(2))), message)


def render_table(result: PassResult) -> str:
    """One row per workload: where it is, why, and the decoded domains of each PodSet."""
    header = ("WORKLOAD", "CLUSTERQUEUE", "STATUS", "PODSET", "PODS", "DOMAINS / REASON")
    rows: list[tuple[str, ...]] = []
    for w in result.workloads:
        first = True
        for ps in w.pod_sets or [PodSetResult("-", 0)]:
            if ps.assignment is not None:
                detail = _domains_text(ps)
            else:
                detail = humanize_wait_times(ps.failure_reason or w.message or "-")
            rows.append((w.key if first else "", w.cluster_queue if first else "", w.status if first else "",
                         ps.name, str(ps.count), detail))
            first = False
    text = _columns([header, *rows])
    if result.local_queues:
        ordered = sorted(result.local_queues, key=lambda q: (q.cluster_queue, q.usage is None, q.usage or 0.0,
                                                             q.namespace, q.name))
        usage_rows = [(f"{lq.namespace}/{lq.name}", lq.cluster_queue, "∞" if lq.usage is None else f"{lq.usage:.4g}",
                       f"{lq.weight:g}", lq.consumed_text()) for lq in ordered]
        text += "\n" + _columns([("LOCALQUEUE", "CLUSTERQUEUE", "USAGE", "WEIGHT", "CONSUMED"), *usage_rows])
    return text


def _columns(rows: list[tuple[str, ...]]) -> str:
    """Rows as aligned columns (the last one left as it is)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines) + "\n"


def render(result: PassResult, fmt: str, *, by_hostname_prefix: bool = True) -> str:
    if fmt == "table":
        return render_table(result)
    data = result_json(result, by_hostname_prefix=by_hostname_prefix)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return json_text(data)


def json_text(data: Any) -> str:
    """`data` as JSON indented by two spaces, with a final newline: the text `json.dumps(data,
    indent=2)` gives, written by orjson (the json module's indented writer is pure Python and
    took about a fifth of a `simulate` over 15,000 workloads). Where orjson's text could differ (a
    character beyond ASCII, which the json module escapes; an integer beyond 64 bits, which
    orjson refuses), the json module writes it. A float is written in its shortest form by both,
    though an exponent differs in its spelling (1e-05 against 1e-5): the same number."""
    try:
        raw = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(data, indent=2) + "\n"
    if not raw.isascii():
        return json.dumps(data, indent=2) + "\n"
    return raw.decode("ascii")
