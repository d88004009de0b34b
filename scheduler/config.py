"""Kueue's manager Configuration (`config.kueue.x-k8s.io` `Configuration`), for what it says
about scheduling.

Read: `resources.transformations` and `resources.excludeResourcePrefixes` (how a PodSet's
requests become the resources it is charged for in quota), `resources.quotaCheckStrategy`
(whether a resource no ClusterQueue resource group covers blocks admission or is left out
of quota, under the QuotaCheckStrategy gate), `fairSharing` (ordering and
preemption across a cohort), `waitForPodsReady` (blocked admission, eviction of
workloads whose pods do not become ready, requeueing with backoff) and `featureGates`
(which Kueue takes instead of its `--feature-gates` flag, never together with it), and
`admissionFairSharing`, checked as Kueue checks it (the engine does not order by LocalQueue
usage: a ClusterQueue that asks for it is warned about). Every other field is Kueue's
business and ignored; a bad value in a read field is an error naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from scheduler.errors import FlagError, InputError
from scheduler.features import FeatureGates, gate_problem
from scheduler.quantity import CPU, QuantityError, to_fraction

API_GROUP = "config.kueue.x-k8s.io"
API_VERSIONS = ("v1beta1", "v1beta2")
RETAIN, REPLACE = "Retain", "Replace"
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
PREEMPTION_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
EVICTION, CREATION = "Eviction", "Creation"
BLOCK_UNDECLARED, IGNORE_UNDECLARED = "BlockUndeclared", "IgnoreUndeclared"
QUOTA_CHECK_STRATEGIES = (BLOCK_UNDECLARED, IGNORE_UNDECLARED)


@dataclass(frozen=True)
class ResourceTransformation:
    """One input resource turned into outputs (per unit of input), kept (Retain) or dropped (Replace)."""

    input: str
    strategy: str = RETAIN
    outputs: Mapping[str, Fraction] = field(default_factory=dict)  # per whole unit of input
    multiply_by: str = ""


@dataclass(frozen=True)
class FairSharing:
    preemption_strategies: tuple[str, ...] = PREEMPTION_STRATEGIES


@dataclass(frozen=True)
class RequeuingStrategy:
    timestamp: str = EVICTION
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout_seconds: float = 300.0
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = field(default_factory=RequeuingStrategy)
    recovery_timeout_seconds: float | None = None  # None: the timeout; 0: not checked


@dataclass(frozen=True)
class AdmissionFairSharing:
    """admissionFairSharing: ordering a ClusterQueue's workloads by their LocalQueues' decayed
    usage, for ClusterQueues whose spec.admissionScope.admissionMode asks for it."""

    usage_half_life_seconds: float = 0.0
    usage_sampling_interval_seconds: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Configuration:
    transformations: Mapping[str, ResourceTransformation] = field(default_factory=dict)
    exclude_resource_prefixes: tuple[str, ...] = ()
    fair_sharing: FairSharing | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    feature_gates: Mapping[str, bool] = field(default_factory=dict)  # featureGates, as written
    admission_fair_sharing: AdmissionFairSharing | None = None
    # resources.quotaCheckStrategy as written ("" when unset: BlockUndeclared); read only while
    # the QuotaCheckStrategy gate is on, and checked then (`check_configuration`)
    quota_check_strategy: str = ""
    file: str = ""  # where it was read from, for the errors found once the gates are known
    # top-level fields no Kueue version has (a typo, most likely): Kueue refuses them
    unknown_fields: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        """What is worth telling whoever runs with this Configuration."""
        where = f"{self.file}: Configuration" if self.file else "Configuration"
        return [f"{where}: {name}: not a field of Kueue's Configuration (Kueue refuses unknown fields); ignored"
                for name in self.unknown_fields]

    def ignores_undeclared(self, gates: FeatureGates) -> bool:
        """Resources no resource group of the ClusterQueue covers are left out of quota instead
        of blocking admission (Kueue's IgnoreUndeclaredResources)."""
        return self.quota_check_strategy == IGNORE_UNDECLARED and gates.QuotaCheckStrategy

    @property
    def changes_requests(self) -> bool:
        return bool(self.transformations or self.exclude_resource_prefixes)

    def quota_requests(self, requests: Mapping[str, int]) -> Mapping[str, int]:
        """One pod's requests as Kueue charges them to quota: excluded prefixes dropped, then
        the transformations applied (Kueue's dropExcludedResources, applyResourceTransformations)."""
        if not self.changes_requests:
            return requests
        kept = {name: value for name, value in requests.items()
                if not name.startswith(self.exclude_resource_prefixes)}
        if not any(name in self.transformations for name in kept):
            return kept
        out: dict[str, int] = {}
        produced: dict[str, Fraction] = {}  # outputs, exact until summed (Quantity arithmetic)
        for name, value in kept.items():
            rule = self.transformations.get(name)
            if rule is None:
                produced[name] = produced.get(name, Fraction(0)) + as_amount(name, value)
                continue
            units = whole_units(name, value)
            if rule.multiply_by and rule.multiply_by in kept:
                units *= whole_units(rule.multiply_by, kept[rule.multiply_by])
            for output, per_unit in rule.outputs.items():
                produced[output] = produced.get(output, Fraction(0)) + per_unit * units
            if rule.strategy == RETAIN:
                produced[name] = produced.get(name, Fraction(0)) + as_amount(name, value)
        for name, amount in produced.items():
            out[name] = integer_value(name, amount)
        return out


NO_CONFIGURATION = Configuration()


def integer_value(name: str, amount: Fraction) -> int:
    """Kueue's integer value of an amount: milli-units for cpu, whole units otherwise, rounded up."""
    scaled = amount * 1000 if name == CPU else amount
    return -((-scaled.numerator) // scaled.denominator)


def as_amount(name: str, value: int) -> Fraction:
    return Fraction(value, 1000) if name == CPU else Fraction(value)


def whole_units(name: str, value: int) -> int:
    """A resource value in whole units, rounded up, as Quantity.Value() gives it."""
    return -(-value // 1000) if name == CPU else value


# ---------------------------------------------------------------- parsing

# Kueue decodes its Configuration strictly: a field it does not know is an error. The sections
# the engine reads are held to their fields here (any Kueue version's); other top-level names
# that no Kueue version has are reported as warnings (`Configuration.unknown_fields`), since the
# sections the engine does not read change from one Kueue version to the next.
_SECTION_FIELDS: dict[str, frozenset[str]] = {
    "resources": frozenset({"excludeResourcePrefixes", "transformations", "deviceClassMappings",
                            "quotaCheckStrategy"}),
    "resources.transformations[]": frozenset({"input", "strategy", "multiplyBy", "outputs"}),
    "fairSharing": frozenset({"enable", "preemptionStrategies"}),
    "admissionFairSharing": frozenset({"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}),
    "waitForPodsReady": frozenset({"enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}),
    "waitForPodsReady.requeuingStrategy": frozenset({"timestamp", "backoffLimitCount", "backoffBaseSeconds",
                                                     "backoffMaxSeconds"}),
}
_TOP_LEVEL_FIELDS = frozenset({
    "apiVersion", "kind", "namespace", "webhook", "leaderElection", "metrics", "health", "pprofBindAddress",
    "controller", "tls", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "internalCertManagement",
    "waitForPodsReady", "clientConnection", "integrations", "multiKueue", "fairSharing", "admissionFairSharing",
    "resources", "featureGates", "objectRetentionPolicies", "queueVisibility", "visibilityServer",
})


def _known_fields(doc: Mapping, section: str, where: str) -> None:
    """A field the section does not have is an error, as Kueue's strict decoding makes it."""
    allowed = _SECTION_FIELDS[section]
    for key in doc:
        if key not in allowed:
            raise InputError(f"unknown field {key!r} (Kueue's Configuration has {', '.join(sorted(allowed))})",
                             field=f"{where}{key}")

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", re.ASCII)
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


# Go's time.Duration is int64 nanoseconds: Kueue's configuration cannot hold a longer one
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
MAX_DURATION_TEXT = "2562047h47m16.854775807s"


def parse_duration(raw: object, where: str) -> float:
    """A Go duration ("5m", "1h30m", "90s", "0") in seconds."""
    if not isinstance(raw, str) or not raw:
        raise InputError(f"must be a duration such as \"5m\" or \"90s\", got {raw!r}", field=where)
    text = raw.strip()
    if text == "0":
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    parts = _DURATION_PART.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise InputError(f"{raw!r} is not a duration (e.g. \"5m\", \"1h30m\", \"90s\")", field=where)
    seconds = sign * sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds < 0:
        raise InputError(f"{raw!r} must not be negative", field=where)
    if seconds > MAX_DURATION_SECONDS:
        raise InputError(f"{raw!r} is longer than the longest duration, {MAX_DURATION_TEXT} (about 292 years)",
                         field=where)
    return seconds


def _mapping(doc: Mapping, key: str, where: str) -> Mapping | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"must be a mapping, got {type(value).__name__}", field=f"{where}{key}")
    return value


def _list(doc: Mapping, key: str, where: str) -> list:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"must be a list, got {type(value).__name__}", field=f"{where}{key}")
    return value


def _bool(doc: Mapping, key: str, where: str, default: bool) -> bool:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"must be true or false, got {value!r}", field=f"{where}{key}")
    return value


def _int(doc: Mapping, key: str, where: str, default: int | None, *, minimum: int = 0) -> int | None:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= 2**31 - 1:
        raise InputError(f"must be an integer from {minimum} to 2147483647, got {value!r}", field=f"{where}{key}")
    return value


def _resource_name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"must be a resource name, got {value!r}", field=where)
    return value


def _transformation(doc: object, where: str) -> ResourceTransformation:
    if not isinstance(doc, Mapping):
        raise InputError("must be a mapping with input, strategy and outputs", field=where)
    _known_fields(doc, "resources.transformations[]", f"{where}.")
    name = _resource_name(doc.get("input"), f"{where}.input")
    strategy = RETAIN if doc.get("strategy") is None else doc["strategy"]
    if strategy not in (RETAIN, REPLACE):
        raise InputError(f"must be Retain or Replace, got {strategy!r}", field=f"{where}.strategy")
    multiply_by = doc.get("multiplyBy") or ""
    if multiply_by:
        _resource_name(multiply_by, f"{where}.multiplyBy")
    outputs: dict[str, Fraction] = {}
    for output, quantity in (_mapping(doc, "outputs", f"{where}.") or {}).items():
        field_name = f"{where}.outputs.{output}"
        _resource_name(output, field_name)
        try:
            amount = to_fraction(quantity)
        except QuantityError as exc:
            raise InputError(str(exc), field=field_name) from None
        if amount < 0:
            raise InputError(f"{quantity!r} must not be negative", field=field_name)
        outputs[output] = amount
    return ResourceTransformation(name, strategy, MappingProxyType(outputs), multiply_by)


def _quota_check_strategy(doc: Mapping) -> str:
    value = doc.get("quotaCheckStrategy")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"must be {BLOCK_UNDECLARED} or {IGNORE_UNDECLARED}, got {value!r}",
                         field="resources.quotaCheckStrategy")
    return value


def check_configuration(config: Configuration, gates: FeatureGates) -> None:
    """What Kueue's validation refuses once the gates are known: with the QuotaCheckStrategy gate
    on, a quotaCheckStrategy that is neither BlockUndeclared nor IgnoreUndeclared, or
    IgnoreUndeclared together with excludeResourcePrefixes (with the gate off Kueue ignores the
    field, and so does this)."""
    strategy = config.quota_check_strategy
    if not strategy or not gates.QuotaCheckStrategy:
        return
    where = {"field": "resources.quotaCheckStrategy", "obj": "Configuration", "file": config.file}
    if strategy not in QUOTA_CHECK_STRATEGIES:
        raise InputError(f"must be {BLOCK_UNDECLARED} or {IGNORE_UNDECLARED}, got {strategy!r}", **where)
    if strategy == IGNORE_UNDECLARED and config.exclude_resource_prefixes:
        raise InputError(f"excludeResourcePrefixes is not allowed when quotaCheckStrategy is {IGNORE_UNDECLARED}",
                         **where)


def _resources(doc: Mapping) -> tuple[dict[str, ResourceTransformation], tuple[str, ...]]:
    _known_fields(doc, "resources", "resources.")
    transformations: dict[str, ResourceTransformation] = {}
    for i, item in enumerate(_list(doc, "transformations", "resources.")):
        rule = _transformation(item, f"resources.transformations[{i}]")
        if rule.input in transformations:
            raise InputError(f"input {rule.input!r} is transformed twice",
                             field=f"resources.transformations[{i}].input")
        transformations[rule.input] = rule
    prefixes = []
    for i, prefix in enumerate(_list(doc, "excludeResourcePrefixes", "resources.")):
        if not isinstance(prefix, str) or not prefix:
            raise InputError(f"must be a non-empty string, got {prefix!r}",
                             field=f"resources.excludeResourcePrefixes[{i}]")
        prefixes.append(prefix)
    return transformations, tuple(prefixes)


def _fair_sharing(doc: Mapping | None, version: str) -> FairSharing | None:
    if doc is None:
        return None
    _known_fields(doc, "fairSharing", "fairSharing.")
    # v1beta1 has an `enable` switch; in v1beta2 the section being there enables it
    if not _bool(doc, "enable", "fairSharing.", version != "v1beta1"):
        return None
    strategies = _list(doc, "preemptionStrategies", "fairSharing.")
    for i, s in enumerate(strategies):
        if s not in PREEMPTION_STRATEGIES:
            raise InputError(f"must be one of {', '.join(PREEMPTION_STRATEGIES)}, got {s!r}",
                             field=f"fairSharing.preemptionStrategies[{i}]")
    if len(set(strategies)) != len(strategies):
        raise InputError("lists a strategy twice", field="fairSharing.preemptionStrategies")
    if strategies == [LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]:
        # Kueue accepts either strategy alone, or both with LessThanOrEqualToFinalShare first
        raise InputError(f"{LESS_THAN_OR_EQUAL_TO_FINAL_SHARE} must come before {LESS_THAN_INITIAL_SHARE}",
                         field="fairSharing.preemptionStrategies")
    return FairSharing(tuple(strategies) or PREEMPTION_STRATEGIES)


def _requeuing(doc: Mapping | None) -> RequeuingStrategy:
    if doc is None:
        return RequeuingStrategy()
    where = "waitForPodsReady.requeuingStrategy."
    _known_fields(doc, "waitForPodsReady.requeuingStrategy", where)
    timestamp = doc.get("timestamp") or EVICTION
    if timestamp not in (EVICTION, CREATION):
        raise InputError(f"must be Eviction or Creation, got {timestamp!r}", field=f"{where}timestamp")
    base = _int(doc, "backoffBaseSeconds", where, 60)
    maximum = _int(doc, "backoffMaxSeconds", where, 3600, minimum=1)
    return RequeuingStrategy(timestamp, _int(doc, "backoffLimitCount", where, None), int(base or 0), int(maximum or 1))


def _wait_for_pods_ready(doc: Mapping | None, version: str) -> WaitForPodsReady | None:
    if doc is None:
        return None
    where = "waitForPodsReady."
    _known_fields(doc, "waitForPodsReady", where)
    if not _bool(doc, "enable", where, version != "v1beta1"):
        return None
    timeout = parse_duration(doc["timeout"], f"{where}timeout") if doc.get("timeout") is not None else 300.0
    recovery = doc.get("recoveryTimeout")
    return WaitForPodsReady(
        timeout_seconds=timeout,
        # v1beta1 blocked admission unless told otherwise; v1beta2 does not
        block_admission=_bool(doc, "blockAdmission", where, version == "v1beta1"),
        requeuing_strategy=_requeuing(_mapping(doc, "requeuingStrategy", where)),
        recovery_timeout_seconds=None if recovery is None else parse_duration(recovery, f"{where}recoveryTimeout"),
    )


def _admission_fair_sharing(doc: Mapping | None) -> AdmissionFairSharing | None:
    """admissionFairSharing, as Kueue defaults and validates it: usageSamplingInterval 5m when
    unset or zero, no negative duration, no negative resource weight."""
    if doc is None:
        return None
    where = "admissionFairSharing."
    _known_fields(doc, "admissionFairSharing", where)
    half_life = doc.get("usageHalfLifeTime")
    sampling = doc.get("usageSamplingInterval")
    weights: dict[str, float] = {}
    for name, weight in (_mapping(doc, "resourceWeights", where) or {}).items():
        field_name = f"{where}resourceWeights.{name}"
        _resource_name(name, field_name)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight != weight:
            raise InputError(f"must be a number, got {weight!r}", field=field_name)
        if weight < 0:
            raise InputError(f"must not be negative, got {weight!r}", field=field_name)
        weights[name] = float(weight)
    return AdmissionFairSharing(
        usage_half_life_seconds=0.0 if half_life is None else parse_duration(half_life, f"{where}usageHalfLifeTime"),
        usage_sampling_interval_seconds=(
            (parse_duration(sampling, f"{where}usageSamplingInterval") if sampling is not None else 0.0) or 300.0),
        resource_weights=MappingProxyType(weights),
    )


def _feature_gates(doc: Mapping | None) -> Mapping[str, bool]:
    """featureGates: Kueue's gate names, each true or false (a Go map[string]bool)."""
    out: dict[str, bool] = {}
    for name, value in (doc or {}).items():
        where = f"featureGates.{name}"
        problem = gate_problem(name) or (None if isinstance(value, bool) else f"must be true or false, got {value!r}")
        if problem is not None:
            raise InputError(problem, field=where)
        out[name] = value
    return MappingProxyType(out)


def effective_gates(flag: str | None, config: Configuration | None, *, flag_name: str = "--feature-gates",
                    ) -> FeatureGates:
    """The feature gates a run follows: those of `flag` (Kueue's `--feature-gates` syntax) or
    those of the Configuration's featureGates. Kueue takes one or the other: both at once is
    an error, not a merge, so that no gate is silently overridden."""
    written = config.feature_gates if config is not None else {}
    if written and (flag or "").strip():
        raise FlagError(f"{flag_name} and the Configuration's featureGates both set feature gates; Kueue "
                        f"takes one or the other: set them in one place")
    gates = FeatureGates(dict(written)) if written else FeatureGates.parse(flag)
    if config is not None:
        check_configuration(config, gates)
    return gates


def parse_configuration(doc: Any, *, file: str = "") -> Configuration:
    """A Configuration document, checked; errors name the file and the field."""
    try:
        if not isinstance(doc, Mapping):
            raise InputError(f"expected a Configuration (a mapping), got {type(doc).__name__}")
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        group, _, version = str(api_version or "").partition("/")
        if kind != "Configuration" or group != API_GROUP or version not in API_VERSIONS:
            raise InputError(f"expected kind Configuration of {API_GROUP}/v1beta1 or /v1beta2, "
                             f"got kind {kind!r} of {api_version!r}")
        resources = _mapping(doc, "resources", "") or {}
        transformations, prefixes = _resources(resources)
        return Configuration(
            transformations=MappingProxyType(transformations),
            exclude_resource_prefixes=prefixes,
            fair_sharing=_fair_sharing(_mapping(doc, "fairSharing", ""), version),
            wait_for_pods_ready=_wait_for_pods_ready(_mapping(doc, "waitForPodsReady", ""), version),
            feature_gates=_feature_gates(_mapping(doc, "featureGates", "")),
            admission_fair_sharing=_admission_fair_sharing(_mapping(doc, "admissionFairSharing", "")),
            quota_check_strategy=_quota_check_strategy(resources),
            file=file,
            unknown_fields=tuple(key for key in doc if key not in _TOP_LEVEL_FIELDS),
        )
    except InputError as exc:
        raise exc.located(file=file, obj="Configuration") from None


def parse_configuration_text(text: str, *, file: str = "") -> Configuration:
    """The Configuration in YAML or JSON text (one document)."""
    from scheduler.loader import parse_text

    documents = parse_text(text, file=file)
    if len(documents) != 1:
        raise InputError(f"expected one Configuration document, found {len(documents)}", file=file)
    return parse_configuration(documents[0], file=file)


def read_configuration(path: str) -> Configuration:
    """The Configuration in a YAML or JSON file."""
    from scheduler.loader import read_text

    return parse_configuration_text(read_text(path), file=path)
