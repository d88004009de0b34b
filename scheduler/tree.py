"""The immutable topology tree of one ResourceFlavor: domains, parents, children, values.

Built once from the nodes that the flavor selects and reused by every snapshot until the
node set changes. Domains are stored level by level; within a level the children of one
parent are contiguous, so per-level aggregations are single `reduceat` calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.model import Node


def domain_id(values: Sequence[str]) -> str:
    """Kueue's TopologyDomainID: the level values joined by commas."""
    return ",".join(values)


def carries_labels(labels: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    """The node carries every one of a flavor's nodeLabels."""
    return all(labels.get(k) == v for k, v in node_labels.items())


def node_matches_flavor(labels: Mapping[str, str], node_labels: Mapping[str, str], levels: Sequence[str]) -> bool:
    """The node carries the flavor's nodeLabels and a label for every topology level."""
    return carries_labels(labels, node_labels) and all(lvl in labels for lvl in levels)


@dataclass(slots=True)
class Level:
    """One topology level: its domains' values, Kueue IDs and links to the level above."""

    key: str
    values: list[tuple[str, ...]]  # full path from the root, one value per level so far
    ids: list[str]
    parent: np.ndarray  # index of each domain's parent in the level above (-1 for roots)
    child_start: np.ndarray  # children of domain i are [child_start[i], child_start[i+1]) one level below
    rank: np.ndarray  # lexicographic rank of `values` within the level, the final tie-break
    index_by_id: dict[str, int]

    def __len__(self) -> int:
        return len(self.values)

    def children(self, i: int) -> range:
        return range(int(self.child_start[i]), int(self.child_start[i + 1]))


_DIGITS = re.compile(r"(\d+)")


def _natural_key(value: str) -> tuple:
    return tuple((0, int(part), "") if part.isdecimal() else (1, 0, part) for part in _DIGITS.split(value) if part)


def natural_path_order(path: tuple[str, ...]) -> tuple:
    """Sort key of a path of values with numbers in them compared as numbers (b2 before b10)."""
    return tuple(_natural_key(value) for value in path)


def subtree_shape(children_of: Sequence[Sequence[int]], d: int) -> tuple[list[int], list[list[int]]]:
    """`d`'s subtree under `children_of` in preorder, and each domain's children as positions in it."""
    order: list[int] = []
    stack = [d]
    while stack:
        x = stack.pop()
        order.append(x)
        stack.extend(reversed(children_of[x]))
    position = {x: i for i, x in enumerate(order)}
    return order, [[position[ch] for ch in children_of[x]] for x in order]


class TopologyTree:
    """Domains per level, from the roots (level 0) to the leaves (the lowest level)."""

    def __init__(self, levels: Sequence[str], nodes: Iterable[Node],
                 path_order: Callable[[tuple[str, ...]], Any] | None = None) -> None:
        """`path_order` sorts the paths of values (default: as strings, Kueue's order, which
        placement and encoding rely on; a display may pass `natural_path_order`)."""
        self.level_keys: tuple[str, ...] = tuple(levels)
        self.lowest_is_node = bool(levels) and levels[-1] == HOSTNAME_LABEL
        leaf_values: dict[str, tuple[str, ...]] = {}
        leaf_nodes: dict[str, list[Node]] = {}
        for node in nodes:
            values = tuple(node.labels[key] for key in self.level_keys)
            # With the hostname as the lowest level Kueue keys a leaf by the hostname alone.
            leaf_key = values[-1] if self.lowest_is_node else domain_id(values)
            if leaf_key not in leaf_values:
                leaf_values[leaf_key] = values
                leaf_nodes[leaf_key] = []
            leaf_nodes[leaf_key].append(node)
        self.levels: list[Level] = self._build_levels(leaf_values, path_order)
        self._index_globally()
        leaves = self.levels[-1] if self.levels else None
        # nodes backing each leaf, in the leaf order of the lowest level
        self.leaf_nodes: list[list[Node]] = [leaf_nodes[i] for i in leaves.ids] if leaves else []
        self.node_to_leaf: dict[str, int] = {
            node.name: i for i, group in enumerate(self.leaf_nodes) for node in group
        }

    # ------------------------------------------------------------ construction

    def _build_levels(self, leaf_values: dict[str, tuple[str, ...]],
                      path_order: Callable[[tuple[str, ...]], Any] | None) -> list[Level]:
        depth = len(self.level_keys)
        if depth == 0:
            return []
        # Sorting full paths makes every parent's children contiguous at every level.
        ordered = sorted(leaf_values.items(),
                         key=itemgetter(1) if path_order is None else (lambda item: path_order(item[1])))
        paths_per_level: list[list[tuple[str, ...]]] = [[] for _ in range(depth)]
        seen: list[set[tuple[str, ...]]] = [set() for _ in range(depth)]
        for _, values in ordered:
            for lvl in range(depth - 1):
                prefix = values[: lvl + 1]
                if prefix not in seen[lvl]:
                    seen[lvl].add(prefix)
                    paths_per_level[lvl].append(prefix)
        leaf_ids = [key for key, _ in ordered]
        paths_per_level[-1] = [values for _, values in ordered]
        levels: list[Level] = []
        for lvl in range(depth):
            paths = paths_per_level[lvl]
            ids = leaf_ids if lvl == depth - 1 else [domain_id(p) for p in paths]
            if lvl == 0:
                parent = np.full(len(paths), -1, dtype=np.int64)
            else:
                above = {p: i for i, p in enumerate(paths_per_level[lvl - 1])}
                parent = np.fromiter((above[p[:-1]] for p in paths), dtype=np.int64, count=len(paths))
            levels.append(Level(
                key=self.level_keys[lvl], values=paths, ids=ids, parent=parent,
                child_start=np.zeros(len(paths) + 1, dtype=np.int64),
                rank=np.arange(len(paths), dtype=np.int64),  # paths are sorted already
                index_by_id={d: i for i, d in enumerate(ids)},
            ))
        for lvl in range(depth - 1):
            counts = np.bincount(levels[lvl + 1].parent, minlength=len(levels[lvl]))
            levels[lvl].child_start[1:] = np.cumsum(counts)
        return levels

    def _index_globally(self) -> None:
        """One index space over all levels, so placement can refer to any domain by an int."""
        self.offsets: list[int] = []
        total = 0
        for level in self.levels:
            self.offsets.append(total)
            total += len(level)
        self.size = total
        self.level_of: list[int] = []
        self.values_of: list[tuple[str, ...]] = []
        self.id_of: list[str] = []
        self.rank_of: list[int] = []
        self.children_of: list[range] = []
        self.parent_of: list[int] = []
        for lvl, level in enumerate(self.levels):
            self.level_of.extend([lvl] * len(level))
            self.values_of.extend(level.values)
            self.id_of.extend(level.ids)
            base = self.offsets[lvl]
            self.rank_of.extend(range(base, base + len(level)))  # values are sorted within a level
            if lvl + 1 < len(self.levels):
                below = self.offsets[lvl + 1]
                starts = level.child_start.tolist()
                self.children_of.extend(range(below + starts[i], below + starts[i + 1]) for i in range(len(level)))
            else:
                self.children_of.extend([range(0)] * len(level))
            above = self.offsets[lvl - 1] if lvl else 0
            self.parent_of.extend((above + p) if p >= 0 else -1 for p in level.parent.tolist())
        self._subtrees: dict[int, tuple[list[int], list[list[int]]]] = {}

    # ------------------------------------------------------------ queries

    @property
    def depth(self) -> int:
        return len(self.level_keys)

    @property
    def leaves(self) -> Level:
        return self.levels[-1]

    @property
    def leaf_count(self) -> int:
        return len(self.levels[-1]) if self.levels else 0

    def level_index(self, key: str) -> int | None:
        try:
            return self.level_keys.index(key)
        except ValueError:
            return None

    def ancestor(self, level: int, index: int, target_level: int) -> int:
        """The index at `target_level` of the ancestor of domain `index` at `level`."""
        while level > target_level:
            index = int(self.levels[level].parent[index])
            level -= 1
        return index

    def level_domains(self, level: int) -> range:
        """Global indices of every domain at `level`."""
        start = self.offsets[level]
        return range(start, start + len(self.levels[level]))

    def subtree_shape(self, d: int) -> tuple[list[int], list[list[int]]]:
        """Domain `d`'s subtree in preorder (`d` first), and the children of each of its domains
        as positions in that order: what a copy of the subtree is made from. Kept per domain."""
        shape = self._subtrees.get(d)
        if shape is None:
            shape = self._subtrees[d] = subtree_shape(self.children_of, d)
        return shape

    def leaf_global(self, leaf: int) -> int:
        return self.offsets[-1] + leaf

    def global_index(self, level: int, domain: str) -> int | None:
        local = self.levels[level].index_by_id.get(domain)
        return None if local is None else self.offsets[level] + local

    def domain_index(self, path: Sequence[str]) -> int | None:
        """Index within its level of the domain named by a path of values from the root."""
        if not path or len(path) > self.depth:
            return None
        if len(path) == self.depth:
            leaf = self.leaf_for_values(path)
            return leaf if leaf is not None and self.leaves.values[leaf] == tuple(path) else None
        return self.levels[len(path) - 1].index_by_id.get(domain_id(path))

    def leaf_for_values(self, values: Sequence[str]) -> int | None:
        """The leaf an assignment domain names: by hostname, or by its full path of values."""
        if not values or not self.levels:
            return None
        key = values[-1] if self.lowest_is_node else domain_id(values)
        return self.leaves.index_by_id.get(key)
