"""What each page shows: the selectors' data and the figures built from it, as a template
context, the figures to draw, and the parts of the page a poll replaces.

A `Page` is rendered whole on the first request and, when its `version` changes, sent
again as JSON (`fragments`: element id -> HTML, `figures`: element id -> Plotly JSON) to the
page's script, which swaps the fragments and redraws the figures in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go
from django.http import QueryDict
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.utils.text import Truncator

from tasweb.api.kubeauth import UNRESTRICTED, AccessScope
from tasweb.dashboard import figures, selectors
from tasweb.dashboard.selectors import CORDONED, METRICS, NOT_READY, TAINTED, TopologyQuery
from tasweb.scheduling.estimates import eta_enabled

NODE_TABLE_MAX = 64  # a rack with at most this many nodes lists them in a table
NODE_TABLE_SMALL = 16  # and so does a whole cluster or block this small
DOMAIN_ROWS_SHOWN = 200  # decoded assignment rows listed on a workload's page
EVENTS_PER_PAGE = 50  # rows of the history table (a row is one event or a run of repeats)
WORKLOAD_EVENTS = 500  # newest events of a workload on its page


@dataclass
class Page:
    template: str
    context: dict[str, Any]
    figures: dict[str, go.Figure] = field(default_factory=dict)
    fragments: dict[str, str] = field(default_factory=dict)  # element id -> template

    def figures_json(self) -> str:
        """{element id: figure} as one JSON object, built from each figure's own JSON text."""
        parts = [f'"{key}":{figures.figure_json(fig)}' for key, fig in self.figures.items()]
        return "{" + ",".join(parts) + "}"


# ---------------------------------------------------------------- topology


def _summary(q: TopologyQuery, scope: AccessScope) -> dict[str, Any]:
    cap = q.capacity
    leaves = figures.under(cap, q.domain, cap.depth - 1)
    leaf_slice = slice(leaves.start, leaves.stop)
    a = figures.amounts(cap, cap.depth - 1, q.resource, q.metric)
    flags = cap.flag_counts[-1][leaf_slice].sum(axis=0) if len(leaves) else np.zeros(3, dtype=np.int64)
    alloc, used = float(a.allocatable[leaf_slice].sum()), float(a.used[leaf_slice].sum())
    workloads = scope.visible_keys(cap.workloads.get(q.domain, []) if q.domain else sorted(
        {w for path, names in cap.workloads.items() if len(path) == 1 for w in names}))
    unit = q.unit
    return {
        "nodes": sum(len(cap.tree.leaf_nodes[i]) for i in leaves),
        "not_ready": int(flags[0]), "cordoned": int(flags[1]), "tainted": int(flags[2]),
        "capacity": unit.show(alloc), "used": unit.show(used), "free": unit.show(alloc - used),
        "used_pct": f"{100 * used / alloc:.0f} %" if alloc > 0 else "-",
        "workload_count": len(workloads), "workloads": workloads[:12],
    }


def _breadcrumbs(q: TopologyQuery) -> list[dict[str, str]]:
    crumbs = [{"label": q.flavor, "domain": "", "level": "flavor"}]
    for depth in range(1, len(q.domain) + 1):
        crumbs.append({"label": q.domain[depth - 1], "domain": "/".join(q.domain[:depth]),
                       "level": q.capacity.levels[depth - 1]})
    for crumb in crumbs:
        crumb["query"] = urlencode(q.as_params(domain=crumb["domain"]))
    return crumbs


def _node_rows(q: TopologyQuery, scope: AccessScope) -> list[dict[str, Any]]:
    cap = q.capacity
    leaves = figures.under(cap, q.domain, cap.depth - 1)
    # a rack (or a small cluster) lists its nodes; a block or the whole flavor has the heatmap
    if len(leaves) > NODE_TABLE_MAX or (len(q.domain) < cap.depth - 2 and len(leaves) > NODE_TABLE_SMALL):
        return []
    a = figures.amounts(cap, cap.depth - 1, q.resource, q.metric)
    unit = q.unit
    rows = []
    for i in leaves:
        path = cap.tree.levels[-1].values[i]
        bits = int(cap.leaf_flags[i])
        rows.append({
            "nodes": cap.nodes_of_leaf(i), "domain": "/".join(path), "domain_values": list(path),
            "not_ready": bool(bits & NOT_READY), "cordoned": bool(bits & CORDONED), "tainted": bool(bits & TAINTED),
            "taints": cap.leaf_taints[i],
            "capacity": unit.show(a.allocatable[i]), "used": unit.show(a.used[i]), "free": unit.show(a.free[i]),
            "used_pct": f"{100 * a.used[i] / a.allocatable[i]:.0f} %" if a.allocatable[i] > 0 else "-",
            "workloads": [{"key": w, "namespace": w.split("/")[0], "name": w.split("/")[1]}
                          for w in scope.visible_keys(cap.workloads.get(path, []))],
        })
    return rows


TOPOLOGY_FRAGMENTS = {"topology-summary": "dashboard/_topology_summary.html",
                      "topology-breadcrumbs": "dashboard/_topology_breadcrumbs.html",
                      "topology-nodes": "dashboard/_topology_nodes.html"}


def topology_page(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> Page:
    q = selectors.topology_query(params)
    if q is None:
        return Page("dashboard/topology.html", {"empty": True, "node_count": selectors.node_count(),
                                                "nav": "topology"})
    cap = q.capacity
    grid = figures.grid_layout(cap, q.domain)
    context = {
        "nav": "topology", "q": q, "flavors": selectors.tas_flavors(), "resources": cap.resources,
        "metrics": METRICS, "levels": cap.levels, "summary": _summary(q, scope), "breadcrumbs": _breadcrumbs(q),
        "node_rows": _node_rows(q, scope), "no_nodes": cap.leaf_count == 0,
        "nodes_without_levels": cap.nodes_without_levels, "grid_level": cap.levels[grid.cell_level]
        if grid.panels else "", "grid_nodes": grid.cell_level == cap.depth - 1, "drill": grid.drill,
        "leaf_level": cap.levels[-1] if cap.levels else "",
    }
    figs = {} if cap.leaf_count == 0 else {
        "fig-hierarchy": figures.topology_hierarchy(q), "fig-grid": figures.topology_grid(q, grid)}
    return Page("dashboard/topology.html", context, figs, TOPOLOGY_FRAGMENTS)


# ---------------------------------------------------------------- workloads


def _event_rows(rows: Iterable[Any], scope: AccessScope = UNRESTRICTED) -> list[dict[str, Any]]:
    """Events (model rows, or `selectors.event_groups`' groups) as the events table shows them,
    naming no workload of a namespace the reader may not read."""
    out = []
    for e in rows:
        row = e if isinstance(e, Mapping) else {name: getattr(e, name) for name in selectors.EVENT_FIELDS}
        namespace, _, name = row["workload_key"].partition("/")
        shown = {**row, "message": scope.redact(row.get("message") or ""),
                 "trigger": scope.redact(row.get("trigger") or "")} if not scope.unrestricted else row
        out.append({**shown, "namespace": namespace, "name": name, "count": row.get("count", 1),
                    "first_at": row.get("first_at", row["at"]), "last_at": row.get("last_at", row["at"])})
    return out


# what has changed since the cycle decided, told apart from what would help
SINCE_CYCLE = frozenset({"room-freed", "quota-changed"})


def _why_context(why: dict[str, Any], scope: AccessScope) -> tuple[dict[str, Any], dict[str, go.Figure]]:
    figs = {}
    why = scope.redact(why)
    explanation = why.get("explanation") or {}
    pod_sets = []
    for index, ps in enumerate(explanation.get("podSets") or []):
        fig = figures.why_pending_figure(ps)
        fig_id = f"fig-why-{why['namespace']}-{why['name']}-{index}".replace(".", "-")
        if fig is not None:
            figs[fig_id] = fig
        pod_sets.append({**ps, "figure_id": fig_id if fig is not None else "",
                         "level_rows": [{**fit, "short": figures.short_level(fit["level"]),
                                         "best": "/".join(fit["bestDomain"])} for fit in ps.get("levels") or []]})
    blocking = []
    for key in scope.visible_keys((explanation.get("stop") or {}).get("blocking") or []):
        namespace, _, name = key.partition("/")
        blocking.append({"key": key, "url": reverse("dashboard:workload", kwargs={"namespace": namespace,
                                                                                  "name": name})})
    return {"why": why, "why_pod_sets": pod_sets, "why_quota": explanation.get("quota") or [],
            "why_suggestions": [s for s in explanation.get("suggestions") or [] if s.get("kind") not in SINCE_CYCLE],
            "why_since": [s for s in explanation.get("suggestions") or [] if s.get("kind") in SINCE_CYCLE],
            "why_blocking": blocking,
            # the record's ISO 8601 time, for the templates' `date` filter
            "why_stop_at": parse_datetime(at) if isinstance(at := (explanation.get("stop") or {}).get("at"), str)
            else None,
            "why_reserved_since": parse_datetime(since) if isinstance(
                since := (why.get("admissionWait") or {}).get("reservedSince"), str) else None}, figs


WORKLOAD_FRAGMENTS = {"workload-header": "dashboard/_workload_header.html",
                      "workload-placement": "dashboard/_workload_placement.html",
                      "workload-why": "dashboard/_why_pending.html",
                      "workload-events": "dashboard/_events_table.html"}


RUNTIME_SOURCES = {
    "annotation": "its kueue.x-k8s.io/expected-runtime annotation",
    "activeDeadlineSeconds": "its pods' activeDeadlineSeconds",
    "history": "finished workloads like it",
    "default": "the default (no finished workloads of its kind yet)",
}
PREDICTED_DOMAINS_SHOWN = 12


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes)
    return " ".join(parts[:2]) if parts else f"{secs} s"


def predicted_context(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the workload page says of when a queued workload starts; None when it is not queued."""
    if summary.get("status") not in selectors.api.QUEUED_STATUSES:
        return None
    p = summary.get("predictedStart")
    if p is None:
        return {"time": None, "reason": "not estimated yet" if eta_enabled() else "start-time estimates are turned off"}
    runtime = p.get("runtime") or {}
    placement = []
    for ps in p.get("placement") or []:
        topology = ps.get("topologyAssignment") or {}
        domains = [{"path": "/".join(d["values"]), "count": d["count"]} for d in topology.get("domains") or []]
        placement.append({"pod_set": ps["podSet"], "count": ps["count"], "flavor": ps.get("flavor"),
                          "flavors": ps.get("flavors") or {},
                          "level": figures.short_level((topology.get("levels") or [""])[-1]),
                          "domains": domains[:PREDICTED_DOMAINS_SHOWN],
                          "more": max(0, len(domains) - PREDICTED_DOMAINS_SHOWN)})
    return {**p, "source_text": RUNTIME_SOURCES.get(p.get("source"), p.get("source")),
            "runtime_text": duration_text(runtime.get("median")), "runtime_detail": runtime.get("detail") or "",
            "placement_rows": placement, "calibration_band": calibration_band_text(p.get("calibration"))}


def calibration_band_text(calibration: Mapping[str, Any] | None) -> str:
    """Which earlier predictions calibrated a range: those expecting a wait like this one's
    (nothing to say where one band held them all)."""
    if not calibration:
        return ""
    low, high = calibration.get("waitFrom") or 0.0, calibration.get("waitTo")
    if high is None:
        return f"that expected a wait of {duration_text(low)} or more" if low > 0 else ""
    if low <= 0:
        return f"that expected a wait under {duration_text(high)}"
    return f"that expected a wait of {duration_text(low)} to {duration_text(high)}"


def workload_page(namespace: str, name: str, params: QueryDict, reader: AccessScope = UNRESTRICTED) -> Page:
    row = selectors.workload_or_404(namespace, name, reader)
    placement = selectors.workload_placement(workload=row)
    context: dict[str, Any] = {"nav": "workloads", "w": placement.summary, "pod_sets": placement.pod_sets,
                               "assignments": [], "why": None, "why_pod_sets": [],
                               "predicted": predicted_context(placement.summary)}
    figs: dict[str, go.Figure] = {}
    for a in placement.assignments:
        domains = a["decoded"]["domains"] if a["decoded"] else []
        context["assignments"].append({
            **a, "encoded_text": placement.encoded_text.get(a["name"], ""),
            "domain_rows": domains[:DOMAIN_ROWS_SHOWN], "domain_count": len(domains),
            "level_names": [figures.short_level(level) for level in (a["decoded"] or {}).get("levels", [])],
        })
    if placement.flavor and placement.pods_per_path and reader.may_list_nodes:  # the heatmap shows the cluster
        try:
            q = selectors.topology_query(params, flavor=placement.flavor)
        except selectors.DashboardError:
            q = None
        if q is not None:
            scope = selectors.placement_scope(q.capacity, list(placement.pods_per_path))
            q = TopologyQuery(q.flavor, q.resource, q.metric, scope, q.capacity)
            grid = figures.grid_layout(q.capacity, scope)
            fig = figures.topology_grid(q, grid, highlight=placement.pods_per_path, highlight_name=row.key)
            figs["fig-placement"] = fig
            tinted = any(t.type == "heatmap" and t.meta and "highlight" in t.meta for t in fig.data)
            context.update(q=q, placement_nodes=len(placement.pods_per_path), placement_tinted=tinted,
                           placement_pods=sum(placement.pods_per_path.values()), scope="/".join(scope),
                           topology_query=urlencode(q.as_params(domain=())))
    if row.status in (*selectors.api.QUEUED_STATUSES, selectors.cluster.WorkloadStatus.QUOTA_RESERVED) \
            or row.invalid_reason:
        why_context, why_figs = _why_context(selectors.why_pending(workload=row), reader)
        context.update(why_context)
        figs.update(why_figs)
    history = selectors.api.event_list().filter(workload_key=row.key).order_by("-at", "-id")
    events = list(history[:WORKLOAD_EVENTS])
    context["events"] = _event_rows(selectors.event_groups(history, limit=WORKLOAD_EVENTS).groups, reader)
    context["event_count"] = len(events)
    if events:
        figs["fig-timeline"] = figures.history_timeline(_event_rows(events, reader), height=260)
    return Page("dashboard/workload.html", context, figs, WORKLOAD_FRAGMENTS)


def why_pending_fragment(namespace: str, name: str, scope: AccessScope = UNRESTRICTED) -> Page:
    """The explanation of one queue entry, and the status and reason of the row it explains
    (`workload`), which the entry's summary shows in place of what the page was rendered with."""
    row = selectors.workload_or_404(namespace, name, scope)
    why = scope.redact(selectors.why_pending(workload=row))
    context, figs = _why_context(why, scope)
    entry = {"status": why["status"], "message": Truncator(why["message"] or "not tried yet").chars(200)}
    return Page("dashboard/_why_pending.html", {**context, "compact": True, "workload": entry}, figs,
                {"why": "dashboard/_why_pending.html"})


def expected_start(w: selectors.cluster.Workload, predictions: Mapping[str, Any]) -> dict[str, Any] | None:
    """The list's "Expected start" cell of a workload: None when it is not queued; else its
    predicted start (with the range, for the cell's title) or why there is none."""
    if w.status not in selectors.api.QUEUED_STATUSES:
        return None
    p = predictions.get(w.key)
    if p is None:
        return {"time": None, "why": "not estimated yet" if eta_enabled() else "estimates off"}
    return {"time": p["time"], "earliest": p["earliest"], "latest": p["latest"], "why": p["reason"] or "",
            "played_until": p.get("playedUntil")}


def workload_list_page(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> Page:
    rows, chosen = selectors.workload_list(params, scope)
    page = selectors.page_of(rows, params.get("page"))
    queued = [w.key for w in page.object_list if w.status in selectors.api.QUEUED_STATUSES]
    predictions = selectors.api.predictions_of(queued) if queued else {}
    return Page("dashboard/workloads.html", {
        "entries": [{"w": w, "expected": expected_start(w, predictions)} for w in page.object_list],
        "nav": "workloads", "page": page, "chosen": chosen, "statuses": selectors.cluster.WorkloadStatus.values,
        "waiting": selectors.WAITING,
        "cluster_queues": selectors.cluster_queue_names(), "filter_query": urlencode(chosen),
        "any_workload": selectors.cluster.Workload.objects.filter(scope.workloads_q()).exists(),
    }, {}, {"workload-list": "dashboard/_workload_list.html"})


# ---------------------------------------------------------------- history


def history_page(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> Page:
    events = selectors.history_events(params, scope)
    drawn = _event_rows(events[: selectors.HISTORY_FIGURE_EVENTS], scope)
    grouped = selectors.event_groups(events)
    page = selectors.page_of(grouped.groups, params.get("page"), EVENTS_PER_PAGE)
    chosen = {key: params.getlist(key) if key == "kind" else params.get(key, "")
              for key in selectors.HISTORY_FILTERS}
    filtered = any(v for v in chosen.values())
    query = urlencode([(k, v) for k in selectors.HISTORY_FILTERS for v in params.getlist(k) if v], doseq=True)
    others = [(k, v) for k in selectors.HISTORY_FILTERS if k != "kind" for v in params.getlist(k) if v]
    counts, newest = selectors.history_problems(events) if drawn else ({}, [])
    problems = [{"kind": kind, "count": n, "query": urlencode([*others, ("kind", kind)])}
                for kind, n in counts.items()]
    context = {
        "nav": "history", "page": page, "events": _event_rows(page.object_list, scope), "drawn": len(drawn),
        "event_total": events.count() if drawn else 0, "grouped": grouped.events, "more": grouped.more,
        "problems": problems, "problem_count": sum(counts.values()), "problem_events": _event_rows(newest, scope),
        "problems_query": urlencode([*others, *(("kind", kind) for kind in counts)]),
        "chosen": chosen, "filtered": filtered, "filter_query": query, "kinds": selectors.event_kinds(),
        "cluster_queues": selectors.cluster_queue_names(), "local_queues": selectors.local_queue_names(),
        "figure_limit": selectors.HISTORY_FIGURE_EVENTS, "any_event": filtered or bool(drawn),
    }
    figs = {"fig-history": figures.history_timeline(drawn)} if drawn else {}
    return Page("dashboard/history.html", context, figs, {"history-results": "dashboard/_history_results.html"})


# ---------------------------------------------------------------- queues


def queues_page(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> Page:
    cards = selectors.queue_cards(cluster_queue=params.get("cluster_queue") or None, scope=scope)
    figs = {}
    rows = []
    for card in cards:
        fig = figures.quota_figure(card.quota)
        fig_id = f"fig-quota-{card.name}".replace(".", "-")
        if fig is not None:
            figs[fig_id] = fig
        eta = figures.start_timeline(card.predicted)
        eta_id = f"fig-eta-{card.name}".replace(".", "-")
        if eta is not None:
            figs[eta_id] = eta
        rows.append({"card": card, "figure_id": fig_id if fig is not None else "",
                     "eta_id": eta_id if eta is not None else "",
                     "quota_rows": [(flavor["name"], res) for group in card.quota or [] for flavor in group["flavors"]
                                    for res in flavor["resources"]]})
    context = {"nav": "queues", "cards": rows, "why_open": 3, "pending_shown": selectors.PENDING_SHOWN}
    return Page("dashboard/queues.html", context, figs, {"queue-cards": "dashboard/_queue_cards.html"})


# ---------------------------------------------------------------- side by side with Kueue

COMPARISONS_PER_PAGE = 50  # disagreements listed a page


def _placement_rows(placements: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in placements or []:
        out.append({**p, "level_name": figures.short_level(p.get("level") or "") or "spans the top level",
                    "domain_path": "/".join(p.get("domain") or []),
                    "rows": [{"path": "/".join(d["values"]), "count": d["count"], "room": d.get("room"),
                              "short": d.get("room") is not None and d["room"] < d["count"]}
                             for d in p.get("domains") or []]})
    return out


def _pods_per_path(placements: list[Mapping[str, Any]], flavor: str) -> dict[tuple[str, ...], int]:
    pods: dict[tuple[str, ...], int] = {}
    for p in placements or []:
        if p.get("flavor") != flavor:
            continue
        for d in p.get("domains") or []:
            path = tuple(d["values"])
            pods[path] = pods.get(path, 0) + int(d["count"])
    return pods


def _comparison_figure(row: Any, params: QueryDict) -> tuple[go.Figure | None, dict[str, Any]]:
    """Both assignments on the topology heatmap of Kueue's flavor: Kueue's pods as filled
    diamonds, this engine's as open circles."""
    flavor = row.flavor or next((p.get("flavor") for p in row.engine or []), "")
    kueue = _pods_per_path(row.kueue, flavor)
    engine = _pods_per_path(row.engine, flavor)
    if not flavor or not (kueue or engine):
        return None, {}
    try:
        q = selectors.topology_query(QueryDict(), flavor=flavor)
    except selectors.DashboardError:
        return None, {}
    if q is None:
        return None, {}
    scope = selectors.placement_scope(q.capacity, [*kueue, *engine])
    q = TopologyQuery(q.flavor, q.resource, q.metric, scope, q.capacity)
    grid = figures.grid_layout(q.capacity, scope)
    kueue_colour, kueue_symbol = figures.KUEUE_MARK
    engine_colour, engine_symbol = figures.ENGINE_MARK
    marks = [figures.Highlight(f"Kueue placed {sum(kueue.values())} pod(s)", kueue, kueue_colour, kueue_symbol,
                               "kueue")]
    if engine:
        marks.append(figures.Highlight(f"this engine would place {sum(engine.values())} pod(s)", engine,
                                       engine_colour, engine_symbol, "engine"))
    fig = figures.topology_grid(q, grid, highlights=marks)
    return fig, {"scope": "/".join(scope), "flavor": flavor,
                 "topology_query": urlencode(q.as_params(domain=scope))}


def comparison_page(params: QueryDict) -> Page:
    rows = selectors.comparisons(params)
    bucket = selectors.summary_bucket(rows)
    summary = selectors.api.comparison_summary(rows, bucket=bucket)
    disagreements = rows.exclude(category="SameDomains")
    page = selectors.page_of(disagreements, params.get("page"), COMPARISONS_PER_PAGE)
    chosen = {key: params.getlist(key) if key == "category" else params.get(key, "")
              for key in selectors.COMPARISON_FILTERS}
    query = urlencode([(k, v) for k in selectors.COMPARISON_FILTERS for v in params.getlist(k) if v], doseq=True)
    selected = None
    wanted = params.get("selected") or ""
    if wanted:
        if not (wanted.isascii() and wanted.isdigit()):
            raise selectors.BadInput(f"selected: expected the id of a comparison, got {wanted!r}")
        selected = selectors.api.comparison_list().filter(id=int(wanted)).first()
        if selected is None:
            raise selectors.NotFound(f"No comparison with id {wanted}",
                                     hint="Comparisons are kept for TAS_COMPARISON_RETENTION_SECONDS (7 days).")
    elif page.object_list:
        selected = page.object_list[0]
    figs: dict[str, go.Figure] = {}
    if summary["buckets"]:
        figs["fig-agreement"] = figures.agreement_figure(summary["buckets"], bucket)
    context: dict[str, Any] = {
        "nav": "comparison", "summary": summary, "overall": summary["overall"], "page": page,
        "chosen": chosen, "filter_query": query, "filtered": any(chosen.values()),
        "categories": list(figures.COMPARISON_STYLE), "cluster_queues": selectors.cluster_queue_names(),
        "any_comparison": selectors.api.comparison_list().exists(), "selected": None,
        "rate_pct": f"{100 * summary['overall']['agreementRate']:.0f} %"
        if summary["overall"]["agreementRate"] is not None else "-",
    }
    if selected is not None:
        namespace, _, name = selected.workload_key.partition("/")
        fig, where = _comparison_figure(selected, params)
        if fig is not None:
            figs["fig-comparison"] = fig
        context["selected"] = {
            "row": selected, "namespace": namespace, "name": name, "kueue": _placement_rows(selected.kueue),
            "engine": _placement_rows(selected.engine), "drawn": fig is not None, **where,
            "stop": selected.stop if isinstance(selected.stop, dict) else None,
        }
    return Page("dashboard/comparison.html", context, figs,
                {"comparison-results": "dashboard/_comparison_results.html"})
