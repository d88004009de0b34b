"""The immutable topology tree of one ResourceFlavor: domains, parents, children, values.

Built once from the nodes that the flavor selects and reused by every snapshot until the
node set changes. Domains are stored level by level; within a level the children of one
parent are contiguous, so per-level aggregations are single `reduceat` calls.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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


_NO_LEAVES = np.zeros(0, dtype=np.intp)


def moved_leaves(old: TopologyTree, new: TopologyTree) -> set[str]:
    """Keys of the leaves that are in one tree only, or at another path in each: where an
    assignment domain (named by its hostname, or its path) finds another leaf, or none."""
    old_leaves, new_leaves = old.leaves if old.levels else None, new.leaves if new.levels else None
    if old_leaves is None or new_leaves is None or old.level_keys != new.level_keys:
        return {*(old_leaves.ids if old_leaves else ()), *(new_leaves.ids if new_leaves else ())}
    old_index, new_index = old_leaves.index_by_id, new_leaves.index_by_id
    moved = old_index.keys() ^ new_index.keys()
    old_values, new_values = old_leaves.values, new_leaves.values
    for key, i in new_index.items():
        j = old_index.get(key)
        if j is not None and old_values[j] != new_values[i]:
            moved.add(key)
    return moved


@dataclass(frozen=True, slots=True)
class LeafCarry:
    """Which leaves of a tree made by `TopologyTree.with_changes` are leaves of `source` with
    the same Node objects: `new[i]` is `source`'s leaf `old[i]`; the leaves in `fresh` are not."""

    source: TopologyTree
    new: np.ndarray
    old: np.ndarray
    fresh: list[int]


class TopologyTree:
    """Domains per level, from the roots (level 0) to the leaves (the lowest level)."""

    def __init__(self, levels: Sequence[str], nodes: Iterable[Node],
                 path_order: Callable[[tuple[str, ...]], Any] | None = None) -> None:
        """`path_order` sorts the paths of values (default: as strings, Kueue's order, which
        placement and encoding rely on; a display may pass `natural_path_order`)."""
        self.level_keys: tuple[str, ...] = tuple(levels)
        self.lowest_is_node = bool(levels) and levels[-1] == HOSTNAME_LABEL
        self.path_order = path_order
        leaf_values: dict[str, tuple[str, ...]] = {}
        leaf_nodes: dict[str, list[Node]] = {}
        keys, by_hostname = self.level_keys, self.lowest_is_node
        for node in nodes:  # _values_of and _leaf_key, inlined: this runs once per node
            labels = node.labels
            values = tuple(labels[key] for key in keys)
            # With the hostname as the lowest level Kueue keys a leaf by the hostname alone.
            leaf_key = values[-1] if by_hostname else domain_id(values)
            group = leaf_nodes.get(leaf_key)
            if group is None:
                leaf_values[leaf_key] = values
                leaf_nodes[leaf_key] = [node]
            else:
                group.append(node)
        # Sorting full paths makes every parent's children contiguous at every level.
        order = itemgetter(1) if path_order is None else (lambda item: path_order(item[1]))
        ordered = sorted(leaf_values.items(), key=order)
        ids = [key for key, _ in ordered]
        self._assemble(ids, [values for _, values in ordered], [leaf_nodes[key] for key in ids])

    def _values_of(self, node: Node) -> tuple[str, ...]:
        labels = node.labels
        return tuple(labels[key] for key in self.level_keys)

    def _leaf_key(self, values: tuple[str, ...]) -> str:
        return values[-1] if self.lowest_is_node else domain_id(values)

    def _order(self, values: tuple[str, ...]) -> Any:
        return values if self.path_order is None else self.path_order(values)

    def with_changes(self, gone: Collection[str], arrived: Iterable[Node], position: Mapping[str, int]
                     ) -> tuple[TopologyTree, LeafCarry] | None:
        """This tree with the nodes named in `gone` taken out and `arrived` put in (a node that
        changed is in both; an arrived node is not in the tree otherwise), made from the leaves
        it has instead of from every node: equal to the tree built afresh from its nodes in
        `position` order (a node's place among them). With it, which leaves are this tree's
        leaves, backed by the same Node objects. None where the afresh build must decide: a
        tree without levels, or leaves the order cannot tell apart from one another."""
        if not self.levels:
            return None
        gone = gone if isinstance(gone, (set, frozenset)) else set(gone)
        groups = self._touched_groups(gone, arrived)
        index = self.leaves.index_by_id
        removed = sorted(index[key] for key in groups if key in index)
        added: list[tuple[str, tuple[str, ...], list[Node]]] = []
        for leaf_key, group in groups.items():
            if group:
                if len(group) > 1:
                    group.sort(key=lambda n: position[n.name])
                added.append((leaf_key, self._values_of(group[0]), group))
        order = self._order
        added.sort(key=lambda entry: order(entry[1]))
        at = self._insertion_points(added, removed)
        if at is None:
            return None
        ids, values, groups_now, carried, fresh = self._merged(added, at, removed)
        tree = TopologyTree.__new__(TopologyTree)
        tree.level_keys, tree.lowest_is_node, tree.path_order = self.level_keys, self.lowest_is_node, self.path_order
        tree._assemble(ids, values, groups_now)
        new = np.concatenate([np.arange(n, n + length) for n, _, length in carried]) if carried else _NO_LEAVES
        old = np.concatenate([np.arange(o, o + length) for _, o, length in carried]) if carried else _NO_LEAVES
        return tree, LeafCarry(self, new, old, fresh)

    def _touched_groups(self, gone: Collection[str], arrived: Iterable[Node]) -> dict[str, list[Node]]:
        """Per leaf key the change touches, the nodes it has after it (in no order yet)."""
        ids, index, leaf_nodes = self.leaves.ids, self.leaves.index_by_id, self.leaf_nodes
        groups: dict[str, list[Node]] = {}
        for name in gone:
            leaf = self.node_to_leaf.get(name)
            if leaf is not None and ids[leaf] not in groups:
                groups[ids[leaf]] = [n for n in leaf_nodes[leaf] if n.name not in gone]
        for node in arrived:
            leaf_key = self._leaf_key(self._values_of(node))
            group = groups.get(leaf_key)
            if group is None:
                leaf = index.get(leaf_key)
                group = groups[leaf_key] = [] if leaf is None else list(leaf_nodes[leaf])
            group.append(node)
        return groups

    def _insertion_points(self, added: list[tuple[str, tuple[str, ...], list[Node]]], removed: list[int]
                          ) -> list[int] | None:
        """Per added leaf (in order), the index of the first leaf of this tree that sorts after
        it; None when one sorts level with a leaf that stays or with another added leaf (the
        afresh build orders those by where their nodes come, which the leaves do not say)."""
        order, values = self._order, self.leaves.values
        gone = set(removed)
        at: list[int] = []
        previous = None
        for _, path, _ in added:
            key = order(path)
            if previous is not None and key == previous:
                return None
            i = bisect_left(values, key, key=order)
            j = i
            while j < len(values) and order(values[j]) == key:
                if j not in gone:
                    return None
                j += 1
            at.append(i)
            previous = key
        return at

    def _merged(self, added: list[tuple[str, tuple[str, ...], list[Node]]], at: list[int], removed: list[int]):
        """The leaves after the change, in order (ids, paths, node groups); the runs of this
        tree's leaves kept, as (new index, old index, length); and the added leaves' indices."""
        old_ids, old_values, old_groups = self.leaves.ids, self.leaves.values, self.leaf_nodes
        ids: list[str] = []
        values: list[tuple[str, ...]] = []
        groups: list[list[Node]] = []
        carried: list[tuple[int, int, int]] = []
        fresh: list[int] = []
        # at one index, the leaf taken out goes before the leaf put in; put in ones keep their order
        events = sorted([(i, 0, n) for n, i in enumerate(removed)] + [(i, 1, n) for n, i in enumerate(at)])
        events.append((len(old_ids), 0, -1))  # the leaves after the last change
        pos = 0
        for i, kind, n in events:
            if i > pos:
                carried.append((len(ids), pos, i - pos))
                ids += old_ids[pos:i]
                values += old_values[pos:i]
                groups += old_groups[pos:i]
                pos = i
            if kind == 0:
                pos = i + 1
            else:
                leaf_key, path, group = added[n]
                fresh.append(len(ids))
                ids.append(leaf_key)
                values.append(path)
                groups.append(group)
        return ids, values, groups, carried, fresh

    def _assemble(self, ids: list[str], values: list[tuple[str, ...]], groups: list[list[Node]]) -> None:
        """The levels and indexes of leaves given in order (keys, paths, nodes)."""
        self.levels: list[Level] = self._build_levels(ids, values)
        self._index_globally()
        # nodes backing each leaf, in the leaf order of the lowest level
        self.leaf_nodes: list[list[Node]] = groups if self.levels else []
        self.node_to_leaf: dict[str, int] = {
            node.name: i for i, group in enumerate(self.leaf_nodes) for node in group
        }

    # ------------------------------------------------------------ construction

    def _build_levels(self, leaf_ids: list[str], leaf_paths: list[tuple[str, ...]]) -> list[Level]:
        """The levels of leaves given in order (their keys and paths). The domains above the
        leaves come in the order their paths first appear; each domain's parent is the one
        its path continues."""
        depth = len(self.level_keys)
        if depth == 0:
            return []
        uppers = depth - 1
        paths_per_level: list[list[tuple[str, ...]]] = [[] for _ in range(uppers)]
        parents: list[list[int]] = [[] for _ in range(uppers)]
        index: list[dict[tuple[str, ...], int]] = [{} for _ in range(uppers)]
        current = [-1] * uppers  # the domain per level above the leaf in hand
        leaf_parent: list[int] = []
        last: tuple[str, ...] | None = None
        for values in leaf_paths:
            above = values[:uppers]
            if above != last:  # siblings share every domain above them: only a new parent is looked up
                last = above
                for lvl in range(uppers):
                    prefix = above[: lvl + 1]
                    i = index[lvl].get(prefix)
                    if i is None:
                        i = index[lvl][prefix] = len(paths_per_level[lvl])
                        paths_per_level[lvl].append(prefix)
                        parents[lvl].append(current[lvl - 1] if lvl else -1)
                    current[lvl] = i
            leaf_parent.append(current[-1] if uppers else -1)
        paths_per_level.append(leaf_paths)
        parents.append(leaf_parent)
        levels: list[Level] = []
        for lvl in range(depth):
            paths = paths_per_level[lvl]
            ids = leaf_ids if lvl == uppers else [domain_id(p) for p in paths]
            levels.append(Level(
                key=self.level_keys[lvl], values=paths, ids=ids,
                parent=np.array(parents[lvl], dtype=np.int64).reshape(len(paths)),
                child_start=np.zeros(len(paths) + 1, dtype=np.int64),
                rank=np.arange(len(paths), dtype=np.int64),  # paths are sorted already
                index_by_id=dict(zip(ids, range(len(ids)), strict=True)),
            ))
        for lvl in range(uppers):
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

    def leaves_under(self, level: int, index: int) -> range:
        """The leaves (indices within the leaf level) of domain `index` at `level`: children
        are contiguous, so a subtree's leaves are one range."""
        start, end = index, index + 1
        for lvl in range(level, self.depth - 1):
            child_start = self.levels[lvl].child_start
            start, end = int(child_start[start]), int(child_start[end])
        return range(start, end)

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
