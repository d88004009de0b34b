"""The dashboard's topology page and the API's capacity tree at scale: how long the web
process takes to make them after each scheduling pass, on the cluster
`bench_scheduler_state.py` seeds (50,000 nodes, 100,000 workloads, 30,000 of them running).

    .venv/bin/python benchmarks/bench_topology_page.py [--seeded NAME] [--rounds 4] [--finish 100]
                                                       [--database tas_bench_topology] [--json FILE]
                                                       [--profile-node]

With `--seeded NAME` it starts from the kept seeded copy `bench_scheduler_state.py --seeded
NAME` made (seeding it, and keeping it, if there is none with these settings). A scheduling
pass runs first, as the service's scheduler would have. Then, through Django's test client
(the view, its template and its Plotly figures; not the HTTP server):

1. the first page of the process: its display of the flavor is made from scratch (the web's
   view keeper makes it before any visitor comes, `tasweb.dashboard.selectors.display_warm`),
   and the first tree;
2. `--rounds` times: `--finish` running workloads finish, a pass admits others in their
   place, the view follows the mirror, and the page is asked for twice: once as the service
   serves it (the display's tree and usage kept from the version before, brought up to date),
   and once with what was kept dropped (everything counted afresh, as before they were kept);
   then the API's tree of the flavor's blocks and racks (`/api/v1/flavors/NAME/tree/?depth=2`)
   the same two ways (the workloads in each domain kept, or listed afresh);
3. a node goes NotReady, a pass: the page with the display's tree and usage kept (only the
   nodes' conditions are read again), and with nothing kept; the API's tree;
4. a node holding pods is deleted, a pass: the page with the display's tree made from the
   kept one and its usage moved onto it, and with nothing kept; the API's tree.

`--profile-node` prints a cProfile of the page after the node went NotReady (top 30 by
cumulative time). At the end, after one more pass, the kept display and tree are compared with those made on a
view built afresh from the database: every figure of them must be the same.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler_state import (
    NOW,
    PASS_STEP,
    BenchSettings,
    add_seeded_arguments,
    finish_workloads,
    seeded_database,
    set_nodes_ready,
)
from benchdb import python_speed_probe

TARGET_SECONDS = 1.0  # a page after a pass, as the service serves it


def capacity_fields(cap) -> dict:
    """Every figure of a display, arrays as lists (as tests/dashboard compares them)."""
    out = {name: getattr(cap, name) for name in ("flavor", "topology", "levels", "resources", "leaf_taints",
                                                 "workloads", "nodes_without_levels")}
    for name in ("allocatable", "tas_usage", "other_usage", "flag_counts"):
        out[name] = [m.tolist() for m in getattr(cap, name)]
    out["leaf_flags"] = cap.leaf_flags.tolist()
    out["tree"] = [(level.key, level.values) for level in cap.tree.levels]
    return out


class Reader:
    """The topology page and the tree of one flavor, asked for through Django's test client
    as a signed-in user, timed."""

    def __init__(self, flavor: str) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        self.flavor = flavor
        self.client = Client()
        user, _ = get_user_model().objects.get_or_create(username="bench-topology", defaults={"is_superuser": True,
                                                                                                "is_staff": True})
        self.client.force_login(user)

    def timed(self, path: str, params: dict[str, str]) -> float:
        started = time.perf_counter()
        response = self.client.get(path, params)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}")
        return elapsed

    def page(self) -> float:
        return self.timed("/topology/", {"flavor": self.flavor})

    def tree(self) -> float:
        return self.timed(f"/api/v1/flavors/{self.flavor}/tree/", {"depth": "2"})


def forget(view) -> None:
    """Drop what the view keeps across versions and the answers made for this one."""
    from tasweb.dashboard import views

    with view.lock:
        view.memo.clear()
        view.kept.clear()
    views.rendered.bodies.clear()  # pages kept whole per version


def measure(finishing: list[tuple[str, str]], *, rounds: int, finish: int, profile_node: bool = False
            ) -> dict[str, Any]:
    """The first page and tree, then `rounds` of: `finish` of `finishing` finish, a pass, the
    page and tree kept and afresh; and whether what was kept equals a view built afresh."""
    from tasweb.api import selectors as api_selectors
    from tasweb.api import state
    from tasweb.dashboard import selectors
    from tasweb.scheduling.services import scheduling_pass_run

    scheduling_pass_run(now=NOW)
    view = state.engine_view()
    reader = Reader(selectors.tas_flavors()[0])
    flavor = reader.flavor
    first, first_tree = reader.page(), reader.tree()
    print(f"  first page of the process (the display made from scratch): {first:.2f} s; first tree (depth 2) "
          f"{first_tree:.2f} s")
    kept, afresh, tree_kept, tree_afresh, admitted = [], [], [], [], []
    for round_ in range(rounds):
        now = NOW + PASS_STEP * (round_ + 1)
        finish_workloads(finishing[round_ * finish:(round_ + 1) * finish], now)
        admitted.append(scheduling_pass_run(now=now).admitted)
        view = state.engine_view()
        tree_kept.append(reader.tree())
        kept.append(reader.page())
        forget(view)
        tree_afresh.append(reader.tree())
        afresh.append(reader.page())
        print(f"  after a pass that admitted {admitted[-1]}: the page {kept[-1]:.2f} s with the display kept, "
              f"{afresh[-1]:.2f} s counted afresh; the tree (depth 2) {tree_kept[-1]:.2f} s kept, "
              f"{tree_afresh[-1]:.2f} s afresh")
    # a node goes NotReady: the engine's snapshot of the flavor is made afresh, and so is the
    # display's frame, on the same tree (its usage kept); then with nothing kept
    from tasweb.cluster.models import Node

    node = Node.objects.order_by("name").values_list("name", flat=True).first()
    set_nodes_ready([node], False, NOW + PASS_STEP * rounds)
    scheduling_pass_run(now=NOW + PASS_STEP * rounds)
    view = state.engine_view()
    profile = cProfile.Profile() if profile_node else None
    if profile is not None:
        profile.enable()
    node_kept = reader.page()
    if profile is not None:
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(60)
    node_tree = reader.tree()
    forget(view)
    node_afresh = reader.page()
    reader.tree()  # what the next version keeps, made again
    print(f"  after a node went NotReady and a pass: the page {node_kept:.2f} s with the tree and usage kept, "
          f"{node_afresh:.2f} s counted afresh; the tree (depth 2) {node_tree:.2f} s")
    # a node holding pods is deleted: the display's tree is made from the kept one and the
    # usage moved onto it (the engine's snapshot too); then with nothing kept
    from tasweb.scheduling.models import AssignmentDomain

    held = AssignmentDomain.objects.order_by("node").values_list("node", flat=True).first()
    Node.objects.filter(name=held).delete()
    scheduling_pass_run(now=NOW + PASS_STEP * rounds)
    view = state.engine_view()
    deleted_kept, deleted_tree = reader.page(), reader.tree()
    forget(view)
    deleted_afresh = reader.page()
    print(f"  after a node holding pods was deleted and a pass: the page {deleted_kept:.2f} s with the display "
          f"moved onto the new tree, {deleted_afresh:.2f} s counted afresh; the tree (depth 2) {deleted_tree:.2f} s")
    # one more version, followed, read both ways against a view built afresh
    finish_workloads(finishing[rounds * finish:(rounds + 1) * finish], NOW + PASS_STEP * (rounds + 1))
    scheduling_pass_run(now=NOW + PASS_STEP * (rounds + 1))
    view = state.engine_view()
    served = capacity_fields(selectors.flavor_capacity(flavor=flavor))
    fresh_view = state.build_view(state.mirror_version())
    same_display = served == capacity_fields(selectors._flavor_capacity(fresh_view, flavor))
    print(f"  the kept display equals one made on a view built afresh: {'yes' if same_display else 'NO'}")
    with view.lock:
        same_tree = api_selectors._tree(view, flavor, 2) == api_selectors._tree(fresh_view, flavor, 2)
    print(f"  the tree made with the kept workloads equals one made on a view built afresh: "
          f"{'yes' if same_tree else 'NO'}")
    return {"flavor": flavor, "first_s": first, "first_tree_s": first_tree, "kept_s": kept, "afresh_s": afresh,
            "tree_kept_s": tree_kept, "tree_afresh_s": tree_afresh, "admitted": admitted,
            "node_not_ready_kept_s": node_kept, "node_not_ready_afresh_s": node_afresh,
            "node_not_ready_tree_s": node_tree,
            "node_deleted_kept_s": deleted_kept, "node_deleted_afresh_s": deleted_afresh,
            "node_deleted_tree_s": deleted_tree,
            "kept_in_view": sorted(str(key) for key in view.kept), "same_as_fresh": same_display and same_tree}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_seeded_arguments(ap, "tas_bench_topology")
    ap.add_argument("--rounds", type=int, default=4, help="passes, each followed by the page")
    ap.add_argument("--finish", type=int, default=100, help="running workloads that finish before each pass")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    ap.add_argument("--profile-node", action="store_true", help="cProfile of the page after a node went NotReady")
    args = ap.parse_args()
    settings = BenchSettings().check()
    if args.rounds < 1 or not 1 <= args.finish * (args.rounds + 1) <= settings.admit:
        raise SystemExit(f"need --rounds >= 1 and 1 <= --finish x (--rounds + 1) <= {settings.admit}")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    with seeded_database(args.database, args.seeded, settings) as info:
        probe = python_speed_probe()
        print(f"topology page, {info.counts['nodes']} nodes, {info.counts['workloads']} workloads:")
        figures = measure(info.finishing, rounds=args.rounds, finish=args.finish,
                          profile_node=args.profile_node)
        kept, afresh = statistics.median(figures["kept_s"]), statistics.median(figures["afresh_s"])
        print(f"  page after a pass (median of {args.rounds}): {kept:.2f} s kept, {afresh:.2f} s afresh   "
              f"target <= {TARGET_SECONDS:.0f} s   {'PASS' if kept <= TARGET_SECONDS else 'MISS'}")
        print(f"  tree (depth 2) after a pass (median of {args.rounds}): "
              f"{statistics.median(figures['tree_kept_s']):.2f} s kept, "
              f"{statistics.median(figures['tree_afresh_s']):.2f} s afresh")
        print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe:.3f} s")
        if args.json:
            Path(args.json).write_text(json.dumps({**figures, "python_probe_s": probe}, indent=2))
            print(f"figures written to {args.json}")
        if not figures["same_as_fresh"]:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
