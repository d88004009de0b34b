"""The PATCH bodies that carry the engine's decisions (ClusterWrite payloads) to the cluster.

Each body is complete for the fields it owns, so sending it twice leaves the object as
sending it once did:

* Workload status, as a JSON merge patch of the status subresource: ``conditions`` (the
  whole list the engine decided), ``admission`` with every PodSet's topologyAssignment,
  and ``unhealthyNodes``; an admission or unhealthyNodes the decision does not have is
  sent as null, which removes it (an eviction clears the admission).
* Pod ungate, as a strategic merge patch of the pod: the ``kueue.x-k8s.io/topology``
  scheduling gate is deleted by name (other gates stay) and the node selector is set.
* Pod failure, as a strategic merge patch of the pod's status: phase Failed and the
  TerminatedByKueue condition (conditions merge by type).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scheduler.codec import decode_assignment
from scheduler.errors import InputError
from scheduler.model import TOPOLOGY_GATE


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _v1beta1_admission(admission: Mapping[str, Any]) -> dict[str, Any]:
    """The admission with each topologyAssignment in v1beta1's form (levels + domains)."""
    out = copy.deepcopy(dict(admission))
    for psa in out.get("podSetAssignments") or []:
        encoded = psa.get("topologyAssignment")
        if encoded and "slices" in encoded:
            try:
                psa["topologyAssignment"] = decode_assignment(encoded).to_decoded_json()
            except InputError:
                continue  # sent as it is: the API server names what is wrong with it
    return out


def workload_status_patch(payload: Mapping[str, Any], *, version: str, decided_at: datetime) -> dict[str, Any]:
    """Merge patch of a Workload's status subresource from a WorkloadStatus write.

    `version` is the Workload API version the server serves (v1beta2, or v1beta1 whose
    topologyAssignment has no slices); conditions without a lastTransitionTime, which the
    API requires, get `decided_at`.
    """
    status = payload.get("status") or {}
    conditions = []
    for condition in status.get("conditions") or []:
        condition = dict(condition)
        if not condition.get("lastTransitionTime"):
            condition["lastTransitionTime"] = _time(decided_at)
        conditions.append(condition)
    admission = status.get("admission") or None
    if admission is not None and version == "v1beta1":
        admission = _v1beta1_admission(admission)
    return {"status": {
        "conditions": conditions,
        "admission": admission,
        "unhealthyNodes": list(status.get("unhealthyNodes") or []) or None,
    }}


def pod_ungate_patch(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Strategic merge patch of a pod: remove only the topology gate, set the node selector."""
    return {"spec": {
        "schedulingGates": [{"$patch": "delete", "name": TOPOLOGY_GATE}],
        "nodeSelector": dict(payload.get("nodeSelector") or {}),
    }}


def pod_fail_patch(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Strategic merge patch of a pod's status: phase Failed and the payload's conditions."""
    status = payload.get("status") or {}
    return {"status": {
        "phase": status.get("phase") or "Failed",
        "conditions": [dict(c) for c in status.get("conditions") or []],
    }}


def local_queue_status_patch(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch of a LocalQueue's status subresource: only its admission fair sharing
    status (the rest is Kueue's LocalQueue controller's)."""
    afs = ((payload.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
    return {"status": {"fairSharing": {"admissionFairSharingStatus": {
        "consumedResources": dict(afs.get("consumedResources") or {}),
        "lastUpdate": afs.get("lastUpdate")}}}}
