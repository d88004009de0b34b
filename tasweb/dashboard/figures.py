"""Plotly figures of the dashboard, built from what the selectors return.

One colour scale for capacity everywhere (Viridis: ordered, readable by colour-blind people
and in greyscale) on a fixed 0-100 % range, so a colour means the same on every figure;
event kinds and node conditions are told apart by marker shape and position as well as
colour (Okabe-Ito's palette). Figures go to the page as JSON (`figure_json`): numeric
arrays travel as base64 typed arrays, the template is the empty one, hover text is one
string per cell. For 10,000 nodes a topology heatmap is about 1 MB of JSON, 80 kB gzipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import plotly.graph_objects as go

from tasweb.dashboard.selectors import (
    CORDONED,
    FLAG_NAMES,
    NOT_READY,
    TAINTED,
    FlavorCapacity,
    TopologyQuery,
    Unit,
    stored_value,
    unit_of,
)

COLORSCALE = "Viridis"
# Okabe & Ito, "Color Universal Design": distinguishable with every common colour deficiency
OKABE_ITO = {"orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442", "blue": "#0072B2",
             "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000", "grey": "#999999"}
HIGHLIGHT = OKABE_ITO["vermillion"]
NO_CAPACITY = "#ced4da"  # a domain with none of the chosen resource
FONT = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica Neue, Arial, sans-serif"

MAX_PANELS = 16  # blocks drawn node by node; more, and the grid shows racks (nodes on drill-down)
MAX_GRID_CELLS = 20_000
MAX_HIERARCHY_DOMAINS = 1_500  # levels are added to the hierarchy while it stays below this
MAX_HIERARCHY_LABELS = 64  # a level with more domains than this draws them without names
# A domain of the hierarchy is named only where its name can fit: its cell is as wide as its
# nodes, and the plot is at most this wide (the page's content stops at 1280 px). The page's
# script hides, after every draw, any name that still does not fit the width it got.
HIERARCHY_PLOT_PX = 960
LABEL_CHAR_PX = 6  # a character of a 12 px label, at its narrowest
LABEL_PADDING_PX = 8
CHUNK = 40  # nodes per row when the topology has a single level
MAX_HOVER_WORKLOADS = 3
MAX_HIGHLIGHT_MARKERS = 1_000  # a workload on more cells than this is shown as a tint, not as markers

FLAG_MARKERS = {NOT_READY: ("x-thin-open", OKABE_ITO["black"]), CORDONED: ("square-open", OKABE_ITO["black"]),
                TAINTED: ("triangle-up-open", OKABE_ITO["black"])}

# event kinds in the order of a workload's life, each with a colour and a marker shape
EVENT_STYLE: dict[str, tuple[str, str]] = {
    "Queued": (OKABE_ITO["grey"], "circle-open"),
    "Pending": (OKABE_ITO["sky"], "hourglass"),
    "Admitted": (OKABE_ITO["green"], "circle"),
    "PodsUngated": (OKABE_ITO["blue"], "triangle-right"),
    "NodeMarkedUnhealthy": (OKABE_ITO["orange"], "x"),
    "NodeReplaced": (OKABE_ITO["yellow"], "diamond"),
    "ReplacementFailed": (OKABE_ITO["vermillion"], "diamond-x"),
    "Evicted": (OKABE_ITO["vermillion"], "square"),
    "Preempted": (OKABE_ITO["purple"], "square-x"),
    "Requeued": (OKABE_ITO["blue"], "star"),
    "PodTerminated": (OKABE_ITO["black"], "triangle-down"),
    "Finished": (OKABE_ITO["black"], "circle-dot"),
    "Deleted": (OKABE_ITO["grey"], "x-thin-open"),
}


# a horizontal legend in the top margin, left-aligned: below the plot it would sit on the x
# axis's title, whose height depends on the ticks
LEGEND_ABOVE = {"orientation": "h", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom"}


def base_layout(**extra: Any) -> dict[str, Any]:
    return {
        "template": "none",
        "font": {"family": FONT, "size": 12, "color": "#1d232a"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "hoverlabel": {"font": {"family": FONT, "size": 12}, "align": "left"},
        **extra,
    }


def figure_json(fig: go.Figure) -> str:
    """The figure as JSON that is safe inside a <script> element (plotly escapes <, > and /)."""
    return fig.to_json(validate=False, engine="json")


# ---------------------------------------------------------------- capacity numbers


@dataclass(frozen=True)
class Amounts:
    """One resource at one level: capacity, usage (TAS and other), free, and the colour value."""

    allocatable: np.ndarray
    tas: np.ndarray
    other: np.ndarray
    used: np.ndarray
    free: np.ndarray
    value: np.ndarray  # the metric; NaN where there is no capacity


def amounts(cap: FlavorCapacity, level: int, resource: str, metric: str) -> Amounts:
    col = cap.column(resource)
    alloc = cap.allocatable[level][:, col]
    tas, other = cap.tas_usage[level][:, col], cap.other_usage[level][:, col]
    used = tas + other
    with np.errstate(divide="ignore", invalid="ignore"):
        used_pct = np.where(alloc > 0, 100.0 * used / alloc, np.nan)
    if metric == "used":
        value = used_pct
    elif metric == "free":
        value = 100.0 - used_pct
    else:
        value = np.where(alloc > 0, (alloc - used) / unit_of(resource).scale, np.nan)
    return Amounts(alloc, tas, other, used, alloc - used, value)


def colour_axis(q: TopologyQuery, values: np.ndarray) -> dict[str, Any]:
    unit = q.unit
    if q.metric == "free_units":
        top = float(np.nanmax(values)) if values.size and not np.all(np.isnan(values)) else 1.0
        title, cmax = f"free {unit.label}", max(top, 1.0)
    else:
        title, cmax = f"{q.metric} % of<br>{q.resource}", 100.0
    return {"colorscale": COLORSCALE, "cmin": 0, "cmax": cmax,
            "colorbar": {"title": {"text": title, "side": "top"}, "thickness": 12, "len": 0.9}}


def amount_lines(unit: Unit, a: Amounts) -> list[str]:
    """The capacity line of every domain's hover text (values repeat: each is formatted once)."""
    shown: dict[float, str] = {}

    def show(value: float) -> str:
        text = shown.get(value)
        if text is None:
            text = shown[value] = unit.show(value)
        return text

    out = []
    for alloc, used, tas, other, free in zip(a.allocatable.tolist(), a.used.tolist(), a.tas.tolist(),
                                             a.other.tolist(), a.free.tolist(), strict=True):
        if alloc <= 0 and used <= 0:
            out.append(f"no {unit.resource} capacity")
            continue
        pct = f" ({100 * used / alloc:.0f} %)" if alloc > 0 else ""
        out.append(f"{unit.resource}: {show(used)} used of {show(alloc)}{pct}"
                   f"<br>  TAS {show(tas)}, other pods {show(other)}; free {show(free)}")
    return out


def workloads_line(names: list[str]) -> str:
    if not names:
        return "no workloads"
    shown = ", ".join(names[:MAX_HOVER_WORKLOADS])
    more = f" (+{len(names) - MAX_HOVER_WORKLOADS} more)" if len(names) > MAX_HOVER_WORKLOADS else ""
    return f"workloads: {shown}{more}"


def flags_line(counts: list[int], nodes: int, leaf: bool, taints: str = "") -> str:
    parts = []
    for bit, n in zip((NOT_READY, CORDONED, TAINTED), counts, strict=True):
        if n:
            parts.append(FLAG_NAMES[bit] if leaf and nodes == 1 else f"{n} {FLAG_NAMES[bit]}")
    if taints:
        parts.append(f"taints {taints}")
    return " · ".join(parts)


# ---------------------------------------------------------------- grid layout


@dataclass
class Panel:
    path: tuple[str, ...]  # the domain the panel shows (a block), () for the whole flavor
    title: str
    row_paths: list[tuple[str, ...]]
    row_labels: list[str]
    cells: np.ndarray  # rows x columns: index at `Grid.cell_level` of the domain drawn there, -1 for none


@dataclass
class Grid:
    scope: tuple[str, ...]
    cell_level: int  # the leaves (nodes), or the level above them when there are too many blocks
    drill: str  # what a click opens: "panel" or "row"
    panels: list[Panel]

    @property
    def nodes_drawn(self) -> bool:
        return self.panels != [] and self.cell_level >= 0

    def cell_count(self) -> int:
        return int(sum((p.cells >= 0).sum() for p in self.panels))


def under(cap: FlavorCapacity, scope: tuple[str, ...], level: int) -> range:
    """Indices at `level` of the domains inside `scope` (contiguous: the tree is sorted)."""
    if not scope:
        return range(len(cap.tree.levels[level]))
    start = cap.domain_index(scope)
    end = start + 1
    for lvl in range(len(scope) - 1, level):
        child_start = cap.tree.levels[lvl].child_start
        start, end = int(child_start[start]), int(child_start[end])
    return range(start, end)


def label(path: tuple[str, ...]) -> str:
    return "/".join(path)


def _panel(cap: FlavorCapacity, path: tuple[str, ...], row_level: int, cell_level: int) -> Panel:
    tree = cap.tree
    rows = list(under(cap, path, row_level)) if row_level >= len(path) else [cap.domain_index(path)]
    row_paths = [tree.levels[row_level].values[r] for r in rows]
    spans = [under(cap, p, cell_level) for p in row_paths]
    width = max((len(s) for s in spans), default=0)
    cells = np.full((len(rows), width), -1, dtype=np.int64)
    for i, span in enumerate(spans):
        cells[i, : len(span)] = np.arange(span.start, span.stop)
    row_labels = [label(p[len(path):]) or label(p) for p in row_paths]
    return Panel(path=path, title=label(path), row_paths=row_paths, row_labels=row_labels, cells=cells)


def grid_layout(cap: FlavorCapacity, scope: tuple[str, ...]) -> Grid:
    """Blocks as panels, racks as rows, nodes as cells; with more blocks than MAX_PANELS one
    panel of blocks x racks (a click opens a block, drawn node by node)."""
    depth = cap.depth
    if depth == 0 or cap.leaf_count == 0:
        return Grid(scope, -1, "row", [])
    leaf_level = depth - 1
    if depth == 1:  # hosts only: rows of CHUNK nodes
        leaves = np.arange(cap.leaf_count)
        rows = math.ceil(len(leaves) / CHUNK)
        cells = np.full((rows, CHUNK), -1, dtype=np.int64)
        cells.flat[: len(leaves)] = leaves
        labels = [f"{i * CHUNK + 1}-{min((i + 1) * CHUNK, len(leaves))}" for i in range(rows)]
        return Grid(scope, leaf_level, "row", [Panel((), cap.flavor, [() for _ in labels], labels, cells)])
    row_level = depth - 2
    panel_level = max(depth - 3, len(scope) - 1)
    if panel_level < 0:
        panel_paths = [()]
    else:
        panel_paths = [cap.tree.levels[panel_level].values[i] for i in under(cap, scope, panel_level)]
    leaves_in_scope = len(under(cap, scope, leaf_level))
    if depth >= 3 and (len(panel_paths) > MAX_PANELS or leaves_in_scope > MAX_GRID_CELLS):
        # one panel: a row per block, a cell per rack
        panel = _panel(cap, scope, depth - 3, row_level)
        panel.title = label(scope) or cap.flavor
        return Grid(scope, row_level, "row", [panel])
    panels = [_panel(cap, path, row_level, leaf_level) for path in panel_paths]
    if panel_level < 0:
        panels[0].title = cap.flavor
    drill = "panel" if len(scope) <= panel_level else "row"
    return Grid(scope, leaf_level, drill, panels)


# ---------------------------------------------------------------- the heatmap


def _cell_hover(cap: FlavorCapacity, q: TopologyQuery, level: int, a: Amounts,
                indices: Iterable[int] | None = None) -> dict[int, str]:
    """Hover text of the domains at `level` (all of them, or `indices`)."""
    leaf = level == cap.depth - 1
    values = cap.tree.levels[level].values
    flags = cap.flag_counts[level].tolist()
    node_counts = _node_counts(cap, level)
    amount = amount_lines(q.unit, a)
    out = {}
    for i in range(len(values)) if indices is None else indices:
        path = values[i]
        head = f"<b>{path[-1]}</b>  {label(path[:-1])}" if leaf else f"<b>{label(path)}</b>  {node_counts[i]} nodes"
        lines = [head, amount[i], workloads_line(cap.workloads.get(path, []))]
        if any(flags[i]) or (leaf and cap.leaf_taints[i]):
            lines.append(flags_line(flags[i], node_counts[i], leaf, cap.leaf_taints[i] if leaf else ""))
        out[i] = "<br>".join(lines)
    return out


def _node_counts(cap: FlavorCapacity, level: int) -> list[int]:
    counts = np.array([len(g) for g in cap.tree.leaf_nodes], dtype=np.int64)
    for lvl in range(cap.depth - 2, level - 1, -1):
        above = np.zeros(len(cap.tree.levels[lvl]), dtype=np.int64)
        np.add.at(above, cap.tree.levels[lvl + 1].parent, counts)
        counts = above
    return counts.tolist()


def _panel_columns(n: int) -> int:
    return 1 if n == 1 else 2 if n in (2, 4) else 3


def _panel_axes(n: int, cols: int, panel_px: int) -> tuple[list[dict[str, Any]], int]:
    """Axis domains of n panels in a grid of `cols` columns (what make_subplots computes,
    without its per-call validation, which costs more than the heatmap for 10,000 nodes)."""
    rows = math.ceil(n / cols)
    gap_x = 0.06 if cols > 1 else 0.0
    title_px = 30
    height = rows * (panel_px + title_px) + 50
    width = (1 - (cols - 1) * gap_x) / cols
    out = []
    for index in range(n):
        r, c = divmod(index, cols)
        top = 1 - (r * (panel_px + title_px) + title_px) / (height - 50)
        bottom = top - panel_px / (height - 50)
        left = c * (width + gap_x)
        out.append({"x": [left, left + width], "y": [max(bottom, 0.0), top]})
    return out, height


@dataclass(frozen=True)
class Highlight:
    """Pods to mark on the heatmap (pods per leaf path), with how they are drawn: the first
    highlight as filled diamonds, another (side by side with Kueue) as open circles around them."""

    name: str  # the legend's label
    pods: Mapping[tuple[str, ...], int]
    colour: str = HIGHLIGHT
    symbol: str = "diamond"
    side: str = ""  # e.g. "kueue" or "engine", kept in the traces' meta


def topology_grid(q: TopologyQuery, grid: Grid, *, highlight: Mapping[tuple[str, ...], int] | None = None,
                  highlight_name: str = "", highlights: Iterable[Highlight] = ()) -> go.Figure:
    """The rack x node heatmap of every block in the scope, coloured by the metric, with
    NotReady, cordoned and tainted nodes marked, and (on a workload's page) its pods, or
    (`highlights`) the pods of several placements told apart by marker and colour."""
    marks = list(highlights)
    if highlight:
        marks.insert(0, Highlight(f"pods of {highlight_name}", highlight))
    return _topology_grid(q, grid, marks)


def _topology_grid(q: TopologyQuery, grid: Grid, marks: list[Highlight]) -> go.Figure:
    cap = q.capacity
    if not grid.panels:
        return go.Figure(layout=base_layout(height=120))
    level = grid.cell_level
    a = amounts(cap, level, q.resource, q.metric)
    drawn = np.unique(np.concatenate([p.cells[p.cells >= 0] for p in grid.panels]))
    hover = _cell_hover(cap, q, level, a, drawn.tolist())
    n = len(grid.panels)
    cols = _panel_columns(n)
    panel_rows = max(len(p.row_labels) for p in grid.panels)
    width_cells = max(p.cells.shape[1] for p in grid.panels)
    row_px = max(8, min(30, 360 // max(panel_rows, 1)))
    domains, height = _panel_axes(n, cols, panel_rows * row_px)
    flag_column = {NOT_READY: 0, CORDONED: 1, TAINTED: 2}
    counts = cap.flag_counts[level]
    wanted_cells = [_highlight_cells(cap, level, mark.pods) for mark in marks]
    traces: list[Any] = []
    markers: list[Any] = []
    shown_legend: set[str] = set()
    layout: dict[str, Any] = {"annotations": []}
    marker_px = max(6, min(12, row_px - 2))
    for index, panel in enumerate(grid.panels):
        suffix = "" if index == 0 else str(index + 1)
        xa, ya = f"x{suffix}", f"y{suffix}"
        layout[f"xaxis{suffix}"] = {
            "domain": domains[index]["x"], "anchor": ya, "showgrid": False, "zeroline": False, "ticks": "",
            # columns are positions in a row (1, 2, ...), whole numbers only; hover names the node
            "tickfont": {"size": 9}, "showticklabels": width_cells <= 48, "range": [0.5, width_cells + 0.5],
            "tickmode": "linear", "tick0": 1, "dtick": max(1, math.ceil(width_cells / 12))}
        layout[f"yaxis{suffix}"] = {
            "domain": domains[index]["y"], "anchor": xa, "autorange": "reversed", "showgrid": False,
            "zeroline": False, "ticks": "", "type": "category", "tickfont": {"size": 10 if panel_rows > 12 else 11}}
        layout["annotations"].append({
            "text": f"<b>{panel.title}</b>", "x": sum(domains[index]["x"]) / 2, "y": domains[index]["y"][1],
            "xref": "paper", "yref": "paper", "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 12}})
        cells = panel.cells
        present = cells >= 0
        safe = np.where(present, cells, 0)
        z = np.where(present, a.value[safe], np.nan).astype(np.float32)
        text = np.full(cells.shape, "", dtype=object)
        for i, j in zip(*np.nonzero(present), strict=True):
            text[i, j] = hover[int(cells[i, j])]
        traces.append(go.Heatmap(
            z=z, x=np.arange(1, cells.shape[1] + 1), y=panel.row_labels, text=text,
            hovertemplate="%{text}<extra></extra>", coloraxis="coloraxis", xgap=1, ygap=1, xaxis=xa, yaxis=ya,
            name=panel.title or cap.flavor,
            meta={"panel": label(panel.path), "rows": [label(p) for p in panel.row_paths], "drill": grid.drill}))
        for bit, (symbol, colour) in FLAG_MARKERS.items():
            ii, jj = np.nonzero(present & (counts[safe, flag_column[bit]] > 0))
            if not len(ii):
                continue
            name = FLAG_NAMES[bit]
            markers.append(go.Scatter(
                x=(jj + 1).tolist(), y=[panel.row_labels[i] for i in ii], xaxis=xa, yaxis=ya, mode="markers",
                name=name, legendgroup=name, showlegend=name not in shown_legend, hoverinfo="skip",
                marker={"symbol": symbol, "size": marker_px, "color": colour, "line": {"width": 1.5, "color": colour}},
                meta={"flag": name}))
            shown_legend.add(name)
        for number, (mark, wanted) in enumerate(zip(marks, wanted_cells, strict=True)):
            group = "highlight" if number == 0 else f"highlight{number + 1}"
            meta = {"highlight": mark.name.removeprefix("pods of "), **({"side": mark.side} if mark.side else {})}
            if len(wanted) > MAX_HIGHLIGHT_MARKERS:
                hit = present & np.isin(cells, list(wanted))
                if hit.any():
                    # thousands of marker symbols take the browser most of a second to lay out: a
                    # tint over the cells shows the same at that scale (hover stays the cell's own)
                    markers.append(go.Heatmap(
                        z=np.where(hit, 1.0, np.nan).astype(np.float32), x=np.arange(1, cells.shape[1] + 1),
                        y=panel.row_labels, xaxis=xa, yaxis=ya, colorscale=[[0, mark.colour], [1, mark.colour]],
                        zmin=0, zmax=1, showscale=False, opacity=0.4 / (number + 1), xgap=1, ygap=1,
                        hoverinfo="skip", name=mark.name, meta=meta))
            elif wanted:
                ii, jj = np.nonzero(present & np.isin(cells, list(wanted)))
                if len(ii):
                    size = max(7, min(13, row_px))
                    open_symbol = mark.symbol.endswith("-open")
                    markers.append(go.Scatter(
                        x=(jj + 1).tolist(), y=[panel.row_labels[i] for i in ii], xaxis=xa, yaxis=ya,
                        mode="markers", name=mark.name, legendgroup=group, showlegend=group not in shown_legend,
                        text=[str(wanted[int(cells[i, j])]) for i, j in zip(ii, jj, strict=True)],
                        hovertemplate=f"%{{text}} pod(s): {mark.name}<extra></extra>"
                        if mark.side else f"%{{text}} pod(s) of {meta['highlight']}<extra></extra>",
                        marker={"symbol": mark.symbol, "size": size + 6 if open_symbol else size,
                                "color": mark.colour,
                                "line": {"width": 3 if open_symbol else 1.5,
                                         "color": mark.colour if open_symbol else "#ffffff"}},
                        meta=meta))
                    shown_legend.add(group)
    what = "nodes" if level == cap.depth - 1 else f"{cap.levels[level]} domains"
    layout.update(base_layout(
        height=max(180, height), coloraxis=colour_axis(q, a.value), margin={"l": 70, "r": 20, "t": 40, "b": 20},
        plot_bgcolor="#e9ecef", showlegend=bool(shown_legend),
        legend={**LEGEND_ABOVE, "bgcolor": "rgba(255,255,255,0.8)"},
        meta={"cells": grid.cell_count(), "level": cap.levels[level], "what": what}))
    layout["margin"]["t"] = 40 if shown_legend else 20
    return go.Figure(data=traces + markers, layout=layout)


def _highlight_cells(cap: FlavorCapacity, level: int, pods: Mapping[tuple[str, ...], int]) -> dict[int, int]:
    """Pods per domain at `level` (leaves, or the racks they are in) from pods per leaf path."""
    out: dict[int, int] = {}
    tree = cap.tree
    for path, count in pods.items():
        leaf = tree.leaf_for_values(path)
        if leaf is None:
            continue
        index = tree.ancestor(cap.depth - 1, leaf, level)
        out[index] = out.get(index, 0) + count
    return out


# ---------------------------------------------------------------- the hierarchy


def hierarchy_levels(cap: FlavorCapacity, scope: tuple[str, ...]) -> int:
    """How many levels below the scope the hierarchy shows (at least one)."""
    total = 1
    shown = 0
    for level in range(len(scope), cap.depth):
        count = len(under(cap, scope, level))
        if shown and total + count > MAX_HIERARCHY_DOMAINS:
            break
        total += count
        shown += 1
    return shown


@dataclass
class _Row:
    """One level of the hierarchy figure: its domains side by side, each as wide as its nodes."""

    name: str
    position: int  # the row's y (0 at the top)
    ids: list[str] = field(default_factory=list)
    edges: list[int] = field(default_factory=lambda: [0])
    value: list[float | None] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    hover: list[str] = field(default_factory=list)

    def add(self, id_: str, width: int, value: float, text: str, hover: str) -> None:
        self.ids.append(id_)
        self.edges.append(self.edges[-1] + width)
        self.value.append(None if math.isnan(value) else round(float(value), 1))
        self.text.append(text)
        self.hover.append(hover)

    def traces(self) -> list[go.Heatmap]:
        """A one-row heatmap with a cell per domain (cell edges at the node offsets): far
        cheaper for the browser than a bar per domain. Domains without capacity are drawn by
        a grey row of their own under the coloured one."""
        common = dict(x=self.edges, y=[self.position], customdata=[self.ids], hovertext=[self.hover],
                      hovertemplate="%{hovertext}<extra></extra>", xgap=1, ygap=3, showscale=False,
                      meta={"hierarchy": True})
        named = any(self.text)
        out = [go.Heatmap(z=[self.value], coloraxis="coloraxis", text=[self.text] if named else None,
                          texttemplate="%{text}" if named else None, name=self.name, **common)]
        if any(v is None for v in self.value):
            grey = [1 if v is None else None for v in self.value]
            out.insert(0, go.Heatmap(z=[grey], colorscale=[[0, NO_CAPACITY], [1, NO_CAPACITY]], zmin=0, zmax=1,
                                     name=f"{self.name}: no capacity", **common))
        return out


def _scope_bar(q: TopologyQuery, metric: str) -> tuple[float, int, str]:
    """The scope's own colour value, node count and hover text."""
    cap, scope, unit = q.capacity, q.domain, q.unit
    if scope:
        level = len(scope) - 1
        index = cap.domain_index(scope)
        a = amounts(cap, level, q.resource, metric)
        return a.value[index], _node_counts(cap, level)[index], _cell_hover(cap, q, level, a, [index])[index]
    alloc = cap.allocatable[0][:, cap.column(q.resource)].sum()
    used = (cap.tas_usage[0] + cap.other_usage[0])[:, cap.column(q.resource)].sum()
    pct = 100 * used / alloc if alloc > 0 else float("nan")
    nodes = sum(len(g) for g in cap.tree.leaf_nodes)
    hover = f"<b>{cap.flavor}</b>  {nodes} nodes<br>{unit.resource}: {unit.show(used)} used of {unit.show(alloc)}"
    return (pct if metric == "used" else 100 - pct), nodes, hover


def _level_names(levels: Iterable[str]) -> list[str]:
    """Level labels without their prefix (`cloud.example.com/topology-rack` -> `topology-rack`),
    unless that makes two levels look alike."""
    short = [level.rsplit("/", 1)[-1] for level in levels]
    return short if len(set(short)) == len(short) else list(levels)


def label_can_fit(text: str, share: float) -> bool:
    """Whether a name fits a cell that takes `share` of the hierarchy's width on the widest page."""
    return share * HIERARCHY_PLOT_PX >= len(text) * LABEL_CHAR_PX + LABEL_PADDING_PX


def topology_hierarchy(q: TopologyQuery) -> go.Figure:
    """The block -> rack -> node hierarchy under the scope as an icicle: a row per level, each
    domain as wide as its node count, under its parent; colour is the metric as a share of
    capacity (comparable across levels). Drawn with cartesian heatmaps, so the page needs only
    Plotly's cartesian bundle."""
    cap = q.capacity
    scope = q.domain
    if cap.depth == 0 or cap.leaf_count == 0:
        return go.Figure(layout=base_layout(height=120))
    metric = "free" if q.metric != "used" else "used"
    names = _level_names(cap.levels)
    value, nodes, hover = _scope_bar(q, metric)
    top = scope[-1] if scope else cap.flavor
    scope_row = _Row(f"{names[len(scope) - 1]} {top}" if scope else f"flavor {top}", 0)
    scope_row.add(label(scope) or "/", nodes, value, top, hover)
    rows = [scope_row]
    for level in range(len(scope), len(scope) + hierarchy_levels(cap, scope)):
        a = amounts(cap, level, q.resource, metric)
        inside = under(cap, scope, level)
        # names where they can be read; hundreds of slivers only cost the browser text layout
        named = len(inside) <= MAX_HIERARCHY_LABELS
        texts = _cell_hover(cap, q, level, a, inside)
        counts = _node_counts(cap, level)
        row = _Row(names[level], len(rows))
        for i in inside:
            path = cap.tree.levels[level].values[i]
            shown = named and label_can_fit(path[-1], counts[i] / nodes)
            row.add(label(path), counts[i], a.value[i], path[-1] if shown else "", texts[i])
        rows.append(row)
    axis = colour_axis(TopologyQuery(q.flavor, q.resource, metric, scope, cap), np.array([]))
    fig = go.Figure([trace for row in rows for trace in row.traces()])
    fig.update_layout(**base_layout(
        height=70 + 48 * len(rows), coloraxis=axis,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        meta={"domains": sum(len(row.ids) for row in rows), "scope": label(scope)},
        xaxis={"visible": False, "range": [0, nodes], "fixedrange": True},
        # numeric rows named by their ticks (heatmaps on a category axis with a category
        # order fail to draw in plotly.js 4.1)
        yaxis={"tickmode": "array", "tickvals": list(range(len(rows))), "ticktext": [row.name for row in rows],
               "range": [len(rows) - 0.5, -0.5], "fixedrange": True, "showgrid": False, "zeroline": False,
               "ticks": "", "automargin": True},
    ))
    return fig


# ---------------------------------------------------------------- history


def _event_hover(e: Mapping[str, Any]) -> str:
    where = " · ".join(x for x in (f"node {e['node']}" if e.get("node") else "",
                                   f"domain {e['domain']}" if e.get("domain") else "",
                                   f"ClusterQueue {e['cluster_queue']}" if e.get("cluster_queue") else "") if x)
    message = (e.get("message") or "").replace("<", "&lt;")
    if len(message) > 240:
        message = message[:240] + "…"
    lines = [f"<b>{e['kind']}</b>  {e['workload_key']}", e["at"].strftime("%Y-%m-%d %H:%M:%S UTC")]
    if where:
        lines.append(where)
    if message:
        lines.extend(_wrap(message))
    return "<br>".join(lines)


def _wrap(text: str, width: int = 80) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return lines[:4]


def history_timeline(events: Iterable[Mapping[str, Any]], *, height: int = 320) -> go.Figure:
    """One marker per event: time across, kind down (in the order of a workload's life)."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for e in events:
        by_kind.setdefault(e["kind"], []).append(e)
    kinds = [k for k in EVENT_STYLE if k in by_kind] + sorted(k for k in by_kind if k not in EVENT_STYLE)
    fig = go.Figure()
    for kind in kinds:
        colour, symbol = EVENT_STYLE.get(kind, (OKABE_ITO["grey"], "circle"))
        rows = by_kind[kind]
        fig.add_trace(go.Scatter(
            x=[e["at"] for e in rows], y=[kind] * len(rows), mode="markers", name=f"{kind} ({len(rows)})",
            hovertext=[_event_hover(e) for e in rows], hovertemplate="%{hovertext}<extra></extra>",
            customdata=[e["workload_key"] for e in rows],
            marker={"symbol": symbol, "size": 10, "color": colour, "opacity": 0.85,
                    "line": {"width": 1, "color": colour}},
        ))
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(kinds)), showgrid=True,
                     gridcolor="#eef1f4")
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eef1f4", title_text="time (UTC)")
    fig.update_layout(**base_layout(height=max(height, 80 + 34 * len(kinds)), showlegend=True,
                                    margin={"l": 150, "r": 20, "t": 30, "b": 40}, legend=LEGEND_ABOVE))
    return fig


# ---------------------------------------------------------------- why pending, quota


def short_level(level: str) -> str:
    return level.rsplit("/", 1)[-1]


def why_pending_figure(pod_set: Mapping[str, Any]) -> go.Figure | None:
    """Needed against what the best domain of every level can hold, for one PodSet."""
    levels = pod_set.get("levels") or []
    if not levels:
        return None
    names = [short_level(fit["level"]) for fit in levels]
    unit = levels[0]["unit"] + "s"
    needed = [fit["needed"] for fit in levels]
    best = [fit["bestFits"] for fit in levels]
    best_hover = [f"best {short_level(fit['level'])}: {'/'.join(fit['bestDomain']) or '-'} holds {fit['bestFits']} "
                  f"{unit}; {fit['domainsThatFit']} of {fit['domains']} domains can take all {fit['needed']}"
                  for fit in levels]
    fig = go.Figure([
        go.Bar(name=f"needed ({unit})", x=names, y=needed, marker={"color": OKABE_ITO["grey"]}, text=needed,
               textposition="outside", hovertemplate="%{y} " + unit + " needed<extra></extra>"),
        go.Bar(name=f"best domain can hold ({unit})", x=names, y=best, text=best, textposition="outside",
               marker={"color": OKABE_ITO["blue"], "pattern": {"shape": "/"}}, hovertext=best_hover,
               hovertemplate="%{hovertext}<extra></extra>"),
    ])
    requested = pod_set.get("level")
    if requested and short_level(requested) in names:
        fig.add_annotation(x=short_level(requested), y=max(max(needed), max(best)) * 1.15 + 1,
                           text=f"{pod_set.get('mode')} level", showarrow=False, font={"size": 11})
    fig.update_layout(**base_layout(
        barmode="group", height=240, margin={"l": 50, "r": 10, "t": 30, "b": 40},
        yaxis={"title": {"text": unit}, "rangemode": "tozero", "gridcolor": "#eef1f4"},
        xaxis={"title": {"text": "topology level"}},
        legend={"orientation": "h", "y": 1.15, "x": 0}))
    return fig


def quota_figure(groups: list[Mapping[str, Any]] | None) -> go.Figure | None:
    """Usage of every (flavor, resource) of a ClusterQueue as a share of its nominal quota."""
    rows = []
    for group in groups or []:
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                nominal = stored_value(res["name"], res["nominalQuota"]) or 0
                used = stored_value(res["name"], res.get("usage")) or 0
                rows.append((f"{flavor['name']} · {res['name']}", res["name"], used, nominal))
    if not rows:
        return None
    labels_ = [r[0] for r in rows]
    pct = [100 * used / nominal if nominal > 0 else 0.0 for _, _, used, nominal in rows]
    text = [f"{unit_of(res).show(used)} of {unit_of(res).show(nominal)}"
            for _, res, used, nominal in rows]
    fig = go.Figure(go.Bar(
        x=pct, y=labels_, orientation="h", text=text, textposition="inside", insidetextanchor="start",
        textfont={"color": "#1d232a"}, marker={"color": OKABE_ITO["sky"]},
        hovertemplate="%{y}: %{text} (%{x:.0f} % of nominal quota)<extra></extra>"))
    fig.update_layout(**base_layout(
        height=70 + 34 * len(rows), margin={"l": 200, "r": 20, "t": 10, "b": 40},
        xaxis={"title": {"text": "usage, % of nominal quota"}, "range": [0, max(100, *pct)], "gridcolor": "#eef1f4"},
        yaxis={"autorange": "reversed"}))
    return fig



# ---------------------------------------------------------------- predicted start times

QUEUE_COLOURS = [OKABE_ITO[c] for c in ("blue", "orange", "green", "purple", "sky", "vermillion", "yellow", "black")]
RANGE_COLOUR = "rgba(153, 153, 153, 0.35)"  # earliest to latest: lighter than any bar


GANTT_LABEL_CHARS = 40


def middle_ellipsis(text: str, most: int) -> str:
    """`text` within `most` characters: its start and end kept, its middle an ellipsis."""
    if len(text) <= most:
        return text
    head = (most - 1) // 2
    return f"{text[:head]}…{text[len(text) - (most - 1 - head):]}"


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000.0


def start_timeline(rows: list[Mapping[str, Any]], *, group: str = "local_queue") -> go.Figure | None:
    """Predicted admissions as a Gantt chart: one row per workload (soonest at the top), a bar
    from its predicted start to its expected end coloured by its `group` (LocalQueue), and
    behind it, lighter, the range from its earliest to its latest predicted start (to the
    chart's end when the play with high runtimes did not admit it)."""
    if not rows:
        return None
    keys = [r["key"] for r in rows]
    last = max(max(r["end"], r["latest"] or r["start"]) for r in rows)
    fig = go.Figure()
    ranges = [r for r in rows if r["earliest"] is not None]
    if ranges:
        fig.add_trace(go.Bar(
            y=[r["key"] for r in ranges], base=[r["earliest"] for r in ranges], orientation="h",
            x=[_ms((r["latest"] or last) - r["earliest"]) for r in ranges], name="earliest to latest start",
            marker={"color": RANGE_COLOUR, "line": {"width": 0}}, width=0.8,
            hovertext=[f"<b>{r['key']}</b><br>starts between {r['earliest']:%H:%M} and "
                       + (f"{r['latest']:%H:%M}" if r["latest"] else "beyond the horizon") for r in ranges],
            hovertemplate="%{hovertext}<extra></extra>"))
    groups = sorted({r[group] for r in rows})
    for i, name in enumerate(groups):
        mine = [r for r in rows if r[group] == name]
        fig.add_trace(go.Bar(
            y=[r["key"] for r in mine], base=[r["start"] for r in mine], orientation="h",
            x=[max(_ms(r["end"] - r["start"]), 1000.0) for r in mine], name=name or "-",
            marker={"color": QUEUE_COLOURS[i % len(QUEUE_COLOURS)]}, width=0.45,
            hovertext=[f"<b>{r['key']}</b><br>expected to start around {r['start']:%Y-%m-%d %H:%M} UTC"
                       f"<br>and to end around {r['end']:%H:%M} (runtime from {r['source']})" for r in mine],
            hovertemplate="%{hovertext}<extra></extra>"))
    estimated = rows[0]["estimated_at"]
    # a label is the workload's key, its middle left out when long (the bar's hover has it whole)
    fig.update_yaxes(categoryorder="array", categoryarray=keys, autorange="reversed", showgrid=False,
                     tickvals=keys, ticktext=[middle_ellipsis(k, GANTT_LABEL_CHARS) for k in keys], automargin=True)
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eef1f4", title_text="time (UTC)")
    fig.update_layout(**base_layout(
        height=110 + 26 * len(keys), barmode="overlay", showlegend=True,
        # above the bars: below them, a legend's place depends on the chart's height and can
        # cover the time axis
        margin={"l": 10, "r": 20, "t": 30, "b": 40},
        legend=LEGEND_ABOVE,
        shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": estimated, "x1": estimated, "y0": 0, "y1": 1,
                 "line": {"color": OKABE_ITO["black"], "width": 1, "dash": "dot"}}]))
    return fig


# ---------------------------------------------------------------- side by side with Kueue

# categories from agreement to the deepest disagreement, each with a colour
COMPARISON_STYLE: dict[str, str] = {
    "SameDomains": OKABE_ITO["green"],
    "SameLevelOtherDomains": OKABE_ITO["sky"],
    "DifferentLevel": OKABE_ITO["orange"],
    "EngineWouldNotAdmit": OKABE_ITO["purple"],
    "NoCapacityForKueue": OKABE_ITO["vermillion"],
}
KUEUE_MARK = (OKABE_ITO["vermillion"], "diamond")
BUCKET_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
ENGINE_MARK = (OKABE_ITO["blue"], "circle-open")


def agreement_figure(buckets: list[Mapping[str, Any]], bucket: str) -> go.Figure:
    """Admissions compared per time bucket, stacked by category, and the agreement rate over
    them as a line on its own axis (0-100 %)."""
    starts = [b["start"] for b in buckets]
    seconds = BUCKET_SECONDS.get(bucket, 3600)
    # bars as wide as most of their bucket (a date axis counts in milliseconds), each starting
    # at its bucket's start; a range of a few buckets at least, so one bucket is not a sliver
    width = [seconds * 800] * len(starts)
    fig = go.Figure()
    for category, colour in COMPARISON_STYLE.items():
        counts = [b["categories"].get(category, 0) for b in buckets]
        if not any(counts):
            continue
        fig.add_trace(go.Bar(x=starts, y=counts, name=category, marker={"color": colour}, width=width,
                             offset=0, hovertemplate=f"%{{y}} {category}<extra></extra>",
                             meta={"category": category}))
    rates = [100 * b["agreementRate"] if b["agreementRate"] is not None else None for b in buckets]
    middles = [start + timedelta(seconds=seconds * 0.4) for start in starts]
    span: dict[str, Any] = {}
    if starts:
        low, high = min(starts), max(starts) + timedelta(seconds=seconds)
        pad = max(timedelta(seconds=seconds), (high - low) / 20)
        span = {"range": [low - pad, high + pad]}
    fig.add_trace(go.Scatter(x=middles, y=rates, name="agreement rate", mode="lines+markers", yaxis="y2",
                             line={"color": OKABE_ITO["black"], "width": 2}, marker={"size": 6},
                             hovertemplate="%{y:.0f} % agree<extra></extra>", meta={"rate": True}))
    fig.update_layout(**base_layout(
        barmode="stack", height=300, margin={"l": 60, "r": 60, "t": 30, "b": 40}, showlegend=True,
        legend=LEGEND_ABOVE,
        xaxis={"type": "date", "title": {"text": f"admissions seen, per {bucket} (UTC)"}, "gridcolor": "#eef1f4",
               **span},
        yaxis={"title": {"text": "admissions compared"}, "rangemode": "tozero", "gridcolor": "#eef1f4"},
        yaxis2={"title": {"text": "agreement rate, %"}, "overlaying": "y", "side": "right", "range": [0, 105],
                "tickvals": [0, 20, 40, 60, 80, 100], "showgrid": False}))
    return fig


def warm_up() -> None:
    """Load what the first figure of a process would otherwise load while a user waits:
    plotly's trace and layout validators (about half a second). Called by the WSGI entry
    point, so a server pays it at start, not on its first dashboard page."""
    fig = go.Figure([go.Heatmap(z=[[0.0]], x=[0, 1], y=[0]), go.Bar(x=[0], y=[0]), go.Scatter(x=[0], y=[0])])
    fig.update_layout(**base_layout(coloraxis={"colorscale": COLORSCALE}))
    figure_json(fig)
