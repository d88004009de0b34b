"""The queue manager: pending workloads as Kueue keeps them (`pkg/cache/queue`).

* One heap per ClusterQueue, in Kueue's order: higher priority first, then the older
  queue-order timestamp (then namespace and name, so that the order is total).
* A head that cannot be admitted goes back to its heap at once when something may change
  its answer soon (flavors left to try, it no longer fit after another admission in the
  cycle, its preemptions are under way, or the ClusterQueue is StrictFIFO, whose head
  blocks the queue). Otherwise (BestEffortFIFO, no fit, or no preemption candidates) it is
  parked as inadmissible, and with SchedulingEquivalenceHashing every workload of the same
  shape waiting in the heap is parked with it.
* Parked workloads go back to their heaps on the events Kueue requeues on: quota released
  in the cohort (a workload finishing, deleted or evicted), a ClusterQueue, Cohort or
  ResourceFlavor change, a Topology or node change of a flavor the ClusterQueue uses.
* A head that issued preemptions and waits for them (BestEffortFIFO) stays at the head of
  its ClusterQueue, whatever comes in ahead of it by priority, until it is admitted, goes
  back for another reason or leaves (Kueue's sticky preemptor workload): what its targets
  free is not taken by a workload that was parked, or arrived, meanwhile.
* A second-pass queue holds admitted workloads that need TAS again (a delayed topology
  request whose checks are Ready, an unhealthy node to replace), each ready after Kueue's
  backoff: 1 s, doubling, at most 30 s.

The manager never scans every pending workload: a cycle pops one head per ClusterQueue,
and a requeue moves only the parked workloads of the ClusterQueues concerned.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from scheduler.clock import later
from scheduler.cluster import FAILED_CHECKS, Changes, ClusterState, has_failed_checks, is_pending
from scheduler.flavorassigner import FlavorScanProgress
from scheduler.model import ClusterQueue, Workload
from scheduler.pods_ready import queue_order_time
from scheduler.preemption import IN_COHORT_RECLAIM_WHILE_BORROWING
from scheduler.queue_status import waiting_block

_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"

# Kueue's requeue reasons that decide where a head goes back to
REQUEUE_IMMEDIATE = "Immediate"  # flavors left, no longer fits after another head, ...
REQUEUE_PENDING_PREEMPTION = "PendingPreemption"  # preemptions issued, waiting for the targets to go
REQUEUE_NO_FIT = "NoFit"
REQUEUE_NO_CANDIDATES = "PreemptionNoCandidates"
REQUEUE_GENERIC = "Generic"
REQUEUE_NAMESPACE_MISMATCH = "NamespaceMismatch"  # parked even in a StrictFIFO ClusterQueue
REQUEUE_PREEMPTION_GATED = "PreemptionGated"
BULK_REASONS = frozenset({REQUEUE_NO_FIT, REQUEUE_NO_CANDIDATES})
PARKED_ALONE = "parked-alone"  # the mark of a class of one workload parked without its equivalents
ACTIVE_ALONE = "active-alone"  # one changed while parked, back in the heap without its equivalents


def update_signature(wl: Workload) -> tuple:
    """What Kueue's PushOrUpdate compares to decide whether a parked workload may have become
    admissible: its spec (its generation and queue name), reclaimable pods, and Evicted and
    Requeued conditions."""
    def condition(cond_type: str) -> tuple | None:
        c = wl.condition(cond_type)
        return None if c is None else (c.status, c.reason, c.message)
    return (wl.generation, wl.queue_name, tuple(sorted(wl.reclaimable_pods.items())),
            condition("Evicted"), condition("Requeued"))

# stale entries a heap may hold beyond twice its live ones before it is compacted
COMPACT_SLACK = 256

# in place of the negated priority, the first field of a sticky workload's heap entry: before
# every priority (an int32)
STICKY_FIRST = -(2**63)

SECOND_PASS_INITIAL = timedelta(seconds=1)
SECOND_PASS_MAX = timedelta(seconds=30)


def queue_order_timestamp(state: ClusterState, wl: Workload) -> datetime:
    """Kueue's queue-order timestamp: the creation time, or the eviction that sent the workload
    back (see pods_ready.queue_order_time); without PrioritySortingWithinCohort, a workload
    preempted by reclamation while its ClusterQueue borrowed goes just after its preemptor (the
    preemption's time and a millisecond); Go's zero time without any."""
    at = None
    if wl.conditions:
        at = queue_order_time(wl, state.config.wait_for_pods_ready)
        if at is None and not state.gates.PrioritySortingWithinCohort:
            preempted = wl.condition("Preempted")
            if preempted is not None and preempted.status == "True" and \
                    preempted.reason == IN_COHORT_RECLAIM_WHILE_BORROWING and preempted.last_transition_time:
                at = preempted.last_transition_time + timedelta(milliseconds=1)
    return at or wl.creation_timestamp or _GO_ZERO_TIME


def queue_order_key(state: ClusterState, wl: Workload) -> tuple:
    """Kueue's order within a ClusterQueue: priority, then the queue-order timestamp."""
    return (-state.priority_of(wl), queue_order_timestamp(state, wl).timestamp(), wl.namespace, wl.name)


def equivalence_hash(state: ClusterState, wl: Workload) -> Hashable:
    """Kueue's scheduling equivalence hash: workloads with the same effective priority and
    the same PodSets (pod spec shape, count, minCount, topology request) get the same answer
    from the same cluster, so one evaluation stands for all of them; with ConcurrentAdmission,
    variants allowed different flavors do not."""
    ignore_name = state.gates.SchedulingEquivalenceHashingIgnorePodSetName
    pod_sets = []
    for ps in wl.pod_sets:
        spec = ps.spec
        pod_sets.append((
            "" if ignore_name else ps.name,
            tuple(sorted(spec.requests.items())),
            tuple(sorted(spec.node_selector.items())),
            spec.tolerations,
            spec.affinity,
            state.pods_after_reclaim(wl, ps),
            ps.min_count,
            ps.topology_request,
        ))
    return (state.priority_of(wl), tuple(pod_sets), state.allowed_flavors_of(wl))


def second_pass_delay(iteration: int) -> timedelta:
    """Kueue's second-pass backoff: 1 s for the first try, doubling, at most 30 s."""
    delay = SECOND_PASS_INITIAL * (2 ** max(iteration - 1, 0))
    return min(delay, SECOND_PASS_MAX)


@dataclass(slots=True)
class Parked:
    """Why a workload's equivalence class is parked as inadmissible."""

    representative: str  # the workload whose evaluation parked the class
    result: object = None  # its result, which stands for the others of the class
    # found inadmissible while capacity was held for another head in the cycle (a reservation,
    # a preemptor's usage): Kueue parks it all the same, though it may fit once the hold is gone
    under_hold: bool = False
    # its TAS placement failed on the nodes as they are: TAS capacity freed on the flavor by
    # any ClusterQueue requeues it, not only quota freed in its cohort
    topology_blocked: bool = False

    def bulk(self, key: str) -> bool:
        """Parked with an equivalent workload, not evaluated itself."""
        return key != self.representative


@dataclass(eq=False)
class EquivalenceClass:
    """Pending workloads of one ClusterQueue with the same equivalence hash, in queue order.

    Kueue parks every workload of a class in the heap when one of them is found inadmissible
    (no fit, no preemption candidates), and a requeue brings them all back: keeping them
    together makes both one operation instead of one per workload."""

    shape: Hashable
    heap: list[tuple] = field(default_factory=list)  # member entries (*order, key), lazily cleaned
    members: dict[str, tuple] = field(default_factory=dict)  # key -> its valid entry
    parked: Parked | None = None
    version: int = 0  # entries of the class in the ClusterQueue heap older than this are stale

    def best(self) -> tuple | None:
        heap, members = self.heap, self.members
        while heap:
            entry = heap[0]
            if members.get(entry[-1]) == entry:
                return entry
            heapq.heappop(heap)
        return None

    def add(self, key: str, entry: tuple) -> None:
        self.members[key] = entry
        heapq.heappush(self.heap, entry)

    def discard(self, key: str) -> None:
        if self.members.pop(key, None) is not None and len(self.heap) > 2 * len(self.members) + 32:
            self.heap = [e for e in self.heap if self.members.get(e[-1]) == e]
            heapq.heapify(self.heap)


@dataclass
class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue: a heap of equivalence classes ordered by each
    class's first workload, parked classes aside."""

    name: str
    strategy: str = BEST_EFFORT_FIFO
    classes: dict[Hashable, EquivalenceClass] = field(default_factory=dict)
    class_of: dict[str, Hashable] = field(default_factory=dict)  # member key -> its class's shape
    heap: list[tuple] = field(default_factory=list)  # (*best member's entry, class version, shape id)
    _ids: dict[Hashable, int] = field(default_factory=dict)  # the live classes' shapes, by id in the heap
    _next_id: int = 0
    _shapes: dict[int, Hashable] = field(default_factory=dict)
    pop_cycle: int = 0
    queue_inadmissible_cycle: int = -1
    # versions of class entries, never reused (a class deleted and made again must not
    # validate the entries its predecessor left in the heap)
    _versions: int = 0
    # the workload waiting for its preemptions (Kueue's preemptorWorkload), and the generation
    # it was evaluated at: until it is admitted, leaves, or goes back for another reason. A
    # BestEffortFIFO ClusterQueue keeps it at the head (`sticky`)
    preemptor: str | None = None
    preemptor_generation: int = 0
    sticky: str | None = None
    # admission fair sharing orders it by LocalQueue usage first (UsageOrderedQueue)
    by_usage: bool = False
    # workloads parked on their own (a requeue reason Kueue does not bulk-move their equivalents
    # for): the class they left for a class of one, which an unchanged update keeps them out of
    alone: dict[str, Hashable] = field(default_factory=dict)
    # how many of its workloads each namespace has: what a requeue checks the namespaceSelector
    # against before looking at any workload
    namespaces: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.class_of)

    @property
    def parked(self) -> dict[str, Parked]:
        """Every parked workload and why (built on demand: for tests and reports)."""
        return {k: c.parked for c in self.classes.values() if c.parked is not None for k in c.members}

    @property
    def active(self) -> set[str]:
        return {k for c in self.classes.values() if c.parked is None for k in c.members}

    def parked_count(self) -> int:
        return sum(len(c.members) for c in self.classes.values() if c.parked is not None)

    # ------------------------------------------------------------ class heap

    def _shape_id(self, shape: Hashable) -> int:
        sid = self._ids.get(shape)
        if sid is None:
            sid = self._ids[shape] = self._next_id
            self._next_id += 1
            self._shapes[sid] = shape
        return sid

    def _forget_shape(self, shape: Hashable) -> None:
        """A class gone: its id too (without hashing, each workload is a class of its own, and a
        long-lived queue would otherwise keep the shape of every workload it ever held)."""
        sid = self._ids.pop(shape, None)
        if sid is not None:
            del self._shapes[sid]

    def _schedule(self, cls: EquivalenceClass) -> None:
        """(Re)enter the class in the heap under its current first member."""
        self._versions += 1
        cls.version = self._versions
        if cls.parked is not None:
            return
        best = cls.best()
        if best is not None:
            self._enter(cls, (*best, cls.version, self._shape_id(cls.shape)))

    def _enter(self, cls: EquivalenceClass, entry: tuple) -> None:
        heapq.heappush(self.heap, entry)
        if len(self.heap) > 2 * len(self.classes) + COMPACT_SLACK:
            self.heap = self._compacted(self.heap)

    def _valid(self, item: tuple) -> bool:
        """Whether a class entry stands for its class as it is (not parked, not rescheduled)."""
        shape = self._shapes.get(item[-1])
        cls = self.classes.get(shape) if shape is not None else None
        return cls is not None and cls.parked is None and item[-2] == cls.version

    def _compacted(self, heap: list[tuple]) -> list[tuple]:
        """The heap without its stale entries: a pop drops those it meets, but a class parked and
        requeued again and again would otherwise leave one behind each time, deep in the heap."""
        kept = [item for item in heap if self._valid(item)]
        heapq.heapify(kept)
        return kept

    # ------------------------------------------------------------ members

    def entry(self, key: str, order: tuple) -> tuple:
        """A workload's heap entry: its queue order, or first of all when it is sticky."""
        if key == self.sticky:
            return (STICKY_FIRST, *order[1:], key)
        return (*order, key)

    def push(self, key: str, order: tuple, shape: Hashable) -> None:
        """Add (or move) a workload. One joining a parked class is parked with it, as Kueue
        parks a workload whose equivalent was just found inadmissible; one already there,
        unchanged, stays where it is."""
        entry = self.entry(key, order)
        old_shape = self.class_of.get(key)
        if old_shape is not None:
            if self.classes[old_shape].members.get(key) == entry and (
                    old_shape == shape or self.alone.get(key) == shape):
                return
            self.remove(key)
        cls = self.classes.get(shape)
        if cls is None:
            cls = self.classes[shape] = EquivalenceClass(shape)
        before = cls.best()
        cls.add(key, entry)
        self.class_of[key] = shape
        self.namespaces[key.partition("/")[0]] += 1
        if cls.parked is None and (before is None or entry < before):
            self._schedule(cls)

    def forget(self, key: str) -> None:
        """The workload leaves the ClusterQueue (admitted, deleted, moved): it is no longer its
        preemptor either (a head popped for a cycle is only `remove`d: it may come back)."""
        if self.preemptor == key:
            self.preemptor = self.sticky = None
        self.remove(key)

    def alone_shape(self, key: str, shape: Hashable, mark: str = "parked-alone") -> Hashable:
        """The class of one a workload parked (or requeued) on its own moves to."""
        return (mark, key)

    def park_alone(self, key: str, order: tuple, shape: Hashable, parked: Parked) -> None:
        """Park the workload without its equivalents (Kueue records the equivalence hash only for
        the bulk reasons): it leaves its class for one of its own."""
        alone = self.alone_shape(key, shape, PARKED_ALONE)
        self.push(key, order, alone)
        self.park_class(alone, parked)
        self.alone[key] = shape

    def remove(self, key: str) -> None:
        self.alone.pop(key, None)
        shape = self.class_of.pop(key, None)
        if shape is None:
            return
        namespace = key.partition("/")[0]
        self.namespaces[namespace] -= 1
        if not self.namespaces[namespace]:
            del self.namespaces[namespace]
        cls = self.classes[shape]
        was_best = cls.best()
        cls.discard(key)
        if not cls.members:
            del self.classes[shape]
            self._forget_shape(shape)
            return
        if was_best is not None and was_best[-1] == key:
            self._schedule(cls)

    def pop(self) -> str | None:
        self.pop_cycle += 1
        heap = self.heap
        while heap:
            item = heapq.heappop(heap)
            if not self._valid(item):
                continue
            shape = self._shapes[item[-1]]
            cls = self.classes[shape]
            best = cls.best()
            if best is None:
                continue
            key = best[-1]
            self.remove(key)
            if shape in self.classes:
                self._schedule(self.classes[shape])
            return key
        return None

    def position(self, key: str) -> tuple[int, str | None]:
        """(how many waiting workloads not parked come before `key`, the head: the one the next
        cycle pops). Walks the queue: for why-pending, never for a cycle."""
        head: tuple | None = None
        ahead = 0
        mine = None
        shape = self.class_of.get(key)
        if shape is not None:
            mine = self.classes[shape].members.get(key)
        for cls in self.classes.values():
            if cls.parked is not None:
                continue
            best = cls.best()
            if best is not None and (head is None or best < head):
                head = best
            if mine is not None:
                ahead += sum(1 for entry in cls.members.values() if entry < mine)
        return ahead, head[-1] if head is not None else None

    def is_parked(self, key: str) -> Parked | None:
        shape = self.class_of.get(key)
        return None if shape is None else self.classes[shape].parked

    def shape_of(self, key: str) -> Hashable | None:
        return self.class_of.get(key)

    # ------------------------------------------------------------ parking

    def park_class(self, shape: Hashable, parked: Parked) -> int:
        """Park the class (Kueue's bulk move); how many members it has."""
        cls = self.classes.get(shape)
        if cls is None:
            return 0
        cls.parked = parked
        self._versions += 1
        cls.version = self._versions
        return len(cls.members)

    def members_of(self, shape: Hashable) -> set[str]:
        """The keys of the class's members (from the dict's stored hashes: no key is read)."""
        cls = self.classes.get(shape)
        return set(cls.members) if cls is not None else set()

    def unpark_all(self, *, topology_only: bool = False, keep: Collection[Hashable] = ()) -> int:
        """Parked classes back into the heap (QueueInadmissibleWorkloads); with `topology_only`,
        only those whose TAS placement failed; the classes of `keep` stay parked."""
        if not topology_only:
            self.queue_inadmissible_cycle = self.pop_cycle
        moved = 0
        for cls in self.classes.values():
            if cls.parked is None or (topology_only and not cls.parked.topology_blocked) or cls.shape in keep:
                continue
            cls.parked = None
            self._schedule(cls)
            moved += len(cls.members)
        return moved


@dataclass
class UsageOrderedQueue(ClusterQueueQueue):
    """A ClusterQueue that admission fair sharing orders by its LocalQueues' usage first, then
    as any other. Its classes are kept per LocalQueue (a shape is (equivalence hash, LocalQueue)),
    each LocalQueue's classes in a heap of their own, and `heap` holds the LocalQueues by
    (usage, their first workload): a LocalQueue's usage changes one entry, however many
    workloads wait in it (Kueue rebuilds the whole heap). Equivalent workloads of different
    LocalQueues are parked and requeued together, as Kueue's bulk moves go by hash alone."""

    by_usage: bool = True
    usage_of: Callable[[str], float] = lambda _lq: 0.0  # LocalQueue -> its usage now
    local_heaps: dict[str, list[tuple]] = field(default_factory=dict)  # (*best member's entry, version, sid)
    local_versions: dict[str, int] = field(default_factory=dict)
    _local_ids: dict[str, int] = field(default_factory=dict)
    _local_names: dict[int, str] = field(default_factory=dict)
    siblings: dict[Hashable, set[Hashable]] = field(default_factory=dict)  # hash -> its classes' shapes

    def _enter(self, cls: EquivalenceClass, entry: tuple) -> None:
        """Into its LocalQueue's heap, and the LocalQueue into the ClusterQueue's anew."""
        local = cls.shape[1]
        heap = self.local_heaps.setdefault(local, [])
        heapq.heappush(heap, entry)
        if len(heap) > 2 * len(self.classes) + COMPACT_SLACK:
            self.local_heaps[local] = self._compacted(heap)
        self.usage_changed(local)

    def _local_top(self, local: str) -> tuple | None:
        """The LocalQueue's first class entry (stale ones dropped on the way)."""
        heap = self.local_heaps.get(local)
        while heap:
            item = heap[0]
            if self._valid(item):
                return item
            heapq.heappop(heap)
        return None

    def usage_changed(self, local: str) -> None:
        """(Re)enter the LocalQueue under its usage now and its first workload."""
        self._versions += 1
        self.local_versions[local] = self._versions
        top = self._local_top(local)
        if top is None:
            return
        lid = self._local_ids.get(local)
        if lid is None:
            lid = self._local_ids[local] = len(self._local_ids)
            self._local_names[lid] = local
        heapq.heappush(self.heap, (self.usage_of(local), *top, self._versions, lid))
        if len(self.heap) > 2 * len(self.local_versions) + COMPACT_SLACK:
            self.heap = [item for item in self.heap if item[-2] == self.local_versions[self._local_names[item[-1]]]]
            heapq.heapify(self.heap)

    def push(self, key: str, order: tuple, shape: Hashable) -> None:
        if shape not in self.classes:
            # a workload whose equivalents (of any LocalQueue) are parked is parked with them
            parked = next((self.classes[s].parked for s in self.siblings.get(shape[0], ())
                           if self.classes[s].parked is not None), None)
            self.classes[shape] = EquivalenceClass(shape, parked=parked)
            self.siblings.setdefault(shape[0], set()).add(shape)
        super().push(key, order, shape)

    def remove(self, key: str) -> None:
        shape = self.class_of.get(key)
        super().remove(key)
        if shape is not None and shape not in self.classes:
            self._forget_class(shape)

    def _forget_class(self, shape: Hashable) -> None:
        same = self.siblings.get(shape[0])
        if same is not None:
            same.discard(shape)
            if not same:
                del self.siblings[shape[0]]

    def pop(self) -> str | None:
        self.pop_cycle += 1
        heap = self.heap
        while heap:
            item = heapq.heappop(heap)
            local = self._local_names[item[-1]]
            if item[-2] != self.local_versions.get(local):
                continue
            top = self._local_top(local)
            if top is None:
                continue
            if item[1:-2] != top:
                # its first class was parked or left since: it sorted too early, never too late;
                # back under the one first now, it comes up again in its turn
                self.usage_changed(local)
                continue
            heapq.heappop(self.local_heaps[local])  # the class comes back with its next member
            shape = self._shapes[top[-1]]
            key = self.classes[shape].best()[-1]
            self.remove(key)
            if shape not in self.classes:
                self.usage_changed(local)  # the LocalQueue's next class, if any
            return key
        return None

    def position(self, key: str) -> tuple[int, str | None]:
        head: tuple | None = None
        ahead = 0
        shape = self.class_of.get(key)
        mine = (self.usage_of(shape[1]), self.classes[shape].members[key]) if shape is not None else None
        usage: dict[str, float] = {}
        for cls in self.classes.values():
            if cls.parked is not None:
                continue
            local = cls.shape[1]
            if local not in usage:
                usage[local] = self.usage_of(local)
            best = cls.best()
            if best is not None and (head is None or (usage[local], best) < head):
                head = (usage[local], best)
            if mine is not None:
                ahead += sum(1 for entry in cls.members.values() if (usage[local], entry) < mine)
        return ahead, head[1][-1] if head is not None else None

    def park_class(self, shape: Hashable, parked: Parked) -> int:
        return sum(super(UsageOrderedQueue, self).park_class(s, parked) for s in list(self.siblings.get(shape[0], ())))

    def members_of(self, shape: Hashable) -> set[str]:
        out: set[str] = set()
        for s in self.siblings.get(shape[0], ()):
            out |= super().members_of(s)
        return out

    def alone_shape(self, key: str, shape: Hashable, mark: str = "parked-alone") -> Hashable:
        return ((mark, key), shape[1])

    def local_queue_of(self, key: str) -> str | None:
        shape = self.class_of.get(key)
        return shape[1] if shape is not None else None


@dataclass(slots=True)
class SecondPassEntry:
    ready_at: datetime | None  # None: ready now (found needing a second pass at the cold start)
    iteration: int = 1
    # what its last failed node replacement was told, so that a retry failing the same way adds
    # nothing to its history
    failure: str = ""


@dataclass(slots=True)
class Orphan:
    """A pending workload whose LocalQueue or ClusterQueue does not exist."""

    cluster_queue: str
    message: str
    reported: bool = False


class QueueManager:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.queues: dict[str, ClusterQueueQueue] = {}
        self.assigned: dict[str, str] = {}  # pending workload -> ClusterQueue it waits in
        self.orders: dict[str, tuple] = {}  # pending workload -> its queue-order key
        self.orphans: dict[str, Orphan] = {}
        # what each placed workload looked like when last placed (`update_signature`)
        self.seen: dict[str, tuple] = {}
        self.second_pass: dict[str, SecondPassEntry] = {}
        # per pending workload, where its flavor scan resumes (Kueue keeps it in the queue manager's
        # workload info, in memory: it is lost on restart, and the scan starts from the first flavor)
        self.scan_progress: dict[str, FlavorScanProgress] = {}
        self.scheduling_cycle = 0  # cycles started so far (Kueue's scheduler counts them)
        # pending workloads in their requeue backoff (status.requeueState.requeueAt): kept out
        # of their queue until then; `now` is the pass's clock (None before the first pass)
        self.backoff: dict[str, datetime] = {}
        self.now: datetime | None = None
        # ConcurrentAdmission parents: pending, kept off their queue, and routed again with the
        # others when queues change (a parent whose queue goes missing is an orphan like any other)
        self.kept_off: set[str] = set()
        # the inactive ClusterQueues the workloads were last routed by (see scheduler.queue_status)
        self.inactive_seen: dict[str, object] = dict(state.inactive_cluster_queues)

    # ------------------------------------------------------------ following the cache

    def sync(self) -> dict[str, Workload | None]:
        """Take the cache's changes: place changed workloads, requeue what the changes may
        have made admissible. Returns the workloads that changed (None: deleted)."""
        changes = self.state.take_changes()
        if not changes.any():
            return {}
        inactive = self.state.inactive_cluster_queues
        if changes.queues_changed or inactive != self.inactive_seen:
            # a ClusterQueue that became active or inactive routes its waiting workloads anew
            self.inactive_seen = dict(inactive)
            self._sync_queues()
        preserve = self.state.gates.FlavorFungibilityPreserveScanProgress
        for key, wl in changes.workloads.items():
            if not preserve:
                # the queue manager's workload info is rebuilt on every update, and its scan progress
                # with it; with the gate it is carried over (dropped at nomination if the shape changed)
                self.scan_progress.pop(key, None)
            self.place(key, wl)
        self._requeue(changes)
        if changes.usage_changed:
            self._reorder(changes.usage_changed)
        return changes.workloads

    def _reorder(self, local_queues: Iterable[str]) -> None:
        """LocalQueues' usage changed: each takes its new place in the ClusterQueues ordered by it."""
        by_usage = [q for q in self.queues.values() if isinstance(q, UsageOrderedQueue)]
        for lq_key in local_queues:
            for q in by_usage:
                if lq_key in q.local_heaps:
                    q.usage_changed(lq_key)

    def release_backoff(self, now: datetime) -> list[str]:
        """Queue the workloads whose requeue backoff ran out by `now`."""
        self.now = now
        due = [key for key, at in self.backoff.items() if at <= now]
        for key in due:
            del self.backoff[key]
            self.place(key, self.state.workload(key))
        return due

    def _sync_queues(self) -> None:
        """ClusterQueues or LocalQueues changed: queues for new ClusterQueues, strategies
        updated, every pending workload routed again (rare: definitions change seldom)."""
        state = self.state
        for name, cq in state.cluster_queues.items():
            q = self.queues.get(name)
            by_usage = state.orders_by_local_queue_usage(cq)
            if q is None or q.by_usage != by_usage:
                # made afresh: every waiting workload is placed again below
                self.queues[name] = (UsageOrderedQueue(name, cq.queueing_strategy, usage_of=state.local_queue_usage)
                                     if by_usage else ClusterQueueQueue(name, cq.queueing_strategy))
            else:
                q.strategy = cq.queueing_strategy
        for name in [n for n in self.queues if n not in state.cluster_queues]:
            del self.queues[name]
        # keep the ClusterQueues' definition order
        self.queues = {n: self.queues[n] for n in state.cluster_queues}
        pending = [*self.assigned, *self.orphans, *self.backoff, *self.kept_off]
        self.assigned = {k: v for k, v in self.assigned.items() if v in self.queues}
        for key in pending:
            wl = state.workload(key)
            self.place(key, wl)

    def place(self, key: str, wl: Workload | None) -> None:
        """Put a workload where it belongs now: its ClusterQueue's heap (or parked, if it was
        parked and has not changed), an orphan, kept off (a ConcurrentAdmission parent), or
        nowhere (not pending)."""
        self.kept_off.discard(key)
        if wl is None or not is_pending(wl):
            self.remove(key)
            self.backoff.pop(key, None)
            if wl is None:
                self.second_pass.pop(key, None)
                self.scan_progress.pop(key, None)
            return
        if wl.requeue_at is not None and (self.now is None or wl.requeue_at > self.now):
            self.remove(key)
            self.backoff[key] = wl.requeue_at
            return
        self.backoff.pop(key, None)
        blocked = waiting_block(self.state, wl)
        if blocked is not None:
            # its LocalQueue or ClusterQueue is missing, stopped or inactive: Kueue's workload
            # controller marks it inadmissible, and the scheduler takes no head from there
            self._orphan(key, *blocked)
            return
        lq = self.state.local_queues[wl.local_queue_key]
        if lq.cluster_queue not in self.queues:
            self._orphan(key, lq.cluster_queue, f"ClusterQueue {lq.cluster_queue} doesn't exist")
            return
        self.orphans.pop(key, None)
        if self.state.waits_as_parent(wl):
            self.remove(key)  # Kueue keeps a parent off the heap: its variants are what is scheduled
            self.kept_off.add(key)
            return
        target = lq.cluster_queue
        current = self.assigned.get(key)
        if current is not None and current != target and current in self.queues:
            self.queues[current].forget(key)
        order = queue_order_key(self.state, wl)
        self.assigned[key] = target
        self.orders[key] = order
        q = self.queues[target]
        shape = self.queue_shape(q, wl)
        seen = self.seen.get(key)
        self.seen[key] = now_seen = update_signature(wl)
        q.push(key, order, shape)
        if seen is not None and seen != now_seen and q.is_parked(key) is not None:
            # Kueue's PushOrUpdate: a parked workload whose spec, reclaimable pods, Evicted or
            # Requeued condition changed goes back to the heap, without its equivalents
            q.push(key, order, q.alone_shape(key, shape, ACTIVE_ALONE))

    def queue_shape(self, q: ClusterQueueQueue, wl: Workload) -> Hashable:
        """The workload's class in `q`: its equivalence class, of its LocalQueue in a queue ordered
        by LocalQueue usage."""
        shape = self.shape(wl)
        return (shape, wl.local_queue_key) if q.by_usage else shape

    def shape(self, wl: Workload) -> Hashable:
        """The workload's equivalence class. One with a failed admission check is a class of its
        own: nomination turns it away for its checks, which say nothing of its equivalents (Kueue
        moves none of them with it); once its checks are set back it rejoins its class."""
        if wl.admission_checks and has_failed_checks(wl):
            return (FAILED_CHECKS, wl.key)
        return equivalence_hash(self.state, wl) if self.state.gates.SchedulingEquivalenceHashing else wl.key

    def remove(self, key: str) -> None:
        cq = self.assigned.pop(key, None)
        self.orders.pop(key, None)
        self.seen.pop(key, None)
        if cq is not None and cq in self.queues:
            self.queues[cq].forget(key)
        self.orphans.pop(key, None)

    def _orphan(self, key: str, cq: str, message: str) -> None:
        current = self.assigned.pop(key, None)
        if current is not None and current in self.queues:
            self.queues[current].forget(key)
        self.orders.pop(key, None)
        old = self.orphans.get(key)
        if old is None or old.message != message:
            self.orphans[key] = Orphan(cq, message)

    # ------------------------------------------------------------ requeueing

    def _requeue(self, changes: Changes) -> None:
        if changes.requeue_all:
            for name, q in self.queues.items():
                if not self._under_cycle(name):
                    self._unpark(q)
            return
        names: set[str] = set()
        for cq in changes.cluster_queues:
            names |= self.cohort_tree_queues(cq)
        if changes.flavors:
            names |= self.queues_using(changes.flavors)
        for name in names:
            q = self.queues.get(name)
            if q is not None and not self._under_cycle(name):
                self._unpark(q)
        if changes.tas_released:
            # TAS capacity freed on nodes every ClusterQueue of the flavor shares: what waits for
            # topology (not quota) elsewhere may fit now, whatever its cohort
            for name in self.queues_using(changes.tas_released) - names:
                q = self.queues.get(name)
                if q is not None and not self._under_cycle(name):
                    self._unpark(q, topology_only=True)

    def _under_cycle(self, name: str) -> bool:
        """Kueue requeues nothing of a ClusterQueue whose Cohorts form a cycle (it would be
        turned away again); breaking the cycle changes a Cohort, which requeues it."""
        cq = self.state.cluster_queues.get(name)
        return cq is not None and self.state.quota.cycle_of(cq) is not None

    def _unpark(self, q: ClusterQueueQueue, *, topology_only: bool = False) -> None:
        """QueueInadmissibleWorkloads on one ClusterQueue: its parked classes back in the heap, and
        the workloads parked alone back in their equivalence classes; those of a namespace it
        does not select stay parked."""
        q.unpark_all(topology_only=topology_only, keep=self._held_by_namespace(q, topology_only))
        for key, shape in list(q.alone.items()):
            alone = q.classes.get(q.alone_shape(key, shape, PARKED_ALONE))
            if alone is not None and alone.parked is None:
                del q.alone[key]
                q.push(key, self.orders[key], shape)

    def _held_by_namespace(self, q: ClusterQueueQueue, topology_only: bool) -> set[Hashable]:
        """Kueue's QueueInadmissibleWorkloads leaves parked a workload whose Namespace is missing or
        not selected by the ClusterQueue's namespaceSelector (nomination would turn it away
        again). Each such parked workload is moved to a parked class of its own, whose shape is
        returned, so that its equivalents of other namespaces go back without it. Namespaces are
        known only when the input lists them (the admissibility check reads them alike)."""
        state = self.state
        cq = state.cluster_queues.get(q.name)
        if not state.namespaces or cq is None:
            return set()
        holding = {namespace for namespace in q.namespaces if state.namespace_hold(namespace, cq)}
        if not holding:  # the common case: no workload is looked at
            return set()
        kept: set[Hashable] = set()
        for cls in list(q.classes.values()):
            parked = cls.parked
            if parked is None or (topology_only and not parked.topology_blocked):
                continue
            for key in [k for k in cls.members if k.partition("/")[0] in holding]:
                original = q.alone.get(key)
                if original is not None and cls.shape == q.alone_shape(key, original, PARKED_ALONE):
                    kept.add(cls.shape)
                    continue
                q.park_alone(key, self.orders[key], cls.shape, parked)
                kept.add(q.alone_shape(key, cls.shape, PARKED_ALONE))
        return kept

    def queues_using(self, flavors: set[str]) -> set[str]:
        return {name for name, cq in self.state.cluster_queues.items() if flavors & set(cq.flavor_names())}

    def requeue_inadmissible(self, cluster_queues: Iterable[str] | None = None) -> None:
        """QueueInadmissibleWorkloads: the ClusterQueues' (or every) parked workloads back to the heaps."""
        if cluster_queues is None:
            for name, q in self.queues.items():
                if not self._under_cycle(name):
                    self._unpark(q)
            return
        for name in cluster_queues:
            for member in self.cohort_tree_queues(name):
                if member in self.queues and not self._under_cycle(member):
                    self._unpark(self.queues[member])

    def cohort_tree_queues(self, cq_name: str) -> set[str]:
        """Every ClusterQueue in the cohort tree of `cq_name` (just itself without a cohort)."""
        state = self.state
        cq = state.cluster_queues.get(cq_name)
        if cq is None or not cq.cohort:
            return {cq_name}
        tree = state.quota
        node = tree.queues.get(cq_name)
        if node is None:
            return {cq_name}
        root = node
        seen = set()
        while root.parent is not None and id(root) not in seen:
            seen.add(id(root))
            root = root.parent
        out: set[str] = set()
        stack = [root]
        while stack:
            n = stack.pop()
            if n.is_cohort:
                stack.extend(n.children)
            else:
                out.add(n.name)
        return out

    # ------------------------------------------------------------ a cycle's heads

    def next_scheduling_cycle(self) -> int:
        self.scheduling_cycle += 1
        return self.scheduling_cycle

    def heads(self) -> list[tuple[Workload, ClusterQueue]]:
        """Pop the head of every ClusterQueue, in queue order across ClusterQueues."""
        out = []
        state = self.state
        for name, q in self.queues.items():
            cq = state.cluster_queues.get(name)
            if cq is None:
                continue
            while True:
                key = q.pop()
                if key is None:
                    break
                wl = state.workload(key)
                if wl is None or not is_pending(wl):
                    self.assigned.pop(key, None)
                    q.forget(key)
                    continue
                out.append((wl, cq))
                break
        out.sort(key=lambda item: self.orders.get(item[0].key) or queue_order_key(state, item[0]))
        return out

    def requeue(self, wl: Workload, cq_name: str, reason: str, representative: object = None, *,
                under_hold: bool = False, topology_blocked: bool = False, keys: bool = True,
                ) -> tuple[bool, set[str], int]:
        """A head that was not admitted goes back: to the heap (True) or parked (False); the
        keys of the equivalent workloads parked with it (when `keys`: a class can hold
        thousands), and how many they are."""
        q = self.queues.get(cq_name)
        key = wl.key
        if q is None or not is_pending(wl) or self.assigned.get(key) != cq_name:
            return True, set(), 0
        order = self.orders.get(key) or queue_order_key(self.state, wl)
        shape = self.queue_shape(q, wl)
        self._follow_preemptor(q, wl, reason)
        q.push(key, order, shape)
        if q.is_parked(key) is not None:
            return False, set(), 0  # its class was parked meanwhile
        # Kueue's RequeueIfNotPresent: StrictFIFO keeps every head but a namespace mismatch
        immediate = reason in (REQUEUE_IMMEDIATE, REQUEUE_PENDING_PREEMPTION) or (
            q.strategy == STRICT_FIFO and reason != REQUEUE_NAMESPACE_MISMATCH)
        if immediate or q.queue_inadmissible_cycle >= q.pop_cycle:
            return True, set(), 0
        # Kueue bulk-moves the equivalent workloads only for BestEffortFIFO and these reasons;
        # without hashing every workload is a class of its own
        parked = Parked(key, representative, under_hold, topology_blocked)
        if not (q.strategy == BEST_EFFORT_FIFO and reason in BULK_REASONS):
            q.park_alone(key, order, shape, parked)
            return False, set(), 0
        members = q.park_class(shape, parked)
        if not keys:
            return False, set(), members - 1
        moved = q.members_of(shape)
        moved.discard(key)
        return False, moved, len(moved)

    def _follow_preemptor(self, q: ClusterQueueQueue, wl: Workload, reason: str) -> None:
        """Kueue's preemptor workload: a head going back to wait for its preemptions becomes the
        ClusterQueue's preemptor, and the sticky one of a BestEffortFIFO ClusterQueue (the one
        before it goes back to its place); the preemptor going back for any other reason is
        one no more."""
        key = wl.key
        if reason == REQUEUE_PENDING_PREEMPTION:
            before = q.sticky
            q.preemptor, q.preemptor_generation = key, wl.generation
            q.sticky = key if q.strategy == BEST_EFFORT_FIFO else None
            if before is not None and before != key and before in q.class_of:
                q.push(before, self.orders[before], q.class_of[before])
        elif q.preemptor == key:
            q.preemptor = q.sticky = None

    def is_preemptor(self, wl: Workload, cq_name: str) -> bool:
        """Whether `wl` waits for its preemptions in `cq_name`, unchanged since (Kueue's
        ClusterQueue.IsPreemptor: the same generation)."""
        q = self.queues.get(cq_name)
        return q is not None and q.preemptor == wl.key and q.preemptor_generation == wl.generation

    def sticky_heads(self) -> dict[str, str]:
        """ClusterQueue -> the workload kept at its head while its preemptions complete."""
        return {name: q.sticky for name, q in self.queues.items() if q.sticky is not None}

    def restore_sticky(self, heads: Mapping[str, str]) -> None:
        """Keep at their heads the workloads a state before this one kept there (`sticky_heads`,
        as the database recorded it), those still waiting in that BestEffortFIFO ClusterQueue:
        a restart or a new leader carries on with the same heads."""
        for name, key in heads.items():
            q = self.queues.get(name)
            wl = self.state.workload(key)
            if q is not None and q.strategy == BEST_EFFORT_FIFO and self.assigned.get(key) == name and wl is not None:
                self._follow_preemptor(q, wl, REQUEUE_PENDING_PREEMPTION)
                q.push(key, self.orders[key], q.class_of[key])

    def pending_count(self) -> int:
        return sum(len(q) for q in self.queues.values()) + len(self.orphans) + len(self.backoff)

    def parked_count(self) -> int:
        return sum(q.parked_count() for q in self.queues.values())

    def is_parked(self, key: str) -> bool:
        return self.parked_info(key) is not None

    def parked_info(self, key: str) -> Parked | None:
        cq = self.assigned.get(key)
        if cq is None or cq not in self.queues:
            return None
        return self.queues[cq].is_parked(key)

    def unreported_orphans(self) -> list[tuple[str, Orphan]]:
        order = self.state.order
        out = sorted(((k, o) for k, o in self.orphans.items() if not o.reported), key=lambda i: order.get(i[0], 0))
        for _, o in out:
            o.reported = True
        return out

    # ------------------------------------------------------------ second pass

    def queue_second_pass(self, key: str, now: datetime | None, iteration: int = 0, failure: str = "") -> None:
        """Queue a workload for its next second pass: after the backoff of `iteration` + 1
        tries (now, when `now` is None: the cold start's workloads)."""
        it = iteration + 1
        ready = None if now is None else later(now, second_pass_delay(it))
        self.second_pass[key] = SecondPassEntry(ready, it, failure)

    def second_pass_ready(self, now: datetime) -> list[str]:
        """Workloads whose second pass is due, taken off the queue."""
        ready = [k for k, e in self.second_pass.items() if e.ready_at is None or e.ready_at <= now]
        return ready

    def second_pass_iteration(self, key: str) -> int:
        entry = self.second_pass.get(key)
        return entry.iteration if entry is not None else 0

    def second_pass_failure(self, key: str) -> str:
        entry = self.second_pass.get(key)
        return entry.failure if entry is not None else ""

    def second_pass_done(self, key: str) -> None:
        self.second_pass.pop(key, None)

    def next_second_pass(self) -> datetime | None:
        times = [e.ready_at for e in self.second_pass.values() if e.ready_at is not None]
        return min(times) if times else None
