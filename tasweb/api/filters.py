"""Query filters of the list endpoints (django-filter). Every filter validates its value:
an unknown status, flavor, level or ordering field is a 400 that names the parameter."""

from __future__ import annotations

from datetime import UTC
from functools import cached_property

from django import forms
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

from tasweb.api import selectors
from tasweb.api.pagination import meant_hint
from tasweb.api.statuses import STATUS_FILTER_CHOICES, WAITING, statuses_wanted
from tasweb.cluster import models as cluster
from tasweb.scheduling.models import MAX_LEVELS, AdmissionComparison, ComparisonCategory, EventKind, WorkloadEvent

LEVEL_PREFIX = "level."
REPEATABLE = frozenset({"level", "label"})  # KEY=VALUE pairs, each one more condition


def with_label(queryset: QuerySet, key: str, value: str | None) -> QuerySet:
    """Nodes whose label `key` is `value` (any value when None); key transforms work on
    PostgreSQL and on the embedded default's SQLite alike."""
    if value is None:
        return queryset.filter(labels__has_key=key)
    alias = f"label_{len(queryset.query.annotations)}"
    return queryset.alias(**{alias: KeyTransform(key, "labels")}).filter(**{alias: value})


def _invalid(field: str, message: str) -> forms.ValidationError:
    return forms.ValidationError({field: message})


def flavor_choices() -> list[tuple[str, str]]:
    """ResourceFlavors of the mirror, read when a request validates (a callable: the schema's
    filter fields are built once and cached)."""
    return [(name, name) for name in selectors.flavor_names()]


def split_pair(raw: str, field: str, separator: str = "=") -> tuple[str, str | None]:
    key, sep, value = raw.partition(separator)
    key = key.strip()
    if not key:
        raise _invalid(field, f"expected KEY or KEY{separator}VALUE, got {raw!r}")
    return key, (value if sep else None)


def domain_path(raw: str, field: str) -> list[str]:
    parts = [p for p in raw.strip().strip("/").split("/")]
    if not raw.strip().strip("/") or any(not p for p in parts):
        raise _invalid(field, f"expected a domain path of level values from the root, like b1/r3; got {raw!r}")
    if len(parts) > MAX_LEVELS:
        raise _invalid(field, f"a topology has at most {MAX_LEVELS} levels; got {len(parts)} values")
    return parts


class StrictBooleanField(forms.Field):
    """true/false in any case (or 1/0, yes/no); anything else is an error rather than "no filter"."""

    def to_python(self, value):
        if value in (None, ""):
            return None
        lowered = str(value).lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise forms.ValidationError(f"expected true or false, got {value!r}")


class StrictBooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", forms.TextInput)  # the default widget turns bad values into "no filter"
        super().__init__(*args, **kwargs)


READY_VALUES = {"true": "True", "1": "True", "false": "False", "0": "False", "unknown": "Unknown", "none": "none"}
# Every spelling READY_VALUES accepts, in any case, as a pattern the OpenAPI schema can state.
READY_PATTERN = "^(?:" + "|".join(
    "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in value) for value in READY_VALUES) + ")$"


class ReadyField(forms.Field):
    """The status of a node's Ready condition: True, False, Unknown, or none (the node reports
    no Ready condition); in any case, and 1/0 for True/False."""

    def to_python(self, value):
        if value in (None, ""):
            return None
        stored = READY_VALUES.get(str(value).lower())
        if stored is None:
            raise forms.ValidationError(f"expected true, false, unknown or none, got {value!r}")
        return stored


@extend_schema_field({"type": "string", "pattern": READY_PATTERN})
class ReadyFilter(filters.Filter):
    field_class = ReadyField

    def filter(self, qs: QuerySet, value):
        if value is None:
            return qs
        return qs.filter(**{self.field_name: "" if value == "none" else value})  # "": no Ready condition


class UTCDateTimeField(IsoDateTimeField):
    """An RFC 3339 time, converted to UTC (the database rejects odd offsets such as -18:08)."""

    default_error_messages = {
        "invalid": "must be an RFC 3339 time such as 2025-06-01T12:00:00Z (a '+' of an offset is sent as %2B)",
    }

    def clean(self, value):
        value = super().clean(value)
        if value is None:
            return None
        try:
            return value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError(f"time out of range: {value.isoformat()} is outside the years 1 to 9999 "
                                        "once in UTC") from None


class TimeFilter(filters.IsoDateTimeFilter):
    field_class = UTCDateTimeField


class StableOrderingFilter(filters.OrderingFilter):
    """An ordering that ends with a unique tiebreaker, so rows that tie on the fields asked
    for keep one order from request to request and a page boundary never repeats or skips
    one of them."""

    def __init__(self, *args, tiebreak: tuple[str, ...] = ("id",), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tiebreak = tiebreak

    def filter(self, qs: QuerySet, value) -> QuerySet:
        qs = super().filter(qs, value)
        if value in (None, "", [], ()):
            return qs
        ordering = list(qs.query.order_by)
        named = {field.lstrip("-") for field in ordering if isinstance(field, str)}
        return qs.order_by(*ordering, *(field for field in self.tiebreak if field.lstrip("-") not in named))


class LevelFilterMixin:
    """`level=KEY=VALUE` (repeatable) and its shorthand `level.KEY=VALUE`, e.g.
    `?level.cloud.example.com/topology-rack=r3`. KEY must be a level of some Topology."""

    @cached_property
    def topologies(self) -> dict[str, list[str]]:
        """Each Topology's levels, read once per request."""
        return selectors.topology_levels()

    def level_pairs(self) -> list[tuple[str, str]]:
        pairs = []
        for raw in self.data.getlist("level") if hasattr(self.data, "getlist") else []:
            if not raw:
                continue  # an empty value is no filter, as for every text parameter
            key, value = split_pair(raw, "level")
            if value is None:
                raise _invalid("level", f"expected KEY=VALUE, got {raw!r}")
            pairs.append((key, value))
        for name in self.data:
            if name.startswith(LEVEL_PREFIX):
                key = name[len(LEVEL_PREFIX):]
                for value in self.data.getlist(name) if hasattr(self.data, "getlist") else [self.data[name]]:
                    pairs.append((key, value))
        if pairs:
            known = selectors.known_level_keys(self.topologies)
            for key, _ in pairs:
                if key not in known:
                    choices = ", ".join(sorted(known)) or "none"
                    field = f"{LEVEL_PREFIX}{key}" if f"{LEVEL_PREFIX}{key}" in self.data else "level"
                    raise _invalid(field, f"{key!r} is not a level of any Topology (levels: {choices})")
        return pairs

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        for key, value in self.level_pairs():
            queryset = self.filter_level(queryset, key, value)
        return queryset


def text_filter(pattern: str) -> type[filters.CharFilter]:
    """A text filter whose values the OpenAPI schema constrains to `pattern` (empty: no filter)."""
    return extend_schema_field({"type": "string", "pattern": pattern})(type("TextFilter", (filters.CharFilter,), {}))


_KEY = r"\s*[^=\s][^=]*"  # split_pair's KEY: not empty once stripped, up to the first "="
_EFFECT = "NoSchedule|PreferNoSchedule|NoExecute"
KeyValueFilter = text_filter(rf"^(?:{_KEY}(?:=[\s\S]*)?)?$")
# KEY[=VALUE] with no ":", or KEY[=VALUE] (which may hold ":") then ":" and an effect
TaintFilter = text_filter(rf"^(?:\s*[^=:\s][^=:]*(?:=[^:]*)?|{_KEY}(?:=[\s\S]*)?:(?:{_EFFECT})?)?$")
WorkloadKeyFilter = text_filter(r"^(?:[^/]+/[^/]+)?$")


def rejects_empty(f: filters.Filter) -> bool:
    """Whether an empty value is an error for this filter: one whose schema has a type or a
    set of values (a time, a boolean, a status) rather than free text. An empty `ordering`
    is an empty list of fields (the schema's comma-separated array): the default order."""
    if isinstance(f, filters.OrderingFilter):
        return False
    if isinstance(f, filters.BooleanFilter | filters.IsoDateTimeFilter | ReadyFilter):
        return True
    return isinstance(f, filters.ChoiceFilter | filters.MultipleChoiceFilter) and not callable(
        f.extra.get("choices"))


class ValidatingFilterSet(filters.FilterSet):
    """Filter methods that find a bad value (a malformed domain path, an unknown level)
    raise a form error; it becomes a 400 naming the parameter, like a bad choice does.

    An empty value of a text parameter (`?domain=`) is no filter; an empty value of a typed
    one (`?until=`, `?ready=`, `?status=`) is a 400, as the OpenAPI schema states (it allows
    any string for the first and none but a time, a boolean or a listed value for the others)."""

    def empty_typed_values(self) -> dict[str, list[str]]:
        getlist = self.data.getlist if hasattr(self.data, "getlist") else lambda name: [self.data[name]]
        return {name: ["must not be empty: leave the parameter out for no filter"]
                for name, f in self.filters.items() if name in self.data and rejects_empty(f)
                and any(value == "" for value in getlist(name))}

    def repeated_values(self) -> dict[str, list[str]]:
        """Parameters that take one value given more than once (which was meant cannot be
        told); those that take several are the listed choices and the level and label pairs."""
        if not hasattr(self.data, "getlist"):
            return {}
        out = {}
        for name, f in self.filters.items():
            if isinstance(f, filters.MultipleChoiceFilter) or name in REPEATABLE:
                continue
            count = len(self.data.getlist(name))
            if count > 1:
                out[name] = [f"is given {count} times; it takes one value"]
        return out

    def is_valid(self) -> bool:
        repeated = self.repeated_values()
        if repeated:
            raise ValidationError(repeated)
        empty = self.empty_typed_values()
        if empty:  # before the form's own check, which would call "" an unknown choice
            raise ValidationError(empty)
        if not super().is_valid():
            # the form's messages, formatted by Django: django-filter's own translation formats
            # them again and fails on a value that holds "%"
            raise ValidationError({name: self.messages(name, errors)
                                   for name, errors in self.form.errors.as_data().items()})
        return True

    def messages(self, name: str, errors: list[forms.ValidationError]) -> list[str]:
        """A parameter's error messages; a value that is not one of its choices is answered
        with the choices (Django's message says only that it is not one)."""
        field = self.form.fields.get(name)
        out: list[str] = []
        for error in errors:
            if error.code == "invalid_choice" and isinstance(field, forms.ChoiceField) and error.params:
                value = str(error.params["value"])
                hint = meant_hint(value, (str(v) for v, _ in field.choices if v != ""))
                out.append(f"{value!r} is not one of the choices{hint}: {choices_text(field)}")
            else:
                out.extend(error.messages)
        return out

    @property
    def qs(self):
        try:
            return super().qs
        except forms.ValidationError as exc:
            detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
            raise ValidationError(detail) from None


CHOICES_LISTED = 25


def choices_text(field: forms.ChoiceField) -> str:
    """A choice field's values, for a message: an ordering's fields once each, with a note
    that "-" orders them descending; a long list cut short."""
    values = [str(value) for value, _ in field.choices if value != ""]
    ascending = [v for v in values if not v.startswith("-")]
    descending = set(values) == {*ascending, *(f"-{v}" for v in ascending)}
    shown = ascending if descending else values
    if not shown:
        return "there are none"
    text = ", ".join(shown[:CHOICES_LISTED])
    if len(shown) > CHOICES_LISTED:
        text += f" and {len(shown) - CHOICES_LISTED} more"
    return f"{text} (each with a leading - for descending order)" if descending else text


class NodeFilter(LevelFilterMixin, ValidatingFilterSet):
    name = filters.CharFilter(field_name="name", lookup_expr="icontains",
                              help_text="nodes whose name contains this text (case-insensitive)")
    ready = ReadyFilter(help_text="the status of the node's Ready condition: true, false or unknown (in any "
                        "case; 1/0 for true/false), or none for nodes that report no Ready condition")
    unschedulable = StrictBooleanFilter(help_text="whether the node is cordoned (spec.unschedulable)")
    tainted = StrictBooleanFilter(method="filter_tainted", help_text="whether the node carries any taint")
    taint = TaintFilter(method="filter_taint", help_text="nodes with a taint: KEY, KEY=VALUE or "
                               "KEY=VALUE:EFFECT (or KEY:EFFECT)")
    label = KeyValueFilter(method="filter_label", help_text="nodes with a label: KEY (any value) or "
                               "KEY=VALUE; repeat the parameter to require several")
    level = filters.CharFilter(method="filter_nothing", help_text="nodes in a topology domain: LEVEL=VALUE, e.g. "
                               "cloud.example.com/topology-rack=r3 (repeatable). The shorthand "
                               "`level.LEVEL=VALUE` (e.g. `?level.cloud.example.com/topology-rack=r3`) "
                               "does the same. LEVEL must be a level of some Topology.")
    flavor = filters.ChoiceFilter(method="filter_flavor", choices=flavor_choices,
                                  help_text="nodes a ResourceFlavor selects (its nodeLabels and, for a TAS "
                                  "flavor, a label for every level of its Topology)")
    ordering = StableOrderingFilter(tiebreak=("name",),
                                    fields=(("name", "name"), ("hostname", "hostname"), ("ready", "ready"),
                                            ("created_at", "created")),
                                    help_text="sort by name, hostname, ready or created; prefix - for "
                                    "descending; several comma-separated")

    class Meta:
        model = cluster.Node
        fields: list[str] = []

    def filter_nothing(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset  # applied with the level.* shorthand in filter_queryset

    def filter_level(self, queryset: QuerySet, key: str, value: str) -> QuerySet:
        return with_label(queryset, key, value)

    def filter_tainted(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        return queryset.exclude(taints=[]) if value else queryset.filter(taints=[])

    def filter_taint(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        spec, effect = value, None
        if ":" in value:
            spec, _, effect = value.rpartition(":")
        key, taint_value = split_pair(spec, "taint")
        wanted: dict[str, str] = {"key": key}
        if taint_value is not None:
            wanted["value"] = taint_value
        if effect:
            if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise _invalid("taint", f"effect must be NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}")
            wanted["effect"] = effect
        # Few nodes carry taints: match them here rather than with JSON operators that differ
        # between PostgreSQL and SQLite.
        ids = [node_id for node_id, taints in cluster.Node.objects.exclude(taints=[]).values_list("id", "taints")
               if any(all(t.get(k) == v for k, v in wanted.items()) for t in taints or [])]
        return queryset.filter(id__in=ids)

    def filter_label(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        for raw in self.data.getlist("label") if hasattr(self.data, "getlist") else [value]:
            key, label_value = split_pair(raw, "label")
            queryset = with_label(queryset, key, label_value)
        return queryset

    def filter_flavor(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        row = cluster.ResourceFlavor.objects.filter(name=value).values_list("node_labels", "topology_name").first()
        if row is None:
            return queryset.none()
        node_labels, topology = row
        for key, label_value in (node_labels or {}).items():
            queryset = with_label(queryset, key, label_value)
        levels = cluster.Topology.objects.filter(name=topology).values_list("levels", flat=True).first() or []
        for level in levels:
            queryset = with_label(queryset, level, None)
        return queryset


class WorkloadFilter(LevelFilterMixin, ValidatingFilterSet):
    namespace = filters.CharFilter(help_text="the Workload's namespace")
    queue = filters.CharFilter(field_name="queue_name", help_text="the LocalQueue the Workload was submitted to "
                               "(spec.queueName)")
    cluster_queue = filters.CharFilter(method="filter_cluster_queue", help_text="the ClusterQueue: the one it is "
                                       "admitted to, or for a waiting Workload the one its LocalQueue points to")
    # A column of the table itself (no join that could repeat a row), so no DISTINCT: it would
    # make the database sort or hash every matching row, for the page and the count alike.
    status = filters.MultipleChoiceFilter(
        choices=STATUS_FILTER_CHOICES, distinct=False, method="filter_status",
        help_text=f"the Workload's status; repeat for several. `{WAITING}` stands for every status of a Workload "
        "waiting for admission (Pending and Inadmissible): most waiting Workloads are Inadmissible, so "
        "`status=Pending` alone finds few")
    flavor = filters.ChoiceFilter(method="filter_flavor", choices=flavor_choices,
                                  help_text="Workloads with a pod set admitted on this ResourceFlavor (TAS)")
    domain = filters.CharFilter(method="filter_domain", help_text="Workloads with pods in this topology domain, "
                                "named by its level values from the root, e.g. b1/r3 (with `flavor`, on that "
                                "flavor only)")
    level = filters.CharFilter(method="filter_nothing", help_text="Workloads with pods in any domain whose value "
                               "at a topology level is VALUE: LEVEL=VALUE, e.g. "
                               "cloud.example.com/topology-rack=r3 (repeatable; every block's rack r3). The "
                               "shorthand `level.LEVEL=VALUE` does the same.")
    node = filters.CharFilter(method="filter_node", help_text="Workloads with pods assigned to this node (hostname)")
    search = filters.CharFilter(field_name="name", lookup_expr="icontains",
                                help_text="Workloads whose name contains this text (case-insensitive)")
    created_after = TimeFilter(field_name="created_at", lookup_expr="gte",
                                              help_text="created at or after this time (RFC 3339)")
    created_before = TimeFilter(field_name="created_at", lookup_expr="lt",
                                               help_text="created before this time (RFC 3339)")
    ordering = StableOrderingFilter(
        tiebreak=("namespace", "name"),
        fields=(("namespace", "namespace"), ("name", "name"), ("created_at", "created"), ("priority", "priority"),
                ("status", "status"), ("pod_count", "pod_count"), ("admitted_at", "admitted"),
                ("queue_name", "queue")),
        help_text="sort by namespace, name, created, priority, status, pod_count, admitted or queue; prefix - "
                  "for descending; several comma-separated (default: namespace,name)")

    class Meta:
        model = cluster.Workload
        fields: list[str] = []

    def filter_nothing(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset

    def filter_level(self, queryset: QuerySet, key: str, value: str) -> QuerySet:
        levels_by_flavor = selectors.topology_levels_by_flavor(self.topologies)
        return queryset.filter(selectors.workloads_at_level_q(level=key, value=value,
                                                              levels_by_flavor=levels_by_flavor))

    def filter_status(self, queryset: QuerySet, name: str, value: list[str]) -> QuerySet:
        return queryset.filter(status__in=statuses_wanted(value)) if value else queryset

    def filter_cluster_queue(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        statuses = statuses_wanted(self.form.cleaned_data.get("status") or []) or None
        return queryset.filter(selectors.cluster_queue_workloads_q(value, statuses=statuses))

    def filter_flavor(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if self.data.get("domain"):
            return queryset  # the domain filter applies it together with the path
        return queryset.filter(id__in=cluster.Workload.objects.filter(pod_set_assignments__flavor=value).values("id"))

    def filter_domain(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        path = domain_path(value, "domain")
        flavor = self.form.cleaned_data.get("flavor") or None
        return queryset.filter(selectors.workloads_in_domain_q(path=path, flavor=flavor))

    def filter_node(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(selectors.workloads_on_node_q(node=value))


class WorkloadKeyMixin:
    """`?workload=NAMESPACE/NAME` on rows keyed by `workload_key` (events, comparisons)."""

    def filter_workload(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value.count("/") != 1 or not all(value.split("/")):
            raise _invalid("workload", f"expected NAMESPACE/NAME, got {value!r}")
        return queryset.filter(workload_key=value)


class EventFilter(WorkloadKeyMixin, ValidatingFilterSet):
    since = TimeFilter(field_name="at", lookup_expr="gte",
                                      help_text="events at or after this time (RFC 3339)")
    until = TimeFilter(field_name="at", lookup_expr="lt", help_text="events before this time (RFC 3339)")
    kind = filters.MultipleChoiceFilter(choices=EventKind.choices, distinct=False,
                                        help_text="the kind of event; repeat for several")
    node = filters.CharFilter(help_text="events about this node (a node failure, a replacement)")
    domain = filters.CharFilter(method="filter_domain", help_text="events in this topology domain or below it, "
                                "named by level values from the root, e.g. b1/r3")
    cluster_queue = filters.CharFilter(help_text="events of workloads of this ClusterQueue")
    queue = filters.CharFilter(field_name="workload__queue_name",
                               help_text="events of workloads submitted to this LocalQueue")
    namespace = filters.CharFilter(method="filter_namespace", help_text="events of workloads in this namespace")
    workload = WorkloadKeyFilter(method="filter_workload", help_text="events of one workload: NAMESPACE/NAME")
    ordering = StableOrderingFilter(fields=(("at", "at"), ("kind", "kind")),
                                    help_text="sort by at or kind; prefix - for descending (default: -at, "
                                    "newest first)")

    class Meta:
        model = WorkloadEvent
        fields: list[str] = []

    def filter_domain(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        path = "/".join(domain_path(value, "domain"))
        return queryset.filter(Q(domain=path) | Q(domain__startswith=f"{path}/"))

    def filter_namespace(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(workload_key__startswith=f"{value}/")




BUCKETS = (("minute", "minute"), ("hour", "hour"), ("day", "day"))


class ComparisonFilter(WorkloadKeyMixin, ValidatingFilterSet):
    category = filters.MultipleChoiceFilter(choices=ComparisonCategory.choices, distinct=False,
                                            help_text="how this engine's decision compares with Kueue's admission; "
                                            "repeat for several")
    cluster_queue = filters.CharFilter(help_text="admissions to this ClusterQueue")
    namespace = filters.CharFilter(help_text="admissions of Workloads in this namespace")
    workload = WorkloadKeyFilter(method="filter_workload", help_text="the admissions of one Workload: NAMESPACE/NAME")
    since = TimeFilter(field_name="admitted_at", lookup_expr="gte",
                       help_text="admissions seen at or after this time (RFC 3339)")
    until = TimeFilter(field_name="admitted_at", lookup_expr="lt", help_text="admissions seen before this time "
                       "(RFC 3339)")
    ordering = StableOrderingFilter(fields=(("admitted_at", "admitted"), ("category", "category")),
                                    help_text="sort by admitted or category; prefix - for descending (default: "
                                    "-admitted, newest first)")

    class Meta:
        model = AdmissionComparison
        fields: list[str] = []



class ComparisonSummaryFilter(ComparisonFilter):
    bucket = filters.ChoiceFilter(choices=BUCKETS, method="filter_nothing",
                                  help_text="the length of the time buckets of the agreement rate (default: hour)")
    ordering = None

    def filter_nothing(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset  # read by the view


def ordered_filterset(name: str, model: type, fields: tuple[tuple[str, str], ...], *,
                      tiebreak: tuple[str, ...] = ("name",), **filters_: filters.Filter) -> type[ValidatingFilterSet]:
    """A filter set of `model`'s list: `ordering` by `fields` ((model field, parameter
    value) pairs; the first, or `tiebreak`, is the default order), and `filters_`."""
    names = [value for _, value in fields]
    default = ",".join(tiebreak)
    listed = f"{', '.join(names[:-1])} or {names[-1]}; prefix - for descending; several comma-separated" \
        if len(names) > 1 else f"{names[0]}; prefix - for descending"
    ordering = StableOrderingFilter(tiebreak=tiebreak, fields=fields,
                                    help_text=f"sort by {listed} (default: {default})")
    meta = type("Meta", (), {"model": model, "fields": []})
    return type(name, (ValidatingFilterSet,), {**filters_, "ordering": ordering, "Meta": meta,
                                               "__module__": __name__})


TopologyFilter = ordered_filterset("TopologyFilter", cluster.Topology, (("name", "name"),))
ResourceFlavorFilter = ordered_filterset("ResourceFlavorFilter", cluster.ResourceFlavor,
                                         (("name", "name"), ("topology_name", "topology")))
ClusterQueueFilter = ordered_filterset("ClusterQueueFilter", cluster.ClusterQueue,
                                       (("name", "name"), ("cohort", "cohort")))
LocalQueueFilter = ordered_filterset(
    "LocalQueueFilter", cluster.LocalQueue,
    (("namespace", "namespace"), ("name", "name"), ("cluster_queue", "cluster_queue")), tiebreak=("namespace", "name"),
    namespace=filters.CharFilter(help_text="LocalQueues of this namespace"),
    cluster_queue=filters.CharFilter(help_text="LocalQueues that submit to this ClusterQueue"))
CohortFilter = ordered_filterset("CohortFilter", cluster.Cohort, (("name", "name"), ("parent", "parent")))
