"""The dashboard's Plotly figures, built from the fixture cluster: what they draw, not how."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from django.http import QueryDict

from tasweb.dashboard import figures, selectors
from tests.dashboard.conftest import NODES, NOT_READY_NODE, TOO_BIG

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def query(text: str = "") -> selectors.TopologyQuery:
    return selectors.topology_query(QueryDict(text))


def heatmaps(fig) -> list:
    return [t for t in fig.data if t.type == "heatmap"]


def cells_drawn(fig) -> int:
    return sum(int(np.isfinite(np.asarray(t.z, dtype=float)).sum()) for t in heatmaps(fig))


def test_grid_draws_every_node_once_per_block(cluster):
    q = query()
    grid = figures.grid_layout(q.capacity, q.domain)
    assert [p.title for p in grid.panels] == ["b1", "b2"]
    assert [p.cells.shape for p in grid.panels] == [(2, 3), (2, 3)]
    assert grid.drill == "panel" and grid.cell_count() == NODES
    fig = figures.topology_grid(q, grid)
    assert cells_drawn(fig) == NODES
    assert fig.layout.coloraxis.colorscale[0][1] == "#440154"  # Viridis
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 100)
    # one marker per NotReady, cordoned and tainted node
    marks = {t.name: len(t.x) for t in fig.data if t.type == "scatter"}
    assert marks == {"NotReady": 1, "cordoned (unschedulable)": 1, "tainted": 1}
    hover = [text for t in heatmaps(fig) for row in t.text for text in row if NOT_READY_NODE in text]
    assert len(hover) == 1 and "NotReady" in hover[0] and "nvidia.com/gpu" in hover[0]
    # the figure travels as JSON that is safe inside <script>
    text = figures.figure_json(fig)
    assert "</" not in text and json.loads(text)["layout"]["meta"]["cells"] == NODES


def test_grid_colours_the_metric(cluster):
    q = query("metric=used")
    a = figures.amounts(q.capacity, 2, q.resource, q.metric)
    full = q.capacity.tree.node_to_leaf["b1-r1-n1"]  # research/train-rack: 8 of 8 GPUs
    assert a.value[full] == 100.0
    free = figures.amounts(q.capacity, 2, q.resource, "free_units")
    assert free.value[full] == 0.0 and free.value[q.capacity.tree.node_to_leaf["b2-r1-n2"]] == 8.0


def test_drilling_into_a_block_and_a_rack(cluster):
    q = query("domain=b2")
    grid = figures.grid_layout(q.capacity, q.domain)
    assert [p.title for p in grid.panels] == ["b2"] and grid.drill == "row"
    assert [list(p.row_labels) for p in grid.panels] == [["r1", "r2"]]
    q = query("domain=b2/r1")
    grid = figures.grid_layout(q.capacity, q.domain)
    assert len(grid.panels) == 1 and grid.cell_count() == 3


def test_too_many_blocks_draw_racks_until_drilled(cluster, monkeypatch):
    monkeypatch.setattr(figures, "MAX_PANELS", 1)
    q = query()
    grid = figures.grid_layout(q.capacity, q.domain)
    assert grid.cell_level == 1 and grid.cell_count() == 4  # racks, a row per block
    assert grid.panels[0].row_labels == ["b1", "b2"]
    assert figures.grid_layout(q.capacity, ("b1",)).cell_level == 2


def hierarchy_bars(fig) -> list[tuple[str, str, int, int]]:
    """(domain, level row, start, width) of every domain of the hierarchy figure, in drawing
    order (a domain without capacity is also in its row's grey trace: counted once)."""
    out = {}
    for t in fig.data:
        edges = list(t.x)
        for i, domain in enumerate(t.customdata[0]):
            out.setdefault(domain, (domain, fig.layout.yaxis.ticktext[t.y[0]], edges[i], edges[i + 1] - edges[i]))
    return list(out.values())


def test_hierarchy_shows_the_domains_under_the_scope_nested_in_their_parents(cluster):
    fig = figures.topology_hierarchy(query())
    bars = {d: (y, b, x) for d, y, b, x in hierarchy_bars(fig)}
    assert len(bars) == 1 + 2 + 4 + NODES
    assert bars["/"][1:] == (0, NODES)
    # every child lies inside its parent, and the children of a parent tile it exactly
    for domain, (_, start, width) in bars.items():
        if domain == "/":
            continue
        parent = domain.rpartition("/")[0] or "/"
        p_start, p_width = bars[parent][1:]
        assert p_start <= start and start + width <= p_start + p_width
    for parent, (_, p_start, p_width) in bars.items():
        children = sorted((b, x) for d, (_, b, x) in bars.items() if (d.rpartition("/")[0] or "/") == parent
                          and d != "/")
        if children:
            assert children[0][0] == p_start and sum(x for _, x in children) == p_width
    assert [y for d, y, *_ in hierarchy_bars(fig)][:2] == ["flavor tas-gpu", "topology-block"]
    fig = figures.topology_hierarchy(query("domain=b1"))
    assert [d for d, *_ in hierarchy_bars(fig)][:3] == ["b1", "b1/r1", "b1/r2"]
    assert all(c is None or 0 <= c <= 100 for t in fig.data if t.coloraxis for c in t.z[0])


def test_hierarchy_levels_stop_before_too_many_domains(cluster, monkeypatch):
    monkeypatch.setattr(figures, "MAX_HIERARCHY_DOMAINS", 8)
    q = query()
    assert figures.hierarchy_levels(q.capacity, ()) == 2  # blocks and racks, not the 12 nodes
    assert len(hierarchy_bars(figures.topology_hierarchy(q))) == 1 + 2 + 4


def test_placement_highlights_the_workloads_nodes(cluster):
    q = query()
    placement = selectors.workload_placement(workload=selectors.workload_or_404("research", "train-block"))
    fig = figures.topology_grid(q, figures.grid_layout(q.capacity, ()), highlight=placement.pods_per_path,
                                highlight_name="research/train-block")
    [marks] = [t for t in fig.data if t.meta and "highlight" in t.meta]
    assert len(marks.x) == len(cluster.nodes_of("research/train-block"))
    assert sum(int(n) for n in marks.text) == 4


def test_a_workload_on_many_nodes_is_shown_as_a_tint(cluster, monkeypatch):
    monkeypatch.setattr(figures, "MAX_HIGHLIGHT_MARKERS", 1)
    q = query()
    placement = selectors.workload_placement(workload=selectors.workload_or_404("research", "train-block"))
    fig = figures.topology_grid(q, figures.grid_layout(q.capacity, ()), highlight=placement.pods_per_path,
                                highlight_name="research/train-block")
    tints = [t for t in fig.data if t.meta and "highlight" in t.meta]
    assert tints and all(t.type == "heatmap" for t in tints)
    tinted = sum(int(np.isfinite(np.asarray(t.z, dtype=float)).sum()) for t in tints)
    assert tinted == len(cluster.nodes_of("research/train-block"))
    assert not [t for t in fig.data if t.type == "scatter" and t.meta and "highlight" in t.meta]


def test_history_timeline_has_a_trace_per_kind(cluster):
    rows = [{"kind": e.kind, "at": e.at, "workload_key": e.workload_key, "node": e.node, "domain": e.domain,
             "cluster_queue": e.cluster_queue, "message": e.message} for e in selectors.history_events(QueryDict(""))]
    fig = figures.history_timeline(rows)
    assert sum(len(t.x) for t in fig.data) == cluster.events
    names = [t.name.split(" (")[0] for t in fig.data]
    assert names == ["Pending", "Admitted", "NodeMarkedUnhealthy", "Evicted", "Requeued"]  # a workload's life
    assert len({t.marker.symbol for t in fig.data}) == len(fig.data)  # told apart without colour


def test_why_pending_figure_compares_needed_with_best_per_level(cluster):
    namespace, name = TOO_BIG.split("/")
    why = selectors.why_pending(workload=selectors.workload_or_404(namespace, name))
    assert why["pending"] is True
    [pod_set] = why["explanation"]["podSets"]
    fig = figures.why_pending_figure(pod_set)
    needed, best = fig.data
    assert list(needed.x) == ["topology-block", "topology-rack", "hostname"]
    assert list(needed.y) == [4, 4, 4]
    # b2 is free but r1 has a tainted node, r2 a cordoned and a NotReady one: 3 pods in the block, 2 in a rack
    assert list(best.y) == [3, 2, 1]
    assert figures.why_pending_figure({"levels": []}) is None


def test_quota_figure_shows_usage_against_nominal(cluster):
    [card] = selectors.queue_cards()
    fig = figures.quota_figure(card.quota)
    bars = fig.data[0]
    gpu = list(bars.y).index("tas-gpu · nvidia.com/gpu")
    assert math.isclose(bars.x[gpu], 100 * 42 / 96)
    assert bars.text[gpu] == "42 nvidia.com/gpu of 96 nvidia.com/gpu"
    assert figures.quota_figure(None) is None
