"""Hypothesis strategies that break documents: random JSON-like values, and mutations of a
valid document (a field replaced by an odd value, a deep or huge one, or taken away), for the
fuzz tests of every entry point that reads Kubernetes objects."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import yaml
from hypothesis import strategies as st

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.text(max_size=12), st.sampled_from(["", "1", "-1", "1e999", "9" * 60, "1Gi", "x" * 70]),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["kind", "apiVersion", "metadata", "spec", "status",
                                                             "name", "count", "levels", "slices", "domains",
                                                             "podSets", "items", "x"]), inner, max_size=5)),
    max_leaves=20,
)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(paths(v, (*prefix, i)))
    return out


def replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def delete(doc: Any, path: tuple) -> Any:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return doc


def deep(depth: int) -> Any:
    doc: list = []
    for _ in range(depth - 1):
        doc = [doc]
    return doc


mutations = st.one_of(
    scalars,
    documents,
    st.integers(min_value=95, max_value=300).map(deep),
    st.integers(min_value=4301, max_value=6000).map(lambda n: "HUGE" + str(n)),
)


HUGE = re.compile(r"[\"']?HUGE(\d+)[\"']?")


def render(doc: Any, as_yaml: bool) -> str:
    text = yaml.safe_dump(doc) if as_yaml else json.dumps(doc)
    # a huge integer literal cannot be made by json/yaml dumps (Python refuses to print it)
    text = HUGE.sub(lambda m: "9" * int(m[1]), text)
    return text


DELETE = object()  # a mutation that takes the field away


def mutated(data: st.DataObject, doc: Any, *, at_most: int = 3) -> Any:
    """A copy of `doc` with 1 to `at_most` of its fields (or the whole) replaced or taken away."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(min_value=1, max_value=at_most))):
        path = data.draw(st.sampled_from(paths(doc)))
        value = data.draw(st.one_of(mutations, st.just(DELETE)) if path else mutations)
        doc = delete(doc, path) if value is DELETE else replace(doc, path, value)
    return doc
