"""The parser reads owner references, conditions and string maps as the API server writes them
without checking field by field; whatever the input, the answer (a value or the error) must be
the one the field-by-field reading gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.errors import InputError
from scheduler.parse import (
    Where,
    _conditions_checked,
    _owner_references_checked,
    parse_conditions,
    parse_owner_references,
    string_map,
)

# values a field may hold in a JSON or YAML document, the awkward ones included
ODD_VALUES = st.one_of(
    st.none(), st.just(""), st.text(max_size=6), st.booleans(), st.integers(-3, 3), st.just([]), st.just({}),
    st.just("true"), st.just("False"), st.just("2025-06-01T10:00:00Z"), st.just("2025-06-01T10:00:00"),
    st.just("not a time"), st.just(datetime(2025, 6, 1, tzinfo=UTC)),
)


def outcome(read, *args):
    try:
        return "value", read(*args)
    except InputError as exc:
        return "error", str(exc)


def entries(keys: list[str]) -> st.SearchStrategy:
    entry = st.fixed_dictionaries({}, optional={k: ODD_VALUES for k in keys})
    return st.one_of(st.none(), st.integers(), st.lists(st.one_of(entry, ODD_VALUES), max_size=3),
                     st.lists(entry, max_size=3))


@settings(max_examples=400, deadline=None)
@given(entries(["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"]))
def test_owner_references_read_as_field_by_field(refs):
    meta = {} if refs is None else {"ownerReferences": refs}
    where = Where("Workload/ns/w").at("metadata")
    assert outcome(parse_owner_references, meta, where) == outcome(_owner_references_checked, meta, where)


@settings(max_examples=400, deadline=None)
@given(entries(["type", "status", "reason", "message", "lastTransitionTime"]))
def test_conditions_read_as_field_by_field(conditions):
    status = {} if conditions is None else {"conditions": conditions}
    where = Where("Workload/ns/w").at("status")
    assert outcome(parse_conditions, status, where) == outcome(_conditions_checked, status, where)


def test_condition_times_are_aware_and_shared():
    status = {"conditions": [
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2025-06-01T10:00:00Z"},
        {"type": "Admitted", "status": "", "lastTransitionTime": "2025-06-01T10:00:00"},
    ]}
    reserved, admitted = parse_conditions(status, Where("w"))
    assert reserved.last_transition_time == admitted.last_transition_time == datetime(2025, 6, 1, 10, tzinfo=UTC)
    assert admitted.status == ""  # an empty status stays empty; only a missing one is Unknown


@pytest.mark.parametrize(("labels", "expected"), [
    ({"a": "1", "b": ""}, {"a": "1", "b": ""}),
    ({"a": "1", "c": None}, {"a": "1", "c": ""}),
    ({}, {}),
])
def test_string_maps(labels, expected):
    assert dict(string_map({"labels": labels}, "labels", Where("w"))) == expected


@pytest.mark.parametrize(("value", "said"), [
    (1, "got a number: quote it ('1')"), (2.5, "got a number: quote it ('2.5')"),
    (True, "got a boolean: quote it ('true')"), (False, "got a boolean: quote it ('false')"),
])
def test_string_map_refuses_numbers_and_booleans_as_kubernetes_does(value, said):
    with pytest.raises(InputError) as caught:
        string_map({"labels": {"rack": value}}, "labels", Where("Node/n1").at("metadata"))
    assert str(caught.value) == f"Node/n1: metadata.labels.rack: must be a string, {said}"


def test_string_map_errors_name_the_field():
    with pytest.raises(InputError, match=r"labels\.a.*must be a string"):
        string_map({"labels": {"a": ["x"]}}, "labels", Where("w"))
    with pytest.raises(InputError, match="must be a mapping"):
        string_map({"labels": ["x"]}, "labels", Where("w"))
