"""Properties of the codec over random assignments and random node-naming schemes.

Every encoder must give back the same domains in the same order and satisfy the v1beta2
validation rules; the compact encoder must never be larger than Kueue's choice; decoding
anything at all raises nothing but `InputError`.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.codec import (
    MAX_DOMAINS_PER_SLICE,
    MAX_INT32,
    MAX_SLICES,
    MAX_VALUE_LENGTH,
    Columns,
    decode_assignment,
    decode_document,
    encode_assignment,
    encoded_size,
    go_json_size,
    hostname_prefix_encoding,
    neighbour_common_prefixes,
    reusable_hostname_prefix_keys,
    single_slice_encoding,
    validate_encoded,
)
from scheduler.errors import InputError

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-."
counts = st.one_of(st.integers(1, 4), st.integers(1, MAX_INT32), st.just(MAX_INT32))


def label(alphabet: str = LABEL_CHARS, min_size: int = 0, max_size: int = 12) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=min_size, max_size=max_size)


@st.composite
def pooled_hostnames(draw) -> list[str]:
    """Names built from shared parts: `<prefix><pool><sep><node><suffix>` with pools that
    repeat, interleave or run in blocks, and separators with and without "-"."""
    prefix = draw(st.sampled_from(["", "gke-ml-", "ip-10-", "aks-np", "node", "n-"]))
    suffix = draw(st.sampled_from(["", ".internal", "-vmss", ".us-west-2.compute.internal"]))
    sep = draw(st.sampled_from(["-", "", ".", "--"]))
    pools = draw(st.lists(label("abcdef0123-", 1, 6), min_size=1, max_size=5))
    size = draw(st.integers(1, 60))
    layout = draw(st.sampled_from(["blocks", "interleaved", "random"]))
    names = []
    for i in range(size):
        if layout == "blocks":
            pool = pools[i * len(pools) // size]
        elif layout == "interleaved":
            pool = pools[i % len(pools)]
        else:
            pool = draw(st.sampled_from(pools))
        node = draw(label("0123456789abcdef", 0, 4))
        names.append((prefix + pool + sep + node + suffix)[:MAX_VALUE_LENGTH])
    return names


hostname_lists = st.one_of(
    pooled_hostnames(),
    st.lists(label(), min_size=1, max_size=40),  # anything label-like, with and without "-"
    st.lists(label("ab-", 0, 6), min_size=1, max_size=40),  # many shared prefixes and dashes
    st.lists(st.text(max_size=8), min_size=1, max_size=20),  # arbitrary text, for robustness
    st.builds(lambda n, k: [n] * k, label(min_size=1), st.integers(1, 5)),  # duplicates
)


@st.composite
def assignments(draw) -> TopologyAssignment:
    shape = draw(st.sampled_from(["hostname", "hostname-with-levels", "levels", "single"]))
    if shape == "single":
        levels = draw(st.lists(label("abc./<&é", 1, 8), min_size=1, max_size=3, unique=True))
        values = [draw(label(max_size=MAX_VALUE_LENGTH)) for _ in levels]
        return TopologyAssignment.of(levels, [(values, draw(counts))])
    if shape == "levels":
        # Racks within blocks: upper levels repeat, so universal values and shared affixes occur.
        depth = draw(st.integers(1, 4))
        levels = [f"cloud.example.com/level-{i}" for i in range(depth)]
        size = draw(st.integers(0, 40))
        fanout = draw(st.integers(1, 4))
        domains = [
            ([f"l{level}-d{i // fanout ** (depth - 1 - level)}" for level in range(depth)], draw(counts))
            for i in range(size)
        ]
        return TopologyAssignment.of(levels, domains)
    names = draw(hostname_lists)
    names = [n[:MAX_VALUE_LENGTH] for n in names]
    if shape == "hostname":
        return TopologyAssignment.of([HOSTNAME_LABEL], [([n], draw(counts)) for n in names])
    upper = draw(st.lists(label(min_size=1), min_size=1, max_size=3))
    return TopologyAssignment.of(
        ["topology.example.com/block", HOSTNAME_LABEL],
        [([upper[i % len(upper)], n], draw(counts)) for i, n in enumerate(names)],
    )


def encoders(assignment: TopologyAssignment) -> dict[str, dict]:
    columns = Columns.of(assignment)
    return {
        "single-slice": single_slice_encoding(columns),
        "hostname-prefix": hostname_prefix_encoding(columns),
        "v1beta2-from": encode_assignment(assignment),
        "v1beta2-from-gate-off": encode_assignment(assignment, by_hostname_prefix=False),
        "compact": encode_assignment(assignment, compact=True),
    }


def assert_valid_v1beta2(encoded: dict) -> None:
    validate_encoded(encoded)
    assert len(encoded["slices"]) <= MAX_SLICES
    for item in encoded["slices"]:
        assert 1 <= item["domainCount"] <= MAX_DOMAINS_PER_SLICE
        for values in item["valuesPerLevel"]:
            assert len(values) == 1  # exactly one of universal / individual
            individual = values.get("individual")
            if individual is not None:
                assert list(individual) == [k for k in ("prefix", "suffix", "roots") if k in individual]
                assert individual.get("prefix", "x") and individual.get("suffix", "x")


@PROPERTY_SETTINGS
@given(assignments())
def test_every_encoder_round_trips_and_is_valid(assignment):
    for name, encoded in encoders(assignment).items():
        assert_valid_v1beta2(encoded)
        decoded = decode_assignment(json.loads(json.dumps(encoded)))
        assert decoded.levels == assignment.levels, name
        assert decoded.domains == assignment.domains, name


@PROPERTY_SETTINGS
@given(assignments())
def test_compact_is_never_larger_than_kueue(assignment):
    kueue = encode_assignment(assignment)
    compact = encode_assignment(assignment, compact=True)
    assert encoded_size(compact) <= encoded_size(kueue)
    assert go_json_size(compact) <= go_json_size(kueue)


@PROPERTY_SETTINGS
@given(assignments())
def test_v1beta2_from_keeps_the_smaller_of_kueue_encodings(assignment):
    columns = Columns.of(assignment)
    by_prefix, single = hostname_prefix_encoding(columns), single_slice_encoding(columns)
    chosen = encode_assignment(assignment)
    if len(by_prefix["slices"]) <= 1:
        assert chosen == by_prefix
    else:
        assert chosen == (single if go_json_size(single) < go_json_size(by_prefix) else by_prefix)


@PROPERTY_SETTINGS
@given(assignments())
def test_single_slice_size_is_worked_out_exactly(assignment):
    from scheduler.codec import _hostname_prefix_slices, _is_plain, _single_slice_size

    columns = Columns.of(assignment)
    if not len(columns) or not all(_is_plain("".join(column), '"\\<>&') for column in columns.values):
        return
    _, chunks, shapes = _hostname_prefix_slices(columns)
    assert _single_slice_size(columns, chunks, shapes) == go_json_size(single_slice_encoding(columns))


def kueue_reusable_keys(hostnames: list[str], max_slices: int = MAX_SLICES) -> list[str] | None:
    """Kueue's reusableHostnamePrefixKeys written plainly: count every "-"-ended prefix
    candidate, then try depths from the deepest down until the runs fit."""
    candidates = [[h[: i + 1] for i in range(len(h) - 1) if h[i] == "-"] for h in hostnames]
    seen = Counter(p for prefixes in candidates for p in prefixes)
    for depth in range(max((len(c) for c in candidates), default=0), 0, -1):
        keys = []
        for prefixes in candidates:
            usable = [p for p in prefixes[:depth] if seen[p] >= 2]
            keys.append(usable[-1] if usable else "")
        runs = 1 + sum(a != b for a, b in pairwise(keys))
        if runs <= max_slices:
            return keys
    return None


@PROPERTY_SETTINGS
@given(hostname_lists)
def test_reusable_keys_match_kueues_counting(hostnames):
    assert reusable_hostname_prefix_keys(hostnames) == kueue_reusable_keys(hostnames)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["a-", "b-", "a-x-", "b-y-"]), min_size=MAX_SLICES + 1, max_size=MAX_SLICES + 40))
def test_reusable_keys_back_off_like_kueue(prefixes):
    hostnames = [f"{p}{i}" for i, p in enumerate(prefixes)]
    assert reusable_hostname_prefix_keys(hostnames) == kueue_reusable_keys(hostnames)


@PROPERTY_SETTINGS
@given(st.lists(st.text(max_size=10), max_size=30))
def test_neighbour_common_prefixes(values):
    def naive(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    assert neighbour_common_prefixes(values) == [naive(a, b) for a, b in pairwise(values)]


@PROPERTY_SETTINGS
@given(st.recursive(st.text(max_size=4) | st.integers(), lambda inner: st.lists(inner, max_size=3)))
def test_go_json_size_matches_go_escaping(value):
    encoded = {"levels": ["a"], "slices": [], "v": value}
    text = json.dumps(encoded, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    assert go_json_size(encoded) == len(text.encode("utf-8", "surrogatepass"))


FIELD_NAMES = [
    "levels",
    "slices",
    "domains",
    "domainCount",
    "valuesPerLevel",
    "podCounts",
    "universal",
    "individual",
    "prefix",
    "suffix",
    "roots",
    "values",
    "count",
    "kind",
    "status",
    "admission",
    "podSetAssignments",
    "topologyAssignment",
    "name",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**32) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELD_NAMES), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_decoding_anything_raises_only_input_error(value):
    for decode in (decode_assignment, decode_document, validate_encoded):
        try:
            decode(value)
        except InputError as exc:
            assert exc.reason and "\n" not in str(exc)


@st.composite
def corrupted_encodings(draw) -> object:
    """A valid encoding with one node somewhere replaced by an arbitrary JSON value."""
    encoded = json.loads(json.dumps(encode_assignment(draw(assignments()), compact=draw(st.booleans()))))
    parent, key = None, None
    node = encoded
    for _ in range(draw(st.integers(1, 6))):
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if not children:
            break
        child_key, child = draw(st.sampled_from(children))
        parent, key = node, child_key
        if not isinstance(child, dict | list) or draw(st.booleans()):
            break
        node = child
    if parent is not None:
        parent[key] = draw(json_values)
    return encoded


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted_encodings())
def test_corrupted_encodings_raise_only_input_error(encoded):
    try:
        decoded = decode_assignment(encoded)
    except InputError:
        return
    validate_encoded(encoded)  # whatever decodes must also validate
    assert all(d.count >= 1 for d in decoded.domains)
