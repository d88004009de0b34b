"""Kubernetes/Kueue JSON -> `scheduler.model`, validating as it goes.

Every error names the file, the object (`Kind/namespace/name`) and the field path, e.g.
`cluster.yaml: Workload/ml/train: spec.podSets[0].count: must be >= 0, got -1`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import orjson

from scheduler.errors import InputError
from scheduler.limits import MAX_INT32, MAX_INT64, MIN_INT32, MIN_INT64, HugeInt
from scheduler.model import (
    LABEL_SELECTOR_OPERATORS,
    STOP_HOLD,
    STOP_HOLD_AND_DRAIN,
    STOP_NONE,
    Admission,
    AdmissionCheck,
    AdmissionCheckState,
    AdmissionCheckStrategyRule,
    ClusterQueue,
    Cohort,
    Condition,
    FlavorQuotas,
    LocalQueue,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodSet,
    PodSetAssignment,
    PodSetUpdate,
    PodSpecInfo,
    PreferredTerm,
    Requirement,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    SliceConstraint,
    Taint,
    Toleration,
    Topology,
    TopologyRequest,
    Workload,
    WorkloadPriorityClass,
    leader_of_pair,
)
from scheduler.quantity import PODS, QuantityError, request_value, resource_value, to_fraction

KUEUE_GROUP = "kueue.x-k8s.io"
MAX_TOPOLOGY_LEVELS = 8

# Pod template annotations Kueue's job integrations translate into a PodSet's topologyRequest.
ANNOTATION_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
ANNOTATION_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
ANNOTATION_SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
ANNOTATION_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
ANNOTATION_GROUP = "kueue.x-k8s.io/podset-group-name"
# KEP-2724's multi-layer slices: a JSON list of {"topology": LEVEL, "size": PODS}, outermost first
ANNOTATION_SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
ANNOTATIONS_TOPOLOGY = (ANNOTATION_REQUIRED, ANNOTATION_PREFERRED, ANNOTATION_UNCONSTRAINED, ANNOTATION_SLICE_TOPOLOGY,
                        ANNOTATION_SLICE_SIZE, ANNOTATION_GROUP, ANNOTATION_SLICE_LAYERS)
MAX_SLICE_LAYERS = 3
# what Go's strconv.ParseBool reads, as Kueue reads the unconstrained annotation
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
# how long the job is expected to run once admitted (scheduler.runtimes; not a Kueue annotation)
EXPECTED_RUNTIME = "kueue.x-k8s.io/expected-runtime"

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_POD_SETS = 8  # a Workload's PodSets at most (Kueue's CRD)
MAX_FLAVOR_ENTRIES = 8  # a ResourceFlavor's nodeLabels, nodeTaints and tolerations at most (Kueue's CRD)
_TOLERATION_OPERATORS = ("Equal", "Exists", "Gt", "Lt")
_TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
_SELECTOR_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


# ---------------------------------------------------------------- field access


class Where:
    """Where a value sits: the object it belongs to and the field path inside it.

    Made for every field read and needed only for an error, so a step costs one small
    object and the path is spelled out only when asked for."""

    __slots__ = ("_key", "_parent", "obj")

    def __init__(self, obj: str, path: str = "") -> None:
        self.obj = obj
        self._parent: Where | None = None
        self._key: str | int = path

    def at(self, key: str | int) -> Where:
        step = _new_where(Where)
        step.obj = self.obj
        step._parent = self
        step._key = key
        return step

    @property
    def path(self) -> str:
        keys: list[str | int] = []
        node: Where | None = self
        while node is not None:
            keys.append(node._key)
            node = node._parent
        out = ""
        for key in reversed(keys):
            if isinstance(key, int):
                out = f"{out}[{key}]"
            elif key:
                out = f"{out}.{key}" if out else key
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Where) and (self.obj, self.path) == (other.obj, other.path)

    def __hash__(self) -> int:
        return hash((self.obj, self.path))

    def __repr__(self) -> str:
        return f"Where({self.obj!r}, {self.path!r})"

    def error(self, reason: str) -> InputError:
        return InputError(reason, field=self.path, obj=self.obj)


_new_where = object.__new__


def _is_mapping(value: Any) -> bool:
    # a dict is by far the common case; the ABC check behind isinstance(x, Mapping) costs more
    return type(value) is dict or isinstance(value, Mapping)


def _type_name(value: Any) -> str:
    if type(value) is HugeInt:
        return repr(value)
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def mapping(d: Any, key: str, where: Where, *, required: bool = False) -> Mapping:
    value = d.get(key)
    if value is None:
        if required:
            raise where.at(key).error("is required")
        return {}
    if not _is_mapping(value):
        raise where.at(key).error(f"must be a mapping, got {_type_name(value)}")
    return value


def sequence(d: Any, key: str, where: Where) -> list:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.at(key).error(f"must be a list, got {_type_name(value)}")
    return value


def mapping_entries(d: Any, key: str, where: Where) -> Iterator[tuple[Mapping, Where]]:
    """The entries of a list of objects under `key`, each with where it stands; an entry that is
    not a mapping is an error."""
    for i, entry in enumerate(sequence(d, key, where)):
        at = where.at(key).at(i)
        if not _is_mapping(entry):
            raise at.error(f"must be a mapping, got {_type_name(entry)}")
        yield entry, at


def string(d: Any, key: str, where: Where, *, required: bool = False, default: str = "") -> str:
    value = d.get(key)
    if value is None:
        if required:
            raise where.at(key).error("is required")
        return default
    if not isinstance(value, str):
        raise where.at(key).error(f"must be a string, got {_type_name(value)}")
    if required and not value:
        raise where.at(key).error("must not be empty")
    return value


def _plain_string(value: Any, default: str = "") -> str | None:
    """`string`'s value for a field that is a string or absent (null), None for anything else
    (which `string` reports as an error)."""
    if value is None:
        return default
    return value if type(value) is str else None


def optional_string(d: Any, key: str, where: Where) -> str | None:
    return string(d, key, where) if d.get(key) is not None else None


_INTEGER_TEXT = re.compile(r"[+-]?\d{1,30}", re.ASCII)


def integer(d: Any, key: str, where: Where, *, default: int | None = None, minimum: int | None = None,
            maximum: int = MAX_INT64) -> int | None:
    """An integer field, within Kubernetes' bounds: int64 unless `maximum` says less
    (`MAX_INT32` for counts)."""
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
            value = int(value)
        elif type(value) is HugeInt:
            raise where.at(key).error(f"must be at most {maximum}, got {value!r}")
        else:
            raise where.at(key).error(f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise where.at(key).error(f"must be >= {minimum}, got {value}")
    if value > maximum:
        raise where.at(key).error(f"must be at most {maximum}, got {value}")
    if value < MIN_INT64:
        raise where.at(key).error(f"must be at least {MIN_INT64}, got {value}")
    return value


def count(d: Any, key: str, where: Where, *, default: int | None = None, minimum: int | None = 0) -> int | None:
    """A count of pods (or of anything else): int32, as in Kubernetes and Kueue."""
    return integer(d, key, where, default=default, minimum=minimum, maximum=MAX_INT32)


def boolean(d: Any, key: str, where: Where, *, default: bool | None = None) -> bool | None:
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise where.at(key).error(f"must be true or false, got {value!r}")
    return value


_STR_ONLY = {str}


def _scalar_text(value: bool | int | float) -> str:
    """How a YAML scalar read as a boolean or a number was most likely written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def string_map(d: Any, key: str, where: Where) -> Mapping[str, str]:
    raw = d.get(key)
    if type(raw) is dict and set(map(type, raw)) <= _STR_ONLY and set(map(type, raw.values())) <= _STR_ONLY:
        return MappingProxyType(dict(raw))  # the common case: strings only, nothing to convert
    raw = mapping(d, key, where)
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(k, str):
            raise where.at(key).error(f"keys must be strings, got {k!r}")
        if v is None:
            v = ""  # as the API server decodes a null value of a string map
        if isinstance(v, bool | int | float):  # Kubernetes refuses them too: the value of a string map is text
            kind = "a boolean" if isinstance(v, bool) else "a number"
            raise where.at(key).at(k).error(f"must be a string, got {kind}: quote it ('{_scalar_text(v)}')")
        if not isinstance(v, str):
            raise where.at(key).at(k).error(f"must be a string, got {_type_name(v)}")
        out[k] = v
    return MappingProxyType(out)


_TIMES: dict[str, datetime] = {}
TIMES_KEPT = 65536


def _time_text(value: str) -> datetime:
    """An RFC 3339 time that parses (else: ValueError), aware (UTC when it names no zone).
    Many objects carry the same times (made by the same second's controllers): kept parsed."""
    parsed = _TIMES.get(value)
    if parsed is None:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if not parsed.tzinfo:
            parsed = parsed.replace(tzinfo=UTC)
        if len(_TIMES) >= TIMES_KEPT:
            _TIMES.clear()
        _TIMES[value] = parsed
    return parsed


def timestamp(d: Any, key: str, where: Where) -> datetime | None:
    value = d.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise where.at(key).error(f"must be an RFC 3339 time, got {value!r}")
    try:
        return _time_text(value)
    except ValueError:
        raise where.at(key).error(f"must be an RFC 3339 time, got {value!r}") from None


def resource_list(d: Any, key: str, where: Where, *, saturate: bool = False) -> dict[str, int]:
    """A ResourceList as integers, none negative (the API server refuses a negative request,
    limit, overhead or allocatable amount, and Kueue's webhooks a negative usage); `saturate`:
    a pod's requests and limits, whose amounts beyond int64 saturate as Kueue's do instead of
    being refused."""
    raw = mapping(d, key, where)
    out: dict[str, int] = {}
    value_of = request_value if saturate else resource_value
    for name, qty in raw.items():
        try:
            value = value_of(str(name), qty)
        except QuantityError as exc:
            raise where.at(key).at(str(name)).error(str(exc)) from None
        if value < 0:
            raise where.at(key).at(str(name)).error(f"must not be negative, got {qty!r}")
        out[str(name)] = value
    return out


def quota_value(d: Any, key: str, resource: str, where: Where, *, required: bool = False) -> int | None:
    """A quota amount (nominalQuota, borrowingLimit, lendingLimit): Kueue's webhooks refuse a
    negative one."""
    raw = d.get(key)
    if raw is None:
        if required:
            raise where.at(key).error("is required")
        return None
    try:
        value = resource_value(resource, raw)
    except QuantityError as exc:
        raise where.at(key).error(str(exc)) from None
    if value < 0:
        raise where.at(key).error(f"must not be negative, got {raw!r}")
    return value


# ---------------------------------------------------------------- shared pieces


def object_label(obj: Mapping) -> str:
    """`Kind/namespace/name` (or `Kind/name`) for error messages."""
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "object"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else "<unnamed>"
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


_NAMESPACES: set[str] = set()  # namespaces already found valid: a few, named by every object
NAMESPACES_KEPT = 4096


def _shown(value: str, most: int = 64) -> str:
    return repr(value) if len(value) <= most else f"{value[:most]!r}... ({len(value)} characters)"


def metadata_name(obj: Mapping, where: Where) -> tuple[Mapping, str]:
    """metadata and its name, a DNS subdomain as the API server requires of these objects."""
    meta = mapping(obj, "metadata", where, required=True)
    name = string(meta, "name", where.at("metadata"), required=True)
    if len(name) > 253 or _DNS_SUBDOMAIN.fullmatch(name) is None:
        raise where.at("metadata").at("name").error(
            f"must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', at most 253 characters), "
            f"got {_shown(name)}")
    return meta, name


def metadata_namespace(meta: Mapping, where: Where) -> str:
    """metadata.namespace ("default" when unset), a DNS label as the API server requires."""
    namespace = string(meta, "namespace", where.at("metadata"), default="default") or "default"
    if namespace not in _NAMESPACES:
        if len(namespace) > 63 or _DNS_LABEL.fullmatch(namespace) is None:
            raise where.at("metadata").at("namespace").error(
                f"must be a lowercase RFC 1123 label (a-z, 0-9 and '-', at most 63 characters), "
                f"got {_shown(namespace)}")
        if len(_NAMESPACES) >= NAMESPACES_KEPT:
            _NAMESPACES.clear()
        _NAMESPACES.add(namespace)
    return namespace


def parse_taint(d: Any, where: Where) -> Taint:
    """A node's (or a flavor's nodeTaints') taint, as the API server checks it: a label key, a
    label value, and an effect."""
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    effect = string(d, "effect", where, required=True)
    if effect not in _TAINT_EFFECTS:
        raise where.at("effect").error(f"must be one of {sorted(_TAINT_EFFECTS)}, got {effect!r}")
    key = string(d, "key", where, required=True)
    validate_label_key(key, where.at("key"))
    value = string(d, "value", where)
    validate_label_value(value, where.at("value"))
    return Taint(key, value, effect, timestamp(d, "timeAdded", where))


def parse_toleration(d: Any, where: Where, operators: tuple[str, ...] = _TOLERATION_OPERATORS) -> Toleration:
    """A toleration, as the API server checks it (`operators`: those allowed where it is)."""
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    operator = string(d, "operator", where, default="Equal") or "Equal"
    if operator not in operators:
        raise where.at("operator").error(f"must be one of {', '.join(operators)}, got {operator!r}")
    key = string(d, "key", where)
    if not key and operator != "Exists":
        raise where.at("operator").error("must be Exists when key is empty")
    if key:
        validate_label_key(key, where.at("key"))
    value = string(d, "value", where)
    if operator == "Exists" and value:
        raise where.at("value").error(f"must be empty when operator is Exists, got {value!r}")
    if operator == "Equal":
        validate_label_value(value, where.at("value"))
    effect = string(d, "effect", where)
    if effect and effect not in _TAINT_EFFECTS:
        raise where.at("effect").error(f"must be one of {sorted(_TAINT_EFFECTS)}, got {effect!r}")
    seconds = integer(d, "tolerationSeconds", where)
    if seconds is not None and effect != "NoExecute":
        raise where.at("effect").error(f"must be NoExecute when tolerationSeconds is set, got {effect or 'none'}")
    return Toleration(key, operator, value, effect, seconds)


def parse_tolerations(d: Any, key: str, where: Where,
                      operators: tuple[str, ...] = _TOLERATION_OPERATORS) -> tuple[Toleration, ...]:
    return tuple(parse_toleration(t, where.at(key).at(i), operators) for i, t in enumerate(sequence(d, key, where)))


def parse_requirement(d: Any, where: Where) -> Requirement:
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    operator = string(d, "operator", where, required=True)
    if operator not in _SELECTOR_OPERATORS:
        raise where.at("operator").error(f"must be one of {sorted(_SELECTOR_OPERATORS)}, got {operator!r}")
    values = tuple(str(v) for v in sequence(d, "values", where))
    if operator in ("In", "NotIn") and not values:
        raise where.at("values").error(f"must be non-empty for operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise where.at("values").error(f"must be empty for operator {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"[+-]?\d+", values[0])):
        raise where.at("values").error(f"must be a single integer for operator {operator}")
    return Requirement(string(d, "key", where, required=True), operator, values)


def parse_node_selector_term(d: Any, where: Where) -> NodeSelectorTerm:
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    exprs = tuple(parse_requirement(r, where.at("matchExpressions").at(i))
                  for i, r in enumerate(sequence(d, "matchExpressions", where)))
    fields = tuple(parse_requirement(r, where.at("matchFields").at(i))
                   for i, r in enumerate(sequence(d, "matchFields", where)))
    return NodeSelectorTerm(exprs, fields)


def parse_node_affinity(spec: Mapping, where: Where) -> NodeAffinity | None:
    affinity = mapping(spec, "affinity", where)
    na = mapping(affinity, "nodeAffinity", where.at("affinity"))
    if not na:
        return None
    nw = where.at("affinity").at("nodeAffinity")
    required = None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rw = nw.at("requiredDuringSchedulingIgnoredDuringExecution")
        if not _is_mapping(req):
            raise rw.error(f"must be a mapping, got {_type_name(req)}")
        required = tuple(parse_node_selector_term(t, rw.at("nodeSelectorTerms").at(i))
                         for i, t in enumerate(sequence(req, "nodeSelectorTerms", rw)))
    preferred = []
    pw = nw.at("preferredDuringSchedulingIgnoredDuringExecution")
    for i, p in enumerate(sequence(na, "preferredDuringSchedulingIgnoredDuringExecution", nw)):
        if not _is_mapping(p):
            raise pw.at(i).error(f"must be a mapping, got {_type_name(p)}")
        weight = integer(p, "weight", pw.at(i), default=0)
        if not 0 <= weight <= 100:
            raise pw.at(i).at("weight").error(f"must be between 0 and 100, got {weight}")
        preferred.append(PreferredTerm(weight, parse_node_selector_term(
            mapping(p, "preference", pw.at(i), required=True), pw.at(i).at("preference"))))
    return NodeAffinity(required, tuple(preferred))


def validate_label_value(value: str, where: Where) -> None:
    if not value or value in _LABEL_VALUES:  # many values, each read for many objects
        return
    if len(value) > 63 or not _LABEL_NAME.fullmatch(value):
        raise where.error(f"{value!r} is not a valid label value (at most 63 characters: letters, digits, '-', '_' "
                          "and '.', starting and ending with a letter or digit)")
    _remember(_LABEL_VALUES, value)


def validate_label_key(key: str, where: Where) -> None:
    if key in _LABEL_KEYS:  # a few keys, each read for many objects
        return
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))) or not _LABEL_NAME.fullmatch(name):
        raise where.error(f"{key!r} is not a valid label key")
    _remember(_LABEL_KEYS, key)


def validate_labels(labels: Mapping[str, str], where: Where) -> None:
    """Every key and value of a label map (at `where`) is one the API server accepts: a node's
    labels name its topology domains, and the API server refuses a node with a label it could
    not select on."""
    for key, value in labels.items():
        if key not in _LABEL_KEYS or (value and value not in _LABEL_VALUES):  # else both known valid
            at = where.at(key)
            validate_label_key(key, at)
            validate_label_value(value, at)


def _remember(valid: set[str], name: str) -> None:
    """Keeps `name` among those found valid (a few, each read for many objects); a full set
    is emptied."""
    if len(valid) >= VALID_NAMES_KEPT:
        valid.clear()
    valid.add(name)


# label keys and values found valid by `validate_label_key` and `validate_label_value`, object
# names by `object_reference`
_LABEL_KEYS: set[str] = set()
_LABEL_VALUES: set[str] = set()
_OBJECT_NAMES: set[str] = set()
VALID_NAMES_KEPT = 4096


def _add(total: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        total[k] = total.get(k, 0) + v


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > total.get(k, 0):
            total[k] = v


def container_requests(c: Mapping, where: Where) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit (API defaulting)."""
    resources = mapping(c, "resources", where)
    requests = resource_list(resources, "requests", where.at("resources"), saturate=True)
    for name, value in resource_list(resources, "limits", where.at("resources"), saturate=True).items():
        requests.setdefault(name, value)
    return requests


def limit_violations(spec: Mapping, where: Where) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Kueue's workload.ValidateResources for one pod template: every init container, container and
    the pod-level resources whose request of a resource exceeds its limit, with those resources."""
    out: list[tuple[str, tuple[str, ...]]] = []

    def check(path: str, resources: Any, rw: Where) -> None:
        if not _is_mapping(resources):
            return
        requests = resource_list(resources, "requests", rw, saturate=True)
        limits = resource_list(resources, "limits", rw, saturate=True)
        greater = tuple(sorted(n for n, v in requests.items() if n in limits and v > limits[n]))
        if greater:
            out.append((path, greater))

    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(sequence(spec, field_name, where)):
            if _is_mapping(c):
                check(f"{field_name}[{i}]", c.get("resources"), where.at(field_name).at(i).at("resources"))
    check("resources", spec.get("resources"), where.at("resources"))
    return tuple(out)


def pod_spec_requests(spec: Mapping, where: Where) -> dict[str, int]:
    """Kubernetes' effective pod requests: containers, init containers (sidecars too), the
    pod-level requests (spec.resources), overhead. A pod-level request stands for the whole
    pod, but counts at least what the containers ask for: the API server refuses a smaller one
    on a Pod, and a Workload, which it does not check so, is charged the larger (as Kueue
    v0.19.6 charges it), so that quota and nodes are never promised less than the pods use."""
    pod_level = resource_list(mapping(spec, "resources", where), "requests", where.at("resources"), saturate=True)
    total: dict[str, int] = {}
    for i, c in enumerate(sequence(spec, "containers", where)):
        if not _is_mapping(c):
            raise where.at("containers").at(i).error(f"must be a mapping, got {_type_name(c)}")
        _add(total, container_requests(c, where.at("containers").at(i)))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(sequence(spec, "initContainers", where)):
        cw = where.at("initContainers").at(i)
        if not _is_mapping(c):
            raise cw.error(f"must be a mapping, got {_type_name(c)}")
        reqs = container_requests(c, cw)
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside the main containers
            _add(total, reqs)
            _add(sidecars, reqs)
            step = dict(sidecars)
        else:
            step = dict(reqs)
            _add(step, sidecars)
        _max_into(init_peak, step)
    _max_into(total, init_peak)
    _max_into(total, pod_level)
    _add(total, resource_list(spec, "overhead", where))
    return total


def parse_pod_spec(spec: Mapping, where: Where) -> PodSpecInfo:
    selector = string_map(spec, "nodeSelector", where)
    for key in selector:
        validate_label_key(key, where.at("nodeSelector"))
    return PodSpecInfo(
        requests=MappingProxyType(pod_spec_requests(spec, where)),
        node_selector=selector,
        tolerations=parse_tolerations(spec, "tolerations", where),
        affinity=parse_node_affinity(spec, where),
    )


def parse_owner_references(meta: Mapping, where: Where) -> tuple[OwnerReference, ...]:
    refs = meta.get("ownerReferences")
    if refs is None:
        return ()
    if type(refs) is list:
        # the common case, references as the API server writes them, read without making a
        # Where for every field; anything else is read (and its error reported) field by field
        out = []
        for r in refs:
            if type(r) is not dict:
                break
            api, kind, name, uid = (_plain_string(r.get("apiVersion")), _plain_string(r.get("kind")),
                                    _plain_string(r.get("name")), _plain_string(r.get("uid")))
            controller = r.get("controller")
            if api is None or kind is None or name is None or uid is None or not (
                    controller is None or type(controller) is bool):
                break
            out.append(OwnerReference(api, kind, name, uid, bool(controller)))
        else:
            return tuple(out)
    return _owner_references_checked(meta, where)


def _owner_references_checked(meta: Mapping, where: Where) -> tuple[OwnerReference, ...]:
    out = []
    for i, r in enumerate(sequence(meta, "ownerReferences", where)):
        rw = where.at("ownerReferences").at(i)
        if not _is_mapping(r):
            raise rw.error(f"must be a mapping, got {_type_name(r)}")
        out.append(OwnerReference(string(r, "apiVersion", rw), string(r, "kind", rw), string(r, "name", rw),
                                  string(r, "uid", rw), bool(boolean(r, "controller", rw, default=False))))
    return tuple(out)


# ---------------------------------------------------------------- core/v1


def parse_node(obj: Mapping, where: Where) -> Node:
    meta, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    status = mapping(obj, "status", where)
    ready, since = None, None
    for i, c in enumerate(sequence(status, "conditions", where.at("status"))):
        cw = where.at("status").at("conditions").at(i)
        if _is_mapping(c) and c.get("type") == "Ready":
            ready = string(c, "status", cw) or None
            since = timestamp(c, "lastTransitionTime", cw)
            break
    taints = tuple(parse_taint(t, where.at("spec").at("taints").at(i))
                   for i, t in enumerate(sequence(spec, "taints", where.at("spec"))))
    labels = string_map(meta, "labels", where.at("metadata"))
    validate_labels(labels, where.at("metadata").at("labels"))
    return Node(
        name=name,
        labels=labels,
        allocatable=MappingProxyType(resource_list(status, "allocatable", where.at("status"))),
        taints=taints,
        unschedulable=bool(boolean(spec, "unschedulable", where.at("spec"), default=False)),
        ready=ready,
        ready_since=since,
        deleted=meta.get("deletionTimestamp") is not None,
    )


def parse_pod(obj: Mapping, where: Where) -> Pod:
    meta, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    status = mapping(obj, "status", where)
    gates = []
    for i, g in enumerate(sequence(spec, "schedulingGates", where.at("spec"))):
        gates.append(string(g if _is_mapping(g) else {}, "name",
                            where.at("spec").at("schedulingGates").at(i), required=True))
    return Pod(
        namespace=metadata_namespace(meta, where),
        name=name,
        uid=string(meta, "uid", where.at("metadata")),
        labels=string_map(meta, "labels", where.at("metadata")),
        annotations=string_map(meta, "annotations", where.at("metadata")),
        node_name=string(spec, "nodeName", where.at("spec")),
        spec=parse_pod_spec(spec, where.at("spec")),
        scheduling_gates=tuple(gates),
        phase=string(status, "phase", where.at("status")),
        deleting=meta.get("deletionTimestamp") is not None,
        owner_references=parse_owner_references(meta, where.at("metadata")),
    )


# ---------------------------------------------------------------- kueue.x-k8s.io


def parse_topology(obj: Mapping, where: Where) -> Topology:
    _, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where, required=True)
    sw = where.at("spec")
    raw_levels = sequence(spec, "levels", sw)
    if not raw_levels:
        raise sw.at("levels").error("must list at least one level")
    if len(raw_levels) > MAX_TOPOLOGY_LEVELS:
        raise sw.at("levels").error(f"must list at most {MAX_TOPOLOGY_LEVELS} levels, got {len(raw_levels)}")
    levels = []
    for i, level in enumerate(raw_levels):
        lw = sw.at("levels").at(i)
        if not _is_mapping(level):
            raise lw.error(f"must be a mapping, got {_type_name(level)}")
        label = string(level, "nodeLabel", lw, required=True)
        validate_label_key(label, lw.at("nodeLabel"))
        if label in levels:
            raise lw.at("nodeLabel").error(f"level {label!r} is listed twice")
        levels.append(label)
    if "kubernetes.io/hostname" in levels[:-1]:
        raise sw.at("levels").error("kubernetes.io/hostname may only be the lowest level")
    return Topology(name, tuple(levels))


def parse_resource_flavor(obj: Mapping, where: Where) -> ResourceFlavor:
    _, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    sw = where.at("spec")
    node_labels = string_map(spec, "nodeLabels", sw)
    for label, value in node_labels.items():
        validate_label_key(label, sw.at("nodeLabels").at(label))
        validate_label_value(value, sw.at("nodeLabels").at(label))
    taints, tolerations = sequence(spec, "nodeTaints", sw), sequence(spec, "tolerations", sw)
    for key, entries in (("nodeLabels", node_labels), ("nodeTaints", taints), ("tolerations", tolerations)):
        if len(entries) > MAX_FLAVOR_ENTRIES:  # Kueue's API: up to 8 of each
            raise sw.at(key).error(f"must have at most {MAX_FLAVOR_ENTRIES} entries, got {len(entries)}")
    topology_name = object_reference(spec, "topologyName", sw, "a Topology's name") or None
    return ResourceFlavor(
        name=name,
        node_labels=node_labels,
        node_taints=tuple(parse_taint(t, sw.at("nodeTaints").at(i)) for i, t in enumerate(taints)),
        tolerations=parse_tolerations(spec, "tolerations", sw, ("Equal", "Exists")),
        topology_name=topology_name,
    )


def parse_resource_groups(spec: Mapping, where: Where, parent_field: str = "", *,
                          lending_within_nominal: bool = True) -> tuple[ResourceGroup, ...]:
    """spec.resourceGroups of a ClusterQueue or Cohort, checked as Kueue's API and webhooks
    check them. `parent_field`: the spec field naming its parent Cohort, when it is not set
    (then it neither borrows nor lends, and a borrowing or lending limit is refused)."""
    groups = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for gi, rg in enumerate(sequence(spec, "resourceGroups", where)):
        gw = where.at("resourceGroups").at(gi)
        if not _is_mapping(rg):
            raise gw.error(f"must be a mapping, got {_type_name(rg)}")
        covered = _resource_names(rg, gw)
        for ci, rname in enumerate(covered):  # Kueue's webhook: a resource in one group only
            if rname in seen_resources:
                raise gw.at("coveredResources").at(ci).error(f"resource {rname!r} is covered by another resource group")
            seen_resources.add(rname)
        flavors = []
        for fi, fq in enumerate(sequence(rg, "flavors", gw)):
            fw = gw.at("flavors").at(fi)
            if not _is_mapping(fq):
                raise fw.error(f"must be a mapping, got {_type_name(fq)}")
            flavor_name = string(fq, "name", fw, required=True)
            if flavor_name in seen_flavors:  # Kueue's webhook: a flavor in one group, once
                raise fw.at("name").error(f"flavor {flavor_name!r} is listed twice")
            seen_flavors.add(flavor_name)
            quotas = []
            named: set[str] = set()
            for ri, rq in enumerate(sequence(fq, "resources", fw)):
                rw = fw.at("resources").at(ri)
                if not _is_mapping(rq):
                    raise rw.error(f"must be a mapping, got {_type_name(rq)}")
                rname = string(rq, "name", rw, required=True)
                if covered and rname not in covered:
                    raise rw.at("name").error(f"resource {rname!r} is not in coveredResources {list(covered)}")
                if rname in named:
                    raise rw.at("name").error(f"resource {rname!r} is listed twice")
                if ri < len(covered) and rname != covered[ri]:  # Kueue's webhook
                    raise rw.at("name").error(f"must match the name in coveredResources[{ri}] ({covered[ri]!r}): "
                                              f"list the resources in the order of coveredResources {list(covered)}")
                named.add(rname)
                quotas.append(resource_quota(rq, rname, rw, parent_field, lending_within_nominal))
            if covered and len(named) != len(covered):  # Kueue's API: a quota for each covered resource
                missing = [r for r in covered if r not in named]
                raise fw.at("resources").error(f"has no quota for {', '.join(repr(r) for r in missing)} of "
                                               f"coveredResources {list(covered)}")
            flavors.append(FlavorQuotas(flavor_name, tuple(quotas)))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def resource_quota(rq: Mapping, name: str, where: Where, parent_field: str,
                   lending_within_nominal: bool = True) -> ResourceQuota:
    """One resource's quota; its lending limit at most its nominal quota (a ClusterQueue's: Kueue's
    Cohort webhook does not ask it of a Cohort, which may lend what its children lend it), and no
    limits at all without a parent Cohort (`parent_field` names the unset field then), as Kueue's
    API checks."""
    quota = ResourceQuota(name, quota_value(rq, "nominalQuota", name, where, required=True),
                          quota_value(rq, "borrowingLimit", name, where), quota_value(rq, "lendingLimit", name, where))
    for key, limit in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
        if limit is not None and parent_field:
            raise where.at(key).error(f"must be nil when {parent_field} is empty: without a parent Cohort nothing "
                                      "is borrowed or lent")
    if lending_within_nominal and quota.lending_limit is not None and quota.lending_limit > quota.nominal:
        raise where.at("lendingLimit").error(f"must be less than or equal to the nominalQuota ({rq['nominalQuota']}), "
                                             f"got {rq['lendingLimit']}")
    return quota


def _resource_names(rg: Mapping, where: Where) -> tuple[str, ...]:
    """A resource group's coveredResources: names, each once (a list-set in Kueue's API)."""
    names: list[str] = []
    for i, raw in enumerate(sequence(rg, "coveredResources", where)):
        if not isinstance(raw, str) or not raw:
            raise where.at("coveredResources").at(i).error(f"must be a resource name, got {raw!r}")
        if raw in names:
            raise where.at("coveredResources").at(i).error(f"resource {raw!r} is listed twice")
        names.append(raw)
    return tuple(names)


_QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
_STOP_POLICIES = (STOP_NONE, STOP_HOLD, STOP_HOLD_AND_DRAIN)
_CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")  # an admission check's state on a Workload
USAGE_BASED_ADMISSION_FAIR_SHARING = "UsageBasedAdmissionFairSharing"
_ADMISSION_MODES = (USAGE_BASED_ADMISSION_FAIR_SHARING, "NoAdmissionFairSharing")
_WITHIN_QUEUE_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
_FUNGIBILITY = {"whenCanBorrow": ("MayStopSearch", "TryNextFlavor", "Borrow"),
                "whenCanPreempt": ("MayStopSearch", "TryNextFlavor", "Preempt"),
                "preference": ("BorrowingOverPreemption", "PreemptionOverBorrowing")}


def _choice(d: Mapping, key: str, where: Where, choices: tuple[str, ...]) -> str | None:
    value = optional_string(d, key, where)
    if value is not None and value not in choices:
        raise where.at(key).error(f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def parse_preemption(spec: Mapping, where: Where) -> Mapping:
    """spec.preemption, with its policies checked (Kueue's API rejects other values)."""
    pw = where.at("preemption")
    d = mapping(spec, "preemption", where)
    out: dict = {}
    for key, choices in (("withinClusterQueue", _WITHIN_QUEUE_POLICIES), ("reclaimWithinCohort", _RECLAIM_POLICIES)):
        value = _choice(d, key, pw, choices)
        if value is not None:
            out[key] = value
    borrow = mapping(d, "borrowWithinCohort", pw)
    if borrow:
        bw = pw.at("borrowWithinCohort")
        out["borrowWithinCohort"] = MappingProxyType({
            "policy": _choice(borrow, "policy", bw, ("Never", "LowerPriority")) or "Never",
            "maxPriorityThreshold": integer(borrow, "maxPriorityThreshold", bw),
        })
        if out["borrowWithinCohort"]["policy"] != "Never" and out.get("reclaimWithinCohort", "Never") == "Never":
            raise bw.at("policy").error("must be Never when reclaimWithinCohort is Never (Kueue's API: "
                                        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never)")
    return MappingProxyType(out)


def parse_flavor_fungibility(spec: Mapping, where: Where) -> Mapping:
    fw = where.at("flavorFungibility")
    d = mapping(spec, "flavorFungibility", where)
    out = {}
    for key, choices in _FUNGIBILITY.items():
        value = _choice(d, key, fw, choices)
        if value is not None:
            # Borrow and Preempt are the v1beta1 spellings of MayStopSearch
            out[key] = "MayStopSearch" if value in ("Borrow", "Preempt") else value
    return MappingProxyType(out)


def parse_fair_weight(spec: Mapping, where: Where) -> float:
    """spec.fairSharing.weight (default 1): a non-negative quantity, 0 or above 1n as Kueue's
    validation requires (smaller weights collapse to 0 in its arithmetic)."""
    fw = where.at("fairSharing")
    raw = mapping(spec, "fairSharing", where).get("weight")
    if raw is None:
        return 1.0
    try:
        weight = to_fraction(raw)
    except QuantityError as exc:
        raise fw.at("weight").error(str(exc)) from None
    if weight < 0:
        raise fw.at("weight").error(f"must be greater than or equal to 0, got {raw!r}")
    if 0 < weight <= Fraction(1, 10**9):
        raise fw.at("weight").error(f"when not 0, must be greater than 1n, got {raw!r}")
    return float(weight)


def parse_cluster_queue(obj: Mapping, where: Where) -> ClusterQueue:
    meta, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    sw = where.at("spec")
    checks = []
    for i, check in enumerate(sequence(spec, "admissionChecks", sw)):
        if not isinstance(check, str) or not check:
            raise sw.at("admissionChecks").at(i).error(f"must be an AdmissionCheck's name, got {check!r}")
        checks.append(AdmissionCheckStrategyRule(check))
    strategy = mapping(spec, "admissionChecksStrategy", sw)
    for i, rule in enumerate(sequence(strategy, "admissionChecks", sw.at("admissionChecksStrategy"))):
        rw = sw.at("admissionChecksStrategy").at("admissionChecks").at(i)
        if not _is_mapping(rule):
            raise rw.error(f"must be a mapping, got {_type_name(rule)}")
        checks.append(AdmissionCheckStrategyRule(
            string(rule, "name", rw, required=True),
            tuple(str(f) for f in sequence(rule, "onFlavors", rw))))
    if spec.get("admissionChecks") and spec.get("admissionChecksStrategy"):  # Kueue's API
        raise sw.error("either admissionChecks or admissionChecksStrategy can be set, but not both")
    cohort_field = "cohort" if spec.get("cohort") and not spec.get("cohortName") else "cohortName"
    cohort = parent_name(spec, cohort_field, sw)
    return ClusterQueue(
        name=name,
        resource_groups=parse_resource_groups(spec, sw, "" if cohort else cohort_field),
        cohort=cohort or None,
        queueing_strategy=_choice(spec, "queueingStrategy", sw, _QUEUEING_STRATEGIES) or "BestEffortFIFO",
        namespace_selector=label_selector(spec, "namespaceSelector", sw),
        preemption=parse_preemption(spec, sw),
        flavor_fungibility=parse_flavor_fungibility(spec, sw),
        admission_checks=tuple(checks),
        stop_policy=_choice(spec, "stopPolicy", sw, _STOP_POLICIES) or STOP_NONE,
        fair_weight=parse_fair_weight(spec, sw),
        admission_mode=_choice(mapping(spec, "admissionScope", sw), "admissionMode", sw.at("admissionScope"),
                               _ADMISSION_MODES) or "",
        terminating=meta.get("deletionTimestamp") is not None,
    )


def parse_local_queue(obj: Mapping, where: Where) -> LocalQueue:
    meta, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where, required=True)
    sw = where.at("spec")
    if not string(spec, "clusterQueue", sw, required=True):
        raise sw.at("clusterQueue").error("must not be empty")
    consumed, consumed_at = _admission_fair_sharing_status(obj, where)
    return LocalQueue(metadata_namespace(meta, where), name,
                      object_reference(spec, "clusterQueue", sw, "a ClusterQueue's name"),
                      _choice(spec, "stopPolicy", sw, _STOP_POLICIES) or STOP_NONE,
                      parse_fair_weight(spec, sw), consumed, consumed_at)


def _admission_fair_sharing_status(obj: Mapping, where: Where) -> tuple[tuple[tuple[str, float], ...],
                                                                         datetime | None]:
    """status.fairSharing.admissionFairSharingStatus of a LocalQueue: its consumedResources
    (as Kubernetes amounts: cores for cpu) and lastUpdate; nothing when Kueue wrote none."""
    fsw = where.at("status").at("fairSharing")
    status = mapping(mapping(obj, "status", where), "fairSharing", where.at("status"))
    afs = mapping(status, "admissionFairSharingStatus", fsw)
    if not afs:
        return (), None
    aw = fsw.at("admissionFairSharingStatus")
    amounts = []
    for name, raw in mapping(afs, "consumedResources", aw).items():
        field = aw.at("consumedResources").at(str(name))
        try:
            amount = to_fraction(raw)
        except QuantityError as exc:
            raise field.error(str(exc)) from None
        if amount < 0:
            raise field.error(f"must not be negative, got {raw!r}")
        amounts.append((str(name), float(amount)))
    return tuple(sorted(amounts)), timestamp(afs, "lastUpdate", aw)


def parse_cohort(obj: Mapping, where: Where) -> Cohort:
    _, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    sw = where.at("spec")
    field = "parent" if spec.get("parent") and not spec.get("parentName") else "parentName"
    parent = parent_name(spec, field, sw)
    return Cohort(name, parent or None, parse_resource_groups(spec, sw, "" if parent else field,
                                                              lending_within_nominal=False),
                  parse_fair_weight(spec, sw))


def parent_name(spec: Mapping, field: str, where: Where) -> str:
    """The Cohort a ClusterQueue or Cohort names as its parent ("" when none)."""
    return object_reference(spec, field, where, "a Cohort's name")


def object_reference(d: Mapping, key: str, where: Where, what: str) -> str:
    """A field naming another object (`what` it names), "" when unset: a DNS subdomain, as
    Kueue's API requires of its references (a ClusterQueue's, a Cohort's, a Topology's ...)."""
    name = optional_string(d, key, where) or ""
    if name and name not in _OBJECT_NAMES:  # a few names, each read for many objects
        if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
            raise where.at(key).error(f"must be a lowercase RFC 1123 subdomain ({what}), got {_shown(name)}")
        _remember(_OBJECT_NAMES, name)
    return name


def label_selector(d: Mapping, key: str, where: Where) -> Mapping | None:
    """A metav1.LabelSelector, as the API server checks it: label keys and values, and
    matchExpressions with an operator a label selector has (In, NotIn with values; Exists,
    DoesNotExist without). None when it is not set."""
    if d.get(key) is None:
        return None
    selector = mapping(d, key, where)
    sw = where.at(key)
    for label, value in string_map(selector, "matchLabels", sw).items():
        validate_label_key(label, sw.at("matchLabels").at(label))
        validate_label_value(value, sw.at("matchLabels").at(label))
    for i, raw in enumerate(sequence(selector, "matchExpressions", sw)):
        ew = sw.at("matchExpressions").at(i)
        if _is_mapping(raw) and raw.get("operator") not in LABEL_SELECTOR_OPERATORS:
            raise ew.at("operator").error(f"must be one of {', '.join(LABEL_SELECTOR_OPERATORS)}, "
                                          f"got {raw.get('operator')!r}")
        requirement = parse_requirement(raw, ew)
        validate_label_key(requirement.key, ew.at("key"))
        for j, value in enumerate(requirement.values):
            validate_label_value(value, ew.at("values").at(j))
    return selector


def parse_admission_check(obj: Mapping, where: Where) -> AdmissionCheck:
    _, name = metadata_name(obj, where)
    spec = mapping(obj, "spec", where)
    status = mapping(obj, "status", where)
    active, stated = True, False
    for c in sequence(status, "conditions", where.at("status")):
        if _is_mapping(c) and c.get("type") == "Active":
            active, stated = c.get("status") == "True", True
    return AdmissionCheck(name, string(spec, "controllerName", where.at("spec")), active, stated)


def parse_namespace(obj: Mapping, where: Where) -> Namespace:
    meta, name = metadata_name(obj, where)
    return Namespace(name, dict(string_map(meta, "labels", where.at("metadata"))))


def parse_priority_class(obj: Mapping, where: Where) -> WorkloadPriorityClass:
    _, name = metadata_name(obj, where)
    return WorkloadPriorityClass(name, integer(obj, "value", where, default=0, minimum=MIN_INT32,
                                                         maximum=MAX_INT32))


def parse_topology_request(d: Any, where: Where) -> TopologyRequest | None:
    if d is None:
        return None
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    required = optional_string(d, "required", where)
    preferred = optional_string(d, "preferred", where)
    unconstrained = boolean(d, "unconstrained", where)
    if required is not None and preferred is not None:
        raise where.error("required and preferred are mutually exclusive; set only one")
    if unconstrained and (required is not None or preferred is not None):
        raise where.at("unconstrained").error("cannot be combined with required or preferred")
    for key, value in (("required", required), ("preferred", preferred)):
        if value is not None:
            validate_label_key(value, where.at(key))
    constraints = []
    for i, c in enumerate(sequence(d, "podsetSliceRequiredTopologyConstraints", where)):
        cw = where.at("podsetSliceRequiredTopologyConstraints").at(i)
        if not _is_mapping(c):
            raise cw.error(f"must be a mapping, got {_type_name(c)}")
        size = count(c, "size", cw, minimum=1)
        if size is None:  # Kueue's API: size is required
            raise cw.at("size").error("is required")
        constraints.append(SliceConstraint(string(c, "topology", cw, required=True), size))
    slice_topology = optional_string(d, "podSetSliceRequiredTopology", where)
    slice_size = count(d, "podSetSliceSize", where, minimum=1)
    return TopologyRequest(
        required=required,
        preferred=preferred,
        unconstrained=unconstrained,
        pod_index_label=optional_string(d, "podIndexLabel", where),
        sub_group_index_label=optional_string(d, "subGroupIndexLabel", where),
        sub_group_count=count(d, "subGroupCount", where),
        pod_set_group_name=optional_string(d, "podSetGroupName", where),
        slice_required_topology=slice_topology,
        slice_size=slice_size,
        slice_constraints=tuple(constraints),
    )


def pod_set_groups(pod_sets: list[PodSet]) -> dict[str, list[int]]:
    """The indexes of the PodSets naming each podSetGroupName, in the workload's order."""
    groups: dict[str, list[int]] = {}
    for i, ps in enumerate(pod_sets):
        if ps.topology_request is not None and ps.topology_request.pod_set_group_name is not None:
            groups.setdefault(ps.topology_request.pod_set_group_name, []).append(i)
    return groups


def group_leaders(pod_sets: list[PodSet], groups: dict[str, list[int]] | None = None) -> set[int]:
    """The indexes of the leaders of the leader-and-workers groups (`pod_set_groups`, or the
    `groups` given): the PodSet with fewer pods of each pair, placed as one pod whatever its
    request says. A group that is not a pair has no leader."""
    groups = pod_set_groups(pod_sets) if groups is None else groups
    return {members[leader_of_pair(pod_sets[members[0]].count, pod_sets[members[1]].count)]
            for members in groups.values() if len(members) == 2}


def in_annotations(raw_pod_set: Any) -> bool:
    """Whether a PodSet's topology request is written in its pod template's annotations, as
    the job integrations write it, rather than in its topologyRequest."""
    return not (_is_mapping(raw_pod_set) and raw_pod_set.get("topologyRequest") is not None)


def request_path(raw_pod_set: Any, where: Where) -> Where:
    """Where a PodSet's topology request is written (`where`: the PodSet)."""
    if in_annotations(raw_pod_set):
        return where.at("template").at("metadata").at("annotations")
    return where.at("topologyRequest")


def check_pod_set_groups(pod_sets: list[PodSet], raw_pod_sets: list, where: Where) -> dict[str, list[int]]:
    """Kueue's validation of PodSet groups (its job webhooks refuse the job otherwise): a
    group is a leader and its workers, so exactly two PodSets, at least one of a single pod,
    and both asking for the same required or preferred level, since the workers' request
    places the pair. Returns the groups (see `pod_set_groups`)."""
    groups = pod_set_groups(pod_sets)
    for name, members in groups.items():
        first = members[0]
        raw = raw_pod_sets[first]
        fw = request_path(raw, where.at(first)).at(ANNOTATION_GROUP if in_annotations(raw) else "podSetGroupName")
        if len(members) != 2:
            raise fw.error(f"group {name!r} can only hold exactly 2 PodSets (a leader and its workers), "
                           f"got {len(members)}")
        one, other = (pod_sets[i] for i in members)
        if one.count != 1 and other.count != 1:
            raise fw.error(f"group {name!r} needs one PodSet of a single pod (its leader), got {one.name!r} "
                           f"with {one.count} pods and {other.name!r} with {other.count}")
        levels = [_level_request(ps.topology_request) for ps in (one, other)]
        if levels[0] != levels[1]:
            raise request_path(raw_pod_sets[members[1]], where.at(members[1])).error(
                f"PodSet {other.name!r} must ask for the same required or preferred topology as {one.name!r} "
                f"in group {name!r}: {levels[1]} against {levels[0]}")
    return groups


def _level_request(request: TopologyRequest | None) -> str:
    if request is None:
        return "no level"
    if request.required is not None:
        return f"required {request.required!r}"
    if request.preferred is not None:
        return f"preferred {request.preferred!r}"
    return "no level"


def check_slices(pod_sets: list[PodSet], raw_pod_sets: list, where: Where) -> None:
    """KEP-2724's validation of the workload's PodSet groups and of the slices of its PodSets
    (`where`: spec.podSets) that are placed by their slices: every PodSet but the leader of a
    leader-and-workers group (the one with fewer pods), which is placed as one pod whatever
    its request says."""
    leaders = group_leaders(pod_sets, check_pod_set_groups(pod_sets, raw_pod_sets, where))
    for i, ps in enumerate(pod_sets):
        request = ps.topology_request
        if request is None or i in leaders or (request.slice_size is None and not request.slice_constraints):
            continue
        raw = raw_pod_sets[i]
        fields = (ANNOTATION_SLICE_SIZE, ANNOTATION_SLICE_LAYERS) if in_annotations(raw) else (
            "podSetSliceSize", "podsetSliceRequiredTopologyConstraints")
        check_pod_set_slices(request, ps.count, request_path(raw, where.at(i)), *fields, min_count=ps.min_count)


def check_pod_set_slices(request: TopologyRequest, pods: int, where: Where, size_field: str,
                         layers_field: str, min_count: int | None = None) -> None:
    """The slices of one PodSet of `pods` pods, as Kueue v0.19.6 validates them with
    TASPartialSlices (on by default): a slice holds at most the PodSet's pods; a single layer
    may leave a partial last slice, unless the PodSet sets minCount (partial admission and a
    partial slice do not combine); multi-layer constraints exclude the single-layer fields,
    name each level once, and each layer's size divides the PodSet (the coarsest) or the
    layer above."""
    size = request.slice_size
    if size is not None:
        if pods and size > pods:
            raise where.at(size_field).error(f"must not exceed the PodSet's count {pods}, got {size}")
        if min_count is not None and pods % size:
            raise where.at(size_field).error(
                f"must evenly divide the PodSet's count {pods} when the PodSet sets minCount, got {size}")
    layers = request.slice_constraints
    if not layers:
        return
    lw = where.at(layers_field)
    if request.slice_required_topology is not None or size is not None:
        raise lw.error("cannot be combined with podSetSliceRequiredTopology or podSetSliceSize")
    seen: set[str] = set()
    above, above_name = pods, f"the PodSet's count {pods}"
    for i, layer in enumerate(layers):
        if layer.topology in seen:
            raise lw.at(i).at("topology").error(f"{layer.topology!r} is named by an earlier constraint")
        seen.add(layer.topology)
        if i == 0:
            if pods and layer.size > pods:
                raise lw.at(i).at("size").error(f"must not exceed the PodSet's count {pods}, got {layer.size}")
            whole = len(layers) == 1 and min_count is None  # a single layer may leave a partial slice
            if not whole and pods % layer.size:
                why = "when more than one layer is specified" if len(layers) > 1 else "when the PodSet sets minCount"
                raise lw.at(i).at("size").error(f"must evenly divide the PodSet's count {pods} {why}, "
                                                f"got {layer.size}")
        elif above % layer.size:
            raise lw.at(i).at("size").error(f"must evenly divide {above_name}, got {layer.size}")
        above, above_name = layer.size, f"the size {layer.size} of the layer above"


def topology_request_from_annotations(annotations: Mapping[str, str], where: Where) -> TopologyRequest | None:
    """A topologyRequest from the pod template's Kueue annotations (`where`: the annotations),
    as the job integrations build it, once the annotations pass Kueue's job webhooks."""
    if not any(k in annotations for k in ANNOTATIONS_TOPOLOGY):
        return None
    check_topology_annotations(annotations, where)
    layers = slice_layers_annotation(annotations, where)
    raw: dict[str, Any] = {}
    if ANNOTATION_REQUIRED in annotations:
        raw["required"] = annotations[ANNOTATION_REQUIRED]
    if ANNOTATION_PREFERRED in annotations:
        raw["preferred"] = annotations[ANNOTATION_PREFERRED]
    if ANNOTATION_UNCONSTRAINED in annotations:
        raw["unconstrained"] = annotations[ANNOTATION_UNCONSTRAINED] in _GO_TRUE
    if ANNOTATION_SLICE_TOPOLOGY in annotations:
        raw["podSetSliceRequiredTopology"] = annotations[ANNOTATION_SLICE_TOPOLOGY]
        raw["podSetSliceSize"] = int(annotations[ANNOTATION_SLICE_SIZE])
    if layers:
        raw["podsetSliceRequiredTopologyConstraints"] = layers
    if ANNOTATION_GROUP in annotations:
        raw["podSetGroupName"] = annotations[ANNOTATION_GROUP]
    return parse_topology_request(raw, where)


def check_topology_annotations(annotations: Mapping[str, str], where: Where) -> None:
    """Kueue's job webhooks' checks of a pod template's topology annotations (`where`: the
    annotations), each error at the annotation it is about."""
    levels = [k for k in (ANNOTATION_REQUIRED, ANNOTATION_PREFERRED, ANNOTATION_UNCONSTRAINED) if k in annotations]
    if len(levels) > 1:
        raise where.error(f"must hold at most one of {ANNOTATION_REQUIRED}, {ANNOTATION_PREFERRED} and "
                          f"{ANNOTATION_UNCONSTRAINED}; got {', '.join(levels)}")
    for key in (ANNOTATION_REQUIRED, ANNOTATION_PREFERRED, ANNOTATION_SLICE_TOPOLOGY):
        if key in annotations:
            validate_label_key(annotations[key], where.at(key))
    unconstrained = annotations.get(ANNOTATION_UNCONSTRAINED)
    if unconstrained is not None and unconstrained not in _GO_TRUE | _GO_FALSE:
        raise where.at(ANNOTATION_UNCONSTRAINED).error(
            f"must be a boolean value (true or false), got {unconstrained!r}")
    slice_size = annotations.get(ANNOTATION_SLICE_SIZE)
    if slice_size is not None:
        size_at = where.at(ANNOTATION_SLICE_SIZE)
        if not re.fullmatch(r"[+-]?[0-9]+", slice_size) or not MIN_INT32 <= int(slice_size) <= MAX_INT32:
            raise size_at.error(f"must be a numeric value (an int32), got {slice_size!r}")
        if int(slice_size) < 1:
            raise size_at.error(f"must be greater than or equal to 1, got {slice_size}")
        if ANNOTATION_SLICE_TOPOLOGY not in annotations:
            raise size_at.error(f"may not be set when {ANNOTATION_SLICE_TOPOLOGY} is not set")
    elif ANNOTATION_SLICE_TOPOLOGY in annotations:
        raise where.at(ANNOTATION_SLICE_SIZE).error(f"must be set when {ANNOTATION_SLICE_TOPOLOGY} is set")
    if ANNOTATION_SLICE_LAYERS in annotations:
        for key in (ANNOTATION_SLICE_TOPOLOGY, ANNOTATION_SLICE_SIZE):
            if key in annotations:
                raise where.at(ANNOTATION_SLICE_LAYERS).error(f"may not be set when {key} is set")
    group = annotations.get(ANNOTATION_GROUP)
    if group is not None:
        group_at = where.at(ANNOTATION_GROUP)
        if re.fullmatch(r"[0-9]+", group) and int(group) < 2**64:
            raise group_at.error(f"must not be a number, got {group!r}")
        for key in (ANNOTATION_SLICE_SIZE, ANNOTATION_SLICE_TOPOLOGY, ANNOTATION_SLICE_LAYERS):
            if key in annotations:
                raise group_at.error(f"may not be set when {key} is set")
        if ANNOTATION_REQUIRED not in annotations and ANNOTATION_PREFERRED not in annotations:
            raise group_at.error(f"may not be set when neither {ANNOTATION_PREFERRED} nor {ANNOTATION_REQUIRED} is set")


def slice_layers_annotation(annotations: Mapping[str, str], where: Where) -> list[dict[str, Any]]:
    """The multi-layer slice annotation's layers (`where`: the annotations): a JSON list of 1 to
    3 layers, each a level and a size of at least 1, as Kueue's job webhooks check it. Empty
    when it is not set."""
    text = annotations.get(ANNOTATION_SLICE_LAYERS)
    if text is None:
        return []
    at = where.at(ANNOTATION_SLICE_LAYERS)
    try:
        layers = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise at.error(f"must be a JSON list of {{\"topology\": LEVEL, \"size\": PODS}}: {exc}") from None
    if not isinstance(layers, list):
        raise at.error(f"must be a JSON list of layers, got {_type_name(layers)}")
    if not 1 <= len(layers) <= MAX_SLICE_LAYERS:
        raise at.error(f"must list 1 to {MAX_SLICE_LAYERS} layers, got {len(layers)}")
    out = []
    for i, layer in enumerate(layers):
        lw = at.at(i)
        if not isinstance(layer, dict):
            raise lw.error(f"must be a mapping of topology and size, got {_type_name(layer)}")
        level = string(layer, "topology", lw, required=True)
        validate_label_key(level, lw.at("topology"))
        size = count(layer, "size", lw, minimum=1)
        if size is None:
            raise lw.at("size").error("is required")
        out.append({"topology": level, "size": size})
    return out  # levels named twice, sizes that do not divide: check_pod_set_slices


# Parsed PodSets by what parsing reads of them (see `parse_pod_set`); cleared when full.
_POD_SETS: dict[bytes, PodSet] = {}
POD_SETS_KEPT = 4096


def _pod_set_key(d: Any) -> bytes | None:
    """Everything `_parse_pod_set` reads of a PodSet, as bytes; None when it cannot be put so
    (it is then parsed, and its errors reported, as usual). A template's labels are left out:
    a Job's carry its own name and uid, its spec is the same for every Job of a template."""
    if type(d) is not dict:
        return None
    template = d.get("template")
    meta = template.get("metadata") if type(template) is dict else None
    if type(template) is not dict or (meta is not None and type(meta) is not dict):
        return None
    annotations = meta.get("annotations") if meta is not None else None
    try:
        return orjson.dumps((d.get("name"), d.get("count"), d.get("minCount"), template.get("spec"), annotations,
                             d.get("topologyRequest")))
    except TypeError:  # a value JSON cannot hold (a key that is not a string, an integer beyond 64 bits)
        return None


def parse_pod_set(d: Any, where: Where) -> PodSet:
    """A PodSet; the same one for PodSets that read the same (thousands of workloads come from
    a few templates, and parsing the pod spec is half of parsing a workload). PodSets, like
    every parsed object, are not changed in place once made."""
    key = _pod_set_key(d)
    if key is None:
        return _parse_pod_set(d, where)
    pod_set = _POD_SETS.get(key)
    if pod_set is None:
        pod_set = _parse_pod_set(d, where)
        if len(_POD_SETS) >= POD_SETS_KEPT:
            _POD_SETS.clear()
        _POD_SETS[key] = pod_set
    return pod_set


def _parse_pod_set(d: Any, where: Where) -> PodSet:
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    name = string(d, "name", where, default="main") or "main"
    if len(name) > 63 or _DNS_LABEL.fullmatch(name) is None:  # Kueue's PodSetReference
        raise where.at("name").error(f"must be a lowercase RFC 1123 label (a-z, 0-9 and '-', at most 63 "
                                     f"characters), got {_shown(name)}")
    pods = count(d, "count", where, default=1)
    min_count = count(d, "minCount", where)
    if min_count is not None and pods is not None and min_count > pods:
        raise where.at("minCount").error(f"must be <= count ({pods}), got {min_count}")
    template = mapping(d, "template", where)
    tw = where.at("template")
    raw_spec = mapping(template, "spec", tw)
    spec = parse_pod_spec(raw_spec, tw.at("spec"))
    check_no_pods_request(raw_spec, tw.at("spec"))
    deadline = integer(raw_spec, "activeDeadlineSeconds", tw.at("spec"), minimum=1)
    request = parse_topology_request(d.get("topologyRequest"), where.at("topologyRequest"))
    if request is None:
        annotations = string_map(mapping(template, "metadata", tw), "annotations", tw.at("metadata"))
        request = topology_request_from_annotations(annotations, tw.at("metadata").at("annotations"))
    return PodSet(name=name, count=pods, spec=spec, min_count=min_count, topology_request=request,
                  active_deadline_seconds=deadline, expected_runtime=_template_annotation(template, EXPECTED_RUNTIME),
                  limit_violations=limit_violations(raw_spec, tw.at("spec")))


def check_no_pods_request(spec: Mapping, where: Where) -> None:
    """Kueue's webhook: no container of a PodSet requests the resource `pods`, which Kueue
    counts itself (one a pod, against a ClusterQueue's `pods` quota)."""
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(sequence(spec, field_name, where)):
            resources = c.get("resources") if _is_mapping(c) else None
            requests = resources.get("requests") if _is_mapping(resources) else None
            if _is_mapping(requests) and PODS in requests:
                raise where.at(field_name).at(i).at("resources").at("requests").at(PODS).error(
                    "the key is reserved for Kueue's own use: it counts the pods itself, one a pod")


def _template_annotation(template: Mapping, key: str) -> str | None:
    """One annotation of a pod template, as written, without checking the others (only the
    topology annotations are the scheduler's business)."""
    metadata = template.get("metadata")
    annotations = metadata.get("annotations") if _is_mapping(metadata) else None
    value = annotations.get(key) if _is_mapping(annotations) else None
    return None if value is None else str(value)


def parse_pod_set_assignment(d: Any, where: Where, decode: Callable) -> PodSetAssignment:
    if not _is_mapping(d):
        raise where.error(f"must be a mapping, got {_type_name(d)}")
    flavors = string_map(d, "flavors", where)
    ta = d.get("topologyAssignment")
    assignment = None
    if ta is not None:
        try:
            assignment = decode(ta)
        except InputError as exc:
            raise exc.under(where.at("topologyAssignment").path).located(obj=where.obj) from None
    delayed = optional_string(d, "delayedTopologyRequest", where)
    if delayed not in (None, "Pending", "Ready"):
        raise where.at("delayedTopologyRequest").error(f"must be Pending or Ready, got {delayed!r}")
    return PodSetAssignment(
        name=string(d, "name", where, default="main") or "main",
        flavors=flavors,
        count=count(d, "count", where),
        resource_usage=MappingProxyType(resource_list(d, "resourceUsage", where)),
        topology_assignment=assignment,
        delayed_topology_request=delayed,
    )


def check_assigned_pods(admission: Admission, pod_sets: list[PodSet], where: Where) -> None:
    """Each PodSetAssignment names a PodSet of the workload, once (as Kueue's webhook checks),
    and its topologyAssignment cannot place more pods than both its pod set and its
    PodSetAssignment count: such a workload is invalid and none of its numbers can be trusted
    (charging them would over-count usage).

    Placing fewer, or as many as one of the two counts, is left alone: Kueue's own scheduler
    tests hold such admissions (pods of a group still arriving, partial admission)."""
    counts = {ps.name: ps.count for ps in pod_sets}
    assigned: set[str] = set()
    for i, psa in enumerate(admission.pod_set_assignments):
        # Kueue's webhook: each PodSetAssignment names a PodSet of the spec, once
        if psa.name not in counts:
            raise where.at("podSetAssignments").at(i).at("name").error(
                f"names no PodSet of the workload ({', '.join(repr(n) for n in counts) or 'none'}): {psa.name!r}")
        if psa.name in assigned:
            raise where.at("podSetAssignments").at(i).at("name").error(f"PodSet {psa.name!r} is assigned twice")
        assigned.add(psa.name)
        ta = psa.topology_assignment
        if ta is None:
            continue
        most = max(counts.get(psa.name, 0), psa.count or 0)
        placed = sum(d.count for d in ta.domains)
        if placed > most:
            raise where.at("podSetAssignments").at(i).at("topologyAssignment").error(
                f"places {placed} pods, more than the {most} of PodSet {psa.name!r}")


def parse_conditions(d: Mapping, where: Where) -> list[Condition]:
    raw = d.get("conditions")
    if raw is None:
        return []
    if type(raw) is list:
        # the common case read without making a Where for every field (see parse_owner_references)
        out = []
        for c in raw:
            if type(c) is not dict:
                break
            kind, status = c.get("type"), _plain_string(c.get("status"), "Unknown")
            reason, message = _plain_string(c.get("reason")), _plain_string(c.get("message"))
            if not (type(kind) is str and kind) or status is None or reason is None or message is None:
                break
            at = c.get("lastTransitionTime")
            if type(at) is str and at:
                try:
                    when = _time_text(at)
                except ValueError:
                    break
            elif at is None or at == "":
                when = None
            else:
                break
            out.append(Condition(kind, status, reason, message, when))
        else:
            return out
    return _conditions_checked(d, where)


def _conditions_checked(d: Mapping, where: Where) -> list[Condition]:
    out = []
    for i, c in enumerate(sequence(d, "conditions", where)):
        cw = where.at("conditions").at(i)
        if not _is_mapping(c):
            raise cw.error(f"must be a mapping, got {_type_name(c)}")
        out.append(Condition(string(c, "type", cw, required=True), string(c, "status", cw, default="Unknown"),
                             string(c, "reason", cw), string(c, "message", cw),
                             timestamp(c, "lastTransitionTime", cw)))
    return out


def parse_workload(obj: Mapping, where: Where, decode: Callable) -> Workload:
    meta, name = metadata_name(obj, where)
    mw = where.at("metadata")
    spec = mapping(obj, "spec", where, required=True)
    sw = where.at("spec")
    raw_pod_sets = sequence(spec, "podSets", sw)
    if not raw_pod_sets:
        raise sw.at("podSets").error("must list at least one PodSet")
    if len(raw_pod_sets) > MAX_POD_SETS:  # Kueue's CRD: the API server refuses more
        raise sw.at("podSets").error(f"must list at most {MAX_POD_SETS} PodSets, got {len(raw_pod_sets)}")
    pod_sets = [parse_pod_set(ps, sw.at("podSets").at(i)) for i, ps in enumerate(raw_pod_sets)]
    seen: set[str] = set()
    for i, ps in enumerate(pod_sets):
        if ps.name in seen:
            raise sw.at("podSets").at(i).at("name").error(f"PodSet name {ps.name!r} is used twice")
        seen.add(ps.name)
    with_min_count = [ps.name for ps in pod_sets if ps.min_count is not None]
    if len(with_min_count) > 1:  # Kueue's webhook: partial admission shrinks one PodSet only
        raise sw.at("podSets").error(f"at most one PodSet can use minCount, got {len(with_min_count)}: "
                                     f"{', '.join(map(repr, with_min_count))}")
    check_slices(pod_sets, raw_pod_sets, sw.at("podSets"))
    status = mapping(obj, "status", where)
    stw = where.at("status")
    admission = None
    raw_admission = status.get("admission")
    if raw_admission is not None:
        aw = stw.at("admission")
        if not _is_mapping(raw_admission):
            raise aw.error(f"must be a mapping, got {_type_name(raw_admission)}")
        admission = Admission(
            cluster_queue=string(raw_admission, "clusterQueue", aw, required=True),
            pod_set_assignments=[parse_pod_set_assignment(p, aw.at("podSetAssignments").at(i), decode)
                                 for i, p in enumerate(sequence(raw_admission, "podSetAssignments", aw))],
        )
    if admission is not None:
        check_assigned_pods(admission, pod_sets, stw.at("admission"))
    checks = []
    for ac, cw in mapping_entries(status, "admissionChecks", stw):
        checks.append(AdmissionCheckState(string(ac, "name", cw, required=True),
                                          _choice(ac, "state", cw, _CHECK_STATES) or "Pending",
                                          string(ac, "message", cw), parse_pod_set_updates(ac, cw, pod_sets),
                                          integer(ac, "retryCount", cw, minimum=0, maximum=MAX_INT32),
                                          integer(ac, "requeueAfterSeconds", cw, minimum=0, maximum=MAX_INT32),
                                          timestamp(ac, "lastTransitionTime", cw)))
    unhealthy = []
    for i, n in enumerate(sequence(status, "unhealthyNodes", stw)):
        nw = stw.at("unhealthyNodes").at(i)
        if _is_mapping(n):
            unhealthy.append(string(n, "name", nw, required=True))
        elif isinstance(n, str) and n:  # a node's name alone, as some writers give it
            unhealthy.append(n)
        else:
            raise nw.error(f"must be a node ({{name: ...}}), got {n!r}")
    reclaimable = parse_reclaimable_pods(status, pod_sets, stw)
    requeue = mapping(status, "requeueState", stw)
    rw = stw.at("requeueState")
    conditions = parse_conditions(status, stw)
    # DeactivationTarget=True: Kueue's workload controller is about to set spec.active=false
    deactivating = any(c.type == "DeactivationTarget" and c.status == "True" for c in conditions)
    gates = [string(g, "name", gw, required=True) for g, gw in mapping_entries(spec, "preemptionGates", sw)]
    positions = {string(g, "name", gw, required=True): string(g, "position", gw, default="Closed") or "Closed"
                 for g, gw in mapping_entries(status, "preemptionGates", stw)}
    priority_class = object_reference(spec, "priorityClassName", sw, "a priority class's name") or None
    ref = mapping(spec, "priorityClassRef", sw)
    if ref:
        priority_class = object_reference(ref, "name", sw.at("priorityClassRef"), "a priority class's name") or \
            priority_class
    return Workload(
        namespace=metadata_namespace(meta, where),
        name=name,
        pod_sets=pod_sets,
        queue_name=object_reference(spec, "queueName", sw, "a LocalQueue's name"),
        priority=integer(spec, "priority", sw, minimum=MIN_INT32, maximum=MAX_INT32),
        priority_class_name=priority_class,
        uid=string(meta, "uid", mw),
        generation=integer(meta, "generation", mw, default=0, minimum=0) or 0,
        creation_timestamp=timestamp(meta, "creationTimestamp", mw),
        labels=string_map(meta, "labels", mw),
        annotations=string_map(meta, "annotations", mw),
        owner_references=parse_owner_references(meta, mw),
        active=bool(boolean(spec, "active", sw, default=True)) and not deactivating,
        admission=admission,
        conditions=conditions,
        admission_checks=checks,
        unhealthy_nodes=unhealthy,
        source_api_version=str(obj.get("apiVersion") or "kueue.x-k8s.io/v1beta2"),
        requeue_count=count(requeue, "count", rw) or 0,
        requeue_at=timestamp(requeue, "requeueAt", rw),
        reclaimable_pods=reclaimable,
        preemption_gates=tuple(gates),
        preemption_gate_positions=positions,
    )


def parse_pod_set_updates(check: Mapping, where: Where, pod_sets: list[PodSet]) -> tuple[PodSetUpdate, ...]:
    """An admission check's podSetUpdates: what placement reads of them (node selector and
    tolerations; labels and annotations only reach the pods). As Kueue's webhook checks, each
    names a PodSet of the workload: an update of no PodSet would be lost."""
    out = []
    for raw, uw in mapping_entries(check, "podSetUpdates", where):
        name = string(raw, "name", uw, required=True)
        check_pod_set_named(name, pod_sets, uw.at("name"))
        out.append(PodSetUpdate(name, string_map(raw, "nodeSelector", uw), parse_tolerations(raw, "tolerations", uw)))
    return tuple(out)


def check_pod_set_named(name: str, pod_sets: list[PodSet], where: Where) -> None:
    """`name` (at `where`) names a PodSet of the workload."""
    if all(ps.name != name for ps in pod_sets):
        known = ", ".join(repr(ps.name) for ps in pod_sets) or "none"
        raise where.error(f"names no PodSet of the workload: {name!r} (PodSets: {known})")


def parse_reclaimable_pods(status: Mapping, pod_sets: list[PodSet], stw: Where) -> dict[str, int]:
    """status.reclaimablePods: per PodSet, the pods that completed; as Kueue's validation, each
    names a PodSet of the workload and counts at most its pods."""
    counts = {ps.name: ps.count for ps in pod_sets}
    out: dict[str, int] = {}
    for entry, where in mapping_entries(status, "reclaimablePods", stw):
        name = string(entry, "name", where, required=True)
        check_pod_set_named(name, pod_sets, where.at("name"))
        if name in out:
            raise where.at("name").error(f"PodSet {name!r} is listed twice")
        value = count(entry, "count", where, default=0) or 0
        if value > counts[name]:
            raise where.at("count").error(f"should be less or equal to {counts[name]} (the PodSet's count), "
                                          f"got {value}")
        out[name] = value
    return out


# ---------------------------------------------------------------- dispatch


@dataclass
class ParsedObjects:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    flavors: list[ResourceFlavor] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    local_queues: list[LocalQueue] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    priority_classes: list[WorkloadPriorityClass] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    # v1 Namespace name -> its labels (what a ClusterQueue's namespaceSelector is matched against)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # object label -> file it came from
    # workload key -> where it stands in the engine's order (default: the order read); a
    # store that keeps objects in rows gives its row ids, so that a state built afresh and
    # one fed row by row list workloads in the same order
    workload_order: dict[str, int] = field(default_factory=dict)


_CORE = {"Node": ("nodes", parse_node), "Pod": ("pods", parse_pod)}
_KUEUE = {
    "Topology": ("topologies", parse_topology),
    "ResourceFlavor": ("flavors", parse_resource_flavor),
    "ClusterQueue": ("cluster_queues", parse_cluster_queue),
    "LocalQueue": ("local_queues", parse_local_queue),
    "Cohort": ("cohorts", parse_cohort),
    "AdmissionCheck": ("admission_checks", parse_admission_check),
    "WorkloadPriorityClass": ("priority_classes", parse_priority_class),
}


def parse_objects(
    items: list[tuple[str, Any]], *, decode_assignment: Callable, warn: Callable[[str], None]
) -> ParsedObjects:
    """Every object we read, grouped by kind; other kinds are skipped with a warning."""
    out = ParsedObjects()
    for file, obj in items:
        label = object_label(obj) if _is_mapping(obj) else "object"
        where = Where(label)
        try:
            if not _is_mapping(obj):
                raise where.error(f"expected a Kubernetes object (a mapping), got {_type_name(obj)}")
            kind = obj.get("kind")
            api_version = obj.get("apiVersion") or ""
            if not kind:
                raise where.at("kind").error("is required")
            if not isinstance(kind, str):
                raise where.at("kind").error(f"must be a string, got {_type_name(kind)}")
            if not isinstance(api_version, str):
                raise where.at("apiVersion").error(f"must be a string, got {_type_name(api_version)}")
            group = api_version.split("/")[0] if "/" in api_version else ""
            if kind in _CORE and group == "":
                attr, parser = _CORE[kind]
                getattr(out, attr).append(parser(obj, where))
            elif kind in _KUEUE and group == KUEUE_GROUP:
                attr, parser = _KUEUE[kind]
                getattr(out, attr).append(parser(obj, where))
            elif kind == "Workload" and group == KUEUE_GROUP:
                out.workloads.append(parse_workload(obj, where, decode_assignment))
            elif kind == "Namespace" and group == "":
                namespace = parse_namespace(obj, where)
                out.namespaces[namespace.name] = namespace.labels
            else:
                warn(f"{file}: {label}: kind {kind!r} ({api_version or 'no apiVersion'}) is not read; skipped")
                continue
            # one object, one state: a second copy (the same file given twice, two versions
            # of one object) would silently replace the first in the cluster's state
            if label in out.origins:
                raise where.error(f"appears twice (first in {out.origins[label]}): give each object once")
            out.origins[label] = file
        except InputError as exc:
            raise exc.located(file=file, obj=label) from None
    return out
