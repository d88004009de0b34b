"""Per-cycle capacity of one TAS ResourceFlavor on top of its immutable topology tree.

Free capacity per leaf is the nodes' allocatable minus the usage of non-TAS pods bound to
them; TAS usage is what admitted TAS workloads (and, within a cycle, the workloads just
admitted) hold. Both are integer matrices (leaves x resources) so placement can compute
how many pods fit in every leaf with a few vector operations.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.assignment import TopologyAssignment
from scheduler.model import Node, ResourceFlavor, Taint, Toleration, Topology
from scheduler.quantity import PODS
from scheduler.tree import LeafCarry, TopologyTree, node_matches_flavor

JOURNAL_KEPT = 256  # recent changes whose leaves are kept
# Every amount the matrices hold stays within +-AMOUNT_CAP (2^61), so that the sum or the
# difference of any two fits in int64. An amount beyond it means "more than any node has"
# either way: a request Kueue saturates at int64 (an amount beyond it), non-TAS pods asking
# for more than that on one node, a leaf of several nodes that each offer close to 2^62
# (what a Node may say). Held there, the arithmetic never wraps around, which would turn a
# full leaf into an empty one (or fail to fit the number in the matrix at all).
AMOUNT_CAP = 2**61
PATCH_SHARE = 0.25  # past this share of the leaves, computing afresh is cheaper than patching


def worth_patching(changed: int, leaves: int) -> bool:
    """Whether what is kept per leaf is brought up to date on the `changed` leaves only."""
    return changed <= PATCH_SHARE * leaves


@dataclass(slots=True)
class ResourceIndex:
    """A stable column per resource name; columns are added as new names appear."""

    names: list[str] = field(default_factory=list)
    column: dict[str, int] = field(default_factory=dict)

    def add(self, name: str) -> int:
        col = self.column.get(name)
        if col is None:
            col = self.column[name] = len(self.names)
            self.names.append(name)
        return col


class TASFlavorSnapshot:
    """Capacity and usage of every leaf domain of one TAS flavor."""

    def __init__(self, flavor: ResourceFlavor, topology: Topology, tree: TopologyTree, *,
                 previous: TASFlavorSnapshot | None = None, carry: LeafCarry | None = None) -> None:
        """`previous`: the flavor's snapshot this one replaces, kept current until now. The rows
        of the leaves both trees have, backed by the very same Node objects, are carried over
        from it (capacity, non-TAS and TAS usage); only the other leaves are made here, and
        `fresh_leaves` names them for the builder to count their usage. Without it (or when
        its columns or levels differ) every leaf is fresh, with no usage yet. `carry`: which
        leaves those are, when `tree` was made from `previous`'s (`TopologyTree.with_changes`);
        otherwise they are found by comparing the trees."""
        self.flavor = flavor
        self.topology = topology
        self.tree = tree
        self.tolerations: tuple[Toleration, ...] = flavor.tolerations
        if carry is not None and (previous is None or carry.source is not previous.tree):
            carry = None
        self.resources = ResourceIndex()
        if carry is not None:  # the same columns, and those only the fresh leaves' nodes offer
            for name in previous.resources.names[:previous.built_columns]:
                self.resources.add(name)
        for leaf in (range(tree.leaf_count) if carry is None else carry.fresh):
            for node in tree.leaf_nodes[leaf]:
                for name in node.allocatable:
                    self.resources.add(name)
        self.resources.add(PODS)
        # the columns the nodes offer, made with the snapshot; columns added later
        # (`ensure_resources`) hold only the usage added after them
        self.built_columns = len(self.resources.names)
        shape = (tree.leaf_count, self.built_columns)
        self.free = np.zeros(shape, dtype=np.int64)
        self.non_tas_usage = np.zeros_like(self.free)
        self.tas_usage = np.zeros_like(self.free)
        carried = None
        if carry is not None and self.built_columns == previous.built_columns:
            carried = (carry.new, carry.old, np.arange(self.built_columns, dtype=np.intp), carry.fresh)
        elif previous is not None:
            carried = _carried_rows(previous, tree, self.resources.names)
        if carried is None:
            fresh: list[int] = list(range(tree.leaf_count))
            self.fresh_leaves: np.ndarray | None = None
        else:
            new, old, columns, fresh = carried
            rows = np.ix_(old, columns)
            self.free[new] = previous.free[rows]
            self.non_tas_usage[new] = previous.non_tas_usage[rows]
            self.tas_usage[new] = previous.tas_usage[rows]
            self.fresh_leaves = np.asarray(fresh, dtype=np.intp)
        if fresh:
            self.free[fresh] = self._allocatable_rows([tree.leaf_nodes[leaf] for leaf in fresh])
        # leaves whose nodes carry taints: the only ones a toleration check must look at
        self.tainted_leaves: list[tuple[int, tuple[Taint, ...]]] = [
            (leaf, group[0].taints) for leaf, group in enumerate(tree.leaf_nodes) if group and group[0].taints
        ]
        self._label_columns: dict[str, np.ndarray] = {}
        self.node_match_cache: dict[tuple, object] = {}
        # bumped by every change of free capacity (`free_version`) or of any usage (`version`):
        # a placement computed at the same versions is the same placement
        self.version = 0
        self.free_version = 0
        # the leaves each recent change touched (None: any), for what is kept per version
        # to catch up with only those: (version, free_version, free changed, leaves)
        self._journal: list[tuple[int, int, bool, np.ndarray | None]] = []
        self._journal_floor = (0, 0)  # the versions before the oldest change kept
        self.placement_cache: dict[tuple, tuple] = {}
        self.phase1_cache: OrderedDict[tuple, object] = OrderedDict()  # scheduler.phase1.Counts per shape
        self._remaining: dict[bool, tuple[int, np.ndarray]] = {}

    def _allocatable_rows(self, groups: Sequence[Sequence[Node]]) -> np.ndarray:
        """Each group's summed allocatable over the snapshot's columns, held within AMOUNT_CAP."""
        column, width = self.resources.column, len(self.resources.names)
        rows = []
        for group in groups:
            row = [0] * width
            for node in group:
                for name, value in node.allocatable.items():
                    row[column[name]] += value
            rows.append(row if max(row) <= AMOUNT_CAP else [min(v, AMOUNT_CAP) for v in row])
        return np.array(rows, dtype=np.int64).reshape(len(groups), width)

    # ------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        return self.flavor.name

    @property
    def topology_name(self) -> str:
        return self.topology.name

    @property
    def level_keys(self) -> tuple[str, ...]:
        return self.tree.level_keys

    @property
    def lowest_is_node(self) -> bool:
        return self.tree.lowest_is_node

    def has_level(self, key: str) -> bool:
        return key in self.tree.level_keys

    def label_column(self, key: str) -> np.ndarray:
        """The value of label `key` on each leaf's node (None where absent), for vectorised selectors."""
        column = self._label_columns.get(key)
        if column is None:
            column = np.array([group[0].labels.get(key) if group else None for group in self.tree.leaf_nodes],
                              dtype=object)
            self._label_columns[key] = column
        return column

    # ------------------------------------------------------------ vectors

    def ensure_resources(self, names: Iterable[str]) -> None:
        """Columns (of zero capacity) for resources no node offers, so requests for them count as 0."""
        missing = [n for n in names if n not in self.resources.column]
        if not missing:
            return
        for name in missing:
            self.resources.add(name)
        pad = np.zeros((self.free.shape[0], len(missing)), dtype=np.int64)
        self._changed(None, free=True)  # every row gets wider
        self.free = np.hstack([self.free, pad])
        self.tas_usage = np.hstack([self.tas_usage, pad])
        self.non_tas_usage = np.hstack([self.non_tas_usage, pad])

    def request_vector(self, requests: Mapping[str, int], *, pods: int = 1) -> np.ndarray:
        """A PodSet's per-pod requests (plus one pod) as a row, adding columns for unknown resources."""
        self.ensure_resources(name for name, value in requests.items() if value)
        return self.vector(requests, pods=pods)

    def vector(self, requests: Mapping[str, int], *, pods: int = 0) -> np.ndarray:
        """`requests` as a row over this snapshot's resource columns (unknown names are dropped)."""
        row = np.zeros(len(self.resources.names), dtype=np.int64)
        for name, value in requests.items():
            col = self.resources.column.get(name)
            if col is not None:
                row[col] += value if value <= AMOUNT_CAP else AMOUNT_CAP
        if pods:
            row[self.resources.column[PODS]] += pods
        return row

    # ------------------------------------------------------------ usage

    def add_non_tas_usage(self, node_name: str, requests: Mapping[str, int]) -> None:
        """A running non-TAS pod on a node of this flavor: its requests and one pod slot."""
        self.add_non_tas_usages([(node_name, requests)])

    def add_non_tas_usages(self, pods: Iterable[tuple[str, Mapping[str, int]]], *, sign: int = 1) -> None:
        """Many non-TAS pods at once, summed per leaf before touching the matrix (sign=-1:
        pods that stopped or left)."""
        per_leaf: dict[int, dict[str, int]] = {}
        node_to_leaf = self.tree.node_to_leaf
        for node_name, requests in pods:
            leaf = node_to_leaf.get(node_name)
            if leaf is None:
                continue
            usage = per_leaf.setdefault(leaf, {PODS: 0})
            usage[PODS] += 1
            for name, value in requests.items():
                usage[name] = usage.get(name, 0) + value
        if not per_leaf:
            return
        column = self.resources.column
        leaves = list(per_leaf)
        delta = np.zeros((len(leaves), len(self.resources.names)), dtype=np.int64)
        for i, leaf in enumerate(leaves):
            for name, value in per_leaf[leaf].items():
                col = column.get(name)
                if col is not None:
                    delta[i, col] = value if value <= AMOUNT_CAP else AMOUNT_CAP
        if sign < 0:
            delta = -delta
        self._changed(np.asarray(leaves, dtype=np.intp), free=True)
        self.free[leaves] = _capped(self.free[leaves] - delta)
        self.non_tas_usage[leaves] = _capped(self.non_tas_usage[leaves] + delta)

    def add_tas_usage(self, values: Sequence[str], requests: Mapping[str, int], count: int, sign: int = 1) -> bool:
        """`count` pods of `requests` on the leaf an assignment domain names; False if it is gone."""
        leaf = self.tree.leaf_for_values(values)
        if leaf is None:  # the node was deleted or is no longer Ready: nothing to account
            return False
        usage = _times(self.vector(requests), count)
        usage[self.resources.column[PODS]] += count
        self._changed(np.asarray([leaf], dtype=np.intp))
        self.tas_usage[leaf] = _capped(self.tas_usage[leaf] + sign * usage)
        return True

    def add_assignment_usage(
        self, assignment: TopologyAssignment, requests: Mapping[str, int], sign: int = 1, *,
        only: Container[int] | None = None,
    ) -> None:
        """Every domain of an assignment at once (domains on deleted or NotReady nodes count
        nothing; with `only`, neither do domains on leaves outside it)."""
        leaves, counts = [], []
        leaf_for_values = self.tree.leaf_for_values
        for dom in assignment.domains:
            leaf = leaf_for_values(dom.values)
            if leaf is not None and (only is None or leaf in only):
                leaves.append(leaf)
                counts.append(dom.count)
        if not leaves:
            return
        self._changed(np.asarray(leaves, dtype=np.intp))
        per_pod = self.vector(requests, pods=1)
        usage = self.tas_usage
        if int(per_pod.max()) * sum(counts) > AMOUNT_CAP:  # amounts no real cluster has: held in bounds
            for leaf, count in zip(leaves, counts, strict=True):
                usage[leaf] = _capped(usage[leaf] + sign * _times(per_pod, count))
            return
        # what is added stays within AMOUNT_CAP, so no sum wraps around; rows that end up
        # beyond it are held there, as adding pod by pod would have left them
        if len(leaves) == 1:
            row = usage[leaves[0]]
            row += (sign * counts[0]) * per_pod
            if row.max() > AMOUNT_CAP or row.min() < -AMOUNT_CAP:
                usage[leaves[0]] = _capped(row)
            return
        np.add.at(usage, leaves, np.outer(np.asarray(counts, dtype=np.int64) * sign, per_pod))
        touched = usage[leaves]
        if touched.max() > AMOUNT_CAP or touched.min() < -AMOUNT_CAP:
            usage[leaves] = _capped(touched)

    def _changed(self, leaves: np.ndarray | None, *, free: bool = False) -> None:
        self.version += 1
        if free:
            self.free_version += 1
        journal = self._journal
        journal.append((self.version, self.free_version, free, leaves))
        if len(journal) > 2 * JOURNAL_KEPT:
            dropped = journal[-JOURNAL_KEPT - 1]
            self._journal_floor = (dropped[0], dropped[1])
            del journal[:-JOURNAL_KEPT]

    def usage_changed(self, leaves: Sequence[int] | np.ndarray | None = None) -> None:
        """The TAS usage matrix was changed in place by a caller, on `leaves` (None: anywhere):
        what was computed from it (the remaining capacity, placements) must catch up."""
        self._changed(None if leaves is None else np.unique(np.asarray(leaves, dtype=np.intp)))

    def changed_leaves(self, since: int, *, simulate_empty: bool = False) -> np.ndarray | None:
        """The leaves (sorted, unique) whose remaining capacity may differ from what it was at
        version `since` (`free_version` when `simulate_empty`); None when that is not known:
        a change of unknown reach, or one older than what the journal keeps."""
        position = 1 if simulate_empty else 0
        if since < self._journal_floor[position]:
            return None
        touched: list[np.ndarray] = []
        for entry in reversed(self._journal):
            if entry[position] <= since:
                break
            if simulate_empty and not entry[2]:
                continue
            if entry[3] is None:
                return None
            touched.append(entry[3])
        if not touched:
            return np.zeros(0, dtype=np.intp)
        return np.unique(np.concatenate(touched)) if len(touched) > 1 else np.unique(touched[0])

    def remaining(self, *, simulate_empty: bool = False) -> np.ndarray:
        """Free capacity minus TAS usage (or only free capacity when simulating an empty cluster).

        Read-only and shared: every placement of a cycle reads it, and computing it anew costs
        as much as a placement on a large tree. It is valid until the capacity or the usage
        changes, then brought up to date in place on the leaves that changed. A caller that
        adjusts it, or keeps it across changes, works on a copy."""
        version = self.free_version if simulate_empty else self.version
        cached = self._remaining.get(simulate_empty)
        if cached is not None and cached[0] == version:
            return cached[1]
        if cached is not None and cached[1].shape == self.free.shape:
            leaves = self.changed_leaves(cached[0], simulate_empty=simulate_empty)
            if leaves is not None and worth_patching(len(leaves), self.tree.leaf_count):
                value = cached[1]
                value.flags.writeable = True
                value[leaves] = self.free[leaves] if simulate_empty else self.free[leaves] - self.tas_usage[leaves]
                value.flags.writeable = False
                self._remaining[simulate_empty] = (version, value)
                return value
        value = self.free.copy() if simulate_empty else self.free - self.tas_usage
        value.flags.writeable = False
        self._remaining[simulate_empty] = (version, value)
        return value


def _capped(amounts: np.ndarray) -> np.ndarray:
    """`amounts` held within +-AMOUNT_CAP."""
    return np.clip(amounts, -AMOUNT_CAP, AMOUNT_CAP)


def _times(row: np.ndarray, count: int) -> np.ndarray:
    """`row` (amounts within AMOUNT_CAP) times a pod count, each product held within AMOUNT_CAP."""
    if count <= 1 or int(row.max()) <= AMOUNT_CAP // count:
        return row * count
    return np.minimum(row, AMOUNT_CAP // count) * count


def build_flavor_snapshot(flavor: ResourceFlavor, topology: Topology, nodes: Iterable[Node], *,
                          previous: TASFlavorSnapshot | None = None) -> TASFlavorSnapshot:
    """The tree of the Ready, schedulable nodes that carry the flavor's labels and every level
    label; with `previous`, the rows of the leaves it shares are carried over (see
    TASFlavorSnapshot)."""
    selected = [n for n in nodes if in_flavor_tree(n, flavor, topology)]
    return TASFlavorSnapshot(flavor, topology, TopologyTree(topology.levels, selected), previous=previous)


def in_flavor_tree(node: Node, flavor: ResourceFlavor, topology: Topology) -> bool:
    """The node is one of the flavor's tree: Ready, schedulable, with the flavor's labels and
    every level's."""
    return node.schedulable_and_ready and node_matches_flavor(node.labels, flavor.node_labels, topology.levels)


def updated_flavor_snapshot(previous: TASFlavorSnapshot, nodes: Mapping[str, Node], changed: Collection[str],
                            position: Mapping[str, int]) -> TASFlavorSnapshot:
    """`previous`'s flavor snapshot made again after the nodes named in `changed` came, went
    or changed (`nodes`: every node now, by name; `position`: each one's place among them),
    from `previous`'s tree rather than from every node: equal to `build_flavor_snapshot`
    over `nodes` with `previous`."""
    flavor, topology = previous.flavor, previous.topology
    arrived = [node for name in changed
               if (node := nodes.get(name)) is not None and in_flavor_tree(node, flavor, topology)]
    made = previous.tree.with_changes(changed, arrived, position)
    if made is None:
        return build_flavor_snapshot(flavor, topology, nodes.values(), previous=previous)
    tree, carry = made
    return TASFlavorSnapshot(flavor, topology, tree, previous=previous, carry=carry)


def _carried_rows(previous: TASFlavorSnapshot, tree: TopologyTree, columns: Sequence[str]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]] | None:
    """What a snapshot of `tree` with `columns` carries over from `previous`: (its leaves, the
    same leaves in `previous`, `previous`'s columns for `columns`, the leaves left fresh);
    None when nothing can be: other levels (leaves named otherwise), or a column `previous`
    was not made with. A leaf is carried when `previous` has a leaf of the same name backed
    by the same Node objects: then its capacity, the non-TAS pods on it and the assignment
    domains naming it are the same."""
    if not tree.levels or previous.tree.level_keys != tree.level_keys or not previous.tree.levels:
        return None
    made_with = previous.resources.names[:previous.built_columns]
    old_column = {name: col for col, name in enumerate(made_with)}
    if any(name not in old_column for name in columns):
        return None
    old_index = previous.tree.leaves.index_by_id
    old_groups = previous.tree.leaf_nodes
    new, old, fresh = [], [], []
    for leaf, (leaf_id, group) in enumerate(zip(tree.leaves.ids, tree.leaf_nodes, strict=True)):
        j = old_index.get(leaf_id)
        if j is not None and _same_nodes(group, old_groups[j]):
            new.append(leaf)
            old.append(j)
        else:
            fresh.append(leaf)
    return (np.asarray(new, dtype=np.intp), np.asarray(old, dtype=np.intp),
            np.asarray([old_column[name] for name in columns], dtype=np.intp), fresh)


def _same_nodes(a: Sequence[Node], b: Sequence[Node]) -> bool:
    if len(a) == 1:
        return len(b) == 1 and a[0] is b[0]
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


ROOM_UNBOUNDED = 2**31 - 1  # a request of nothing: any number of pods fit


def assignment_room(snap: TASFlavorSnapshot, requests: Mapping[str, int], assignment: TopologyAssignment
                    ) -> list[int]:
    """Per domain of `assignment`, how many pods of `requests` (per pod, plus one pod slot) fit
    in what its leaf has left (free capacity less TAS usage); 0 for a domain that names no
    leaf of the flavor's tree (a node not Ready, cordoned, or gone); below 0 when the leaf
    is over-committed already."""
    vector = snap.request_vector(requests)
    remaining = snap.remaining()
    cols = vector.nonzero()[0]
    out = []
    for dom in assignment.domains:
        leaf = snap.tree.leaf_for_values(dom.values)
        if leaf is None:
            out.append(0)
        elif not len(cols):
            out.append(ROOM_UNBOUNDED)
        else:
            out.append(int((remaining[leaf][cols] // vector[cols]).min()))
    return out


def assignments_fit(snap: TASFlavorSnapshot,
                    placed: Iterable[tuple[Mapping[str, int], TopologyAssignment]]) -> bool:
    """Whether TopologyAssignments of one workload (each with its pods' requests) fit
    together in what the leaves have left: pods of two PodSets on one node count together.
    (Kueue checks each PodSet's domains on their own, so a leaf with room for either PodSet
    but not for both takes both; the engine does not over-commit a node so.)"""
    placed = list(placed)
    if len(placed) == 1:  # one PodSet: its domains are distinct leaves
        requests, assignment = placed[0]
        rooms = assignment_room(snap, requests, assignment)
        return all(room >= dom.count for room, dom in zip(rooms, assignment.domains, strict=True))
    needed: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per leaf: what is asked, of which resources
    for requests, assignment in placed:
        vector = snap.request_vector(requests)
        used = vector != 0
        if not used.any():
            continue  # a request of nothing fits anywhere
        for dom in assignment.domains:
            leaf = snap.tree.leaf_for_values(dom.values)
            if leaf is None:
                if dom.count:
                    return False  # a node not Ready, cordoned or gone has room for no pod
                continue
            total, columns = needed.get(leaf, (0, False))
            needed[leaf] = (total + vector * dom.count, columns | used)
    if not needed:
        return True
    remaining = snap.remaining()
    return all(bool((total[columns] <= remaining[leaf][columns]).all()) for leaf, (total, columns) in needed.items())
