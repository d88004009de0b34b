"""Capacity of every domain of a TAS flavor: what the dashboard's heatmap and the API's
topology tree show. Leaf figures come from the snapshot; parents sum their children."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.snapshot import TASFlavorSnapshot


@dataclass(slots=True)
class LevelTotals:
    """One level's domains (in the tree's order): node counts and, per resource column of the
    snapshot, allocatable, TAS usage and non-TAS usage (rows: domains)."""

    nodes: np.ndarray
    allocatable: np.ndarray
    tas_usage: np.ndarray
    non_tas_usage: np.ndarray


def level_totals(snap: TASFlavorSnapshot) -> list[LevelTotals]:
    """Totals of every level, from the roots down; parents sum their children."""
    tree = snap.tree
    if tree.depth == 0:
        return []
    non_tas = snap.non_tas_usage
    nodes = np.array([len(g) for g in tree.leaf_nodes], dtype=np.int64)
    per_level: list[tuple[np.ndarray, ...]] = [()] * tree.depth
    per_level[-1] = (nodes, snap.free + non_tas, snap.tas_usage, non_tas)
    for lvl in range(tree.depth - 2, -1, -1):
        starts = tree.levels[lvl].child_start[:-1]
        per_level[lvl] = tuple(np.add.reduceat(a, starts, axis=0) for a in per_level[lvl + 1])
    return [LevelTotals(*arrays) for arrays in per_level]
