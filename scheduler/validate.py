"""Checks that need more than one object: admitted topology assignments stated in the levels
of their flavor's Topology. (A cycle of Cohorts is no input error: Kueue keeps the objects and
holds the ClusterQueues under it inactive, as the engine does; see `scheduler.quota`.)

`parse` checks each object on its own; these run once every object is read. The same
checks serve the command line (each is an error there) and the service's mirror (which
marks the offending object invalid).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.errors import InputError
from scheduler.model import Workload
from scheduler.parse import ParsedObjects


def _in_order(assigned: tuple[str, ...], levels: tuple[str, ...]) -> bool:
    # Kueue stores all levels, or only the lowest when that is kubernetes.io/hostname; an
    # assignment at some levels of the Topology, in its order, is read all the same
    remaining = iter(levels)
    return bool(assigned) and all(level in remaining for level in assigned)


def assignment_level_error(wl: Workload, flavor_levels: Mapping[str, Sequence[str]]) -> InputError | None:
    """A topologyAssignment whose levels are not levels of its flavor's Topology, in its
    order (a flavor or Topology not known is no error: it may come later)."""
    if wl.admission is None:
        return None
    for i, psa in enumerate(wl.admission.pod_set_assignments):
        ta = psa.topology_assignment
        if ta is None:
            continue
        for flavor in dict.fromkeys(psa.flavors.values()):
            levels = flavor_levels.get(flavor)
            if levels is not None and not _in_order(tuple(ta.levels), tuple(levels)):
                return InputError(
                    f"levels {list(ta.levels)} are not among the levels {list(levels)} of flavor {flavor!r}'s Topology",
                    field=f"status.admission.podSetAssignments[{i}].topologyAssignment.levels",
                    obj=f"Workload/{wl.namespace}/{wl.name}")
    return None


def flavor_topology_levels(parsed: ParsedObjects) -> dict[str, tuple[str, ...]]:
    topologies = {t.name: t.levels for t in parsed.topologies}
    return {f.name: topologies[f.topology_name] for f in parsed.flavors
            if f.topology_name and f.topology_name in topologies}


def cross_object_errors(parsed: ParsedObjects) -> list[InputError]:
    """Every cross-object problem of a set of files, in the order read."""
    errors: list[InputError] = []
    levels = flavor_topology_levels(parsed)
    for wl in parsed.workloads:
        error = assignment_level_error(wl, levels)
        if error is not None:
            label = error.obj
            errors.append(error.located(file=parsed.origins.get(label, "")))
    return errors
