"""The v1beta2 TopologyAssignment codec: Kueue's encoders, validation, decoding, the CLI."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.cli import main
from scheduler.codec import (
    MAX_DOMAINS_PER_SLICE,
    MAX_SLICES,
    Columns,
    decode_assignment,
    decode_document,
    domain_runs,
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

HOST = HOSTNAME_LABEL


def hosts(names, counts=None) -> TopologyAssignment:
    counts = counts or [1] * len(names)
    return TopologyAssignment.of([HOST], [([n], c) for n, c in zip(names, counts, strict=True)])


def domains_of(assignment: TopologyAssignment) -> list[tuple[tuple[str, ...], int]]:
    return [(d.values, d.count) for d in assignment.domains]


def round_trips(assignment: TopologyAssignment, encoded: dict) -> bool:
    validate_encoded(encoded)
    decoded = decode_assignment(json.loads(json.dumps(encoded)))
    return decoded.levels == assignment.levels and domains_of(decoded) == domains_of(assignment)


# ---------------------------------------------------------------- Kueue's single-slice encoding


class TestSingleSlice:
    def test_no_domains_no_slices(self):
        assignment = TopologyAssignment.of(["zone", "rack"], [])
        assert encode_assignment(assignment) == {"levels": ["zone", "rack"], "slices": []}

    def test_one_domain_is_universal_everywhere(self):
        assignment = TopologyAssignment.of(["zone", "rack"], [(["z1", "r7"], 3)])
        assert encode_assignment(assignment)["slices"] == [
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "z1"}, {"universal": "r7"}],
                "podCounts": {"universal": 3},
            }
        ]

    def test_shared_level_is_universal_and_counts_individual(self):
        assignment = TopologyAssignment.of(["zone", "rack"], [(["z1", "rack-x"], 2), (["z1", "rack-y"], 5)])
        (only,) = encode_assignment(assignment)["slices"]
        assert only["valuesPerLevel"] == [
            {"universal": "z1"},
            {"individual": {"prefix": "rack-", "roots": ["x", "y"]}},
        ]
        assert only["podCounts"] == {"individual": [2, 5]}

    def test_prefix_and_suffix_key_order(self):
        assignment = TopologyAssignment.of(["rack"], [(["dc1-r01.lab"], 1), (["dc1-r22.lab"], 1)])
        (only,) = encode_assignment(assignment)["slices"]
        individual = only["valuesPerLevel"][0]["individual"]
        assert list(only) == ["domainCount", "valuesPerLevel", "podCounts"]
        assert list(individual) == ["prefix", "suffix", "roots"]
        assert individual == {"prefix": "dc1-r", "suffix": ".lab", "roots": ["01", "22"]}

    def test_overlapping_prefix_and_suffix_keep_the_suffix_whole(self):
        # "xyx" is both the common prefix and the common suffix of the two values.
        assignment = TopologyAssignment.of(["rack"], [(["xyxyx"], 1), (["xyx"], 1)])
        individual = encode_assignment(assignment)["slices"][0]["valuesPerLevel"][0]["individual"]
        assert individual == {"suffix": "xyx", "roots": ["xy", ""]}

    def test_a_value_that_prefixes_the_others_gives_an_empty_root(self):
        assignment = TopologyAssignment.of(["rack"], [(["r1"], 1), (["r10"], 1), (["r11"], 1)])
        individual = encode_assignment(assignment)["slices"][0]["valuesPerLevel"][0]["individual"]
        assert individual == {"prefix": "r1", "roots": ["", "0", "1"]}

    def test_nothing_in_common_means_whole_values_as_roots(self):
        assignment = TopologyAssignment.of(["rack"], [(["north"], 1), (["south"], 1)])
        individual = encode_assignment(assignment)["slices"][0]["valuesPerLevel"][0]["individual"]
        assert individual == {"suffix": "th", "roots": ["nor", "sou"]}

    def test_gate_off_uses_one_slice_for_many_pools(self):
        names = [f"pool-{p}-node-{i:03d}" for p in "ab" for i in range(30)]
        encoded = encode_assignment(hosts(names), by_hostname_prefix=False)
        assert len(encoded["slices"]) == 1
        assert encoded["slices"][0]["valuesPerLevel"][0]["individual"]["prefix"] == "pool-"

    def test_more_domains_than_a_slice_holds_are_chunked(self):
        names = [f"n{i:06d}" for i in range(MAX_DOMAINS_PER_SLICE + 5)]
        encoded = encode_assignment(hosts(names), by_hostname_prefix=False)
        assert [s["domainCount"] for s in encoded["slices"]] == [MAX_DOMAINS_PER_SLICE, 5]
        assert round_trips(hosts(names), encoded)


# ---------------------------------------------------------------- hostname-prefix runs


class TestReusablePrefixKeys:
    def test_longest_prefix_shared_by_two_hostnames(self):
        names = ["gke-ml-np-a-1f2e-x1", "gke-ml-np-a-1f2e-x2", "gke-ml-np-b-9c0d-y1", "gke-ml-np-b-9c0d-y2"]
        assert reusable_hostname_prefix_keys(names) == [
            "gke-ml-np-a-1f2e-",
            "gke-ml-np-a-1f2e-",
            "gke-ml-np-b-9c0d-",
            "gke-ml-np-b-9c0d-",
        ]

    def test_an_unshared_prefix_gives_an_empty_key(self):
        assert reusable_hostname_prefix_keys(["alpha-1", "beta-2"]) == ["", ""]

    def test_no_dash_means_no_keys(self):
        assert reusable_hostname_prefix_keys(["alpha", "beta"]) is None

    def test_a_trailing_dash_is_no_candidate(self):
        # "edge-" ends in its only "-", so "edge-" is a candidate of "edge-7" alone.
        assert reusable_hostname_prefix_keys(["edge-", "edge-7"]) == ["", ""]

    def test_duplicate_hostnames_share_their_prefixes(self):
        assert reusable_hostname_prefix_keys(["rack-a-1", "rack-a-1"]) == ["rack-a-", "rack-a-"]

    def test_a_prefix_is_shared_whatever_the_order(self):
        names = ["db-b-2", "web-a-1", "db-b-9", "web-a-3"]
        assert reusable_hostname_prefix_keys(names) == ["db-b-", "web-a-", "db-b-", "web-a-"]

    def test_backs_off_to_a_shorter_prefix_when_runs_exceed_the_slice_limit(self):
        # Alternating pools make one run per domain at the deepest level.
        names = [f"c-{'pq'[i % 2]}-{i:04d}" for i in range(MAX_SLICES + 1)]
        assert set(reusable_hostname_prefix_keys(names)) == {"c-"}

    def test_none_when_no_depth_fits(self):
        names = [f"{'ab'[i % 2]}-{'xy'[i % 2]}-{i:04d}" for i in range(MAX_SLICES + 1)]
        assert reusable_hostname_prefix_keys(names) is None

    def test_domain_runs_never_reorder(self):
        assert domain_runs(4, ["k1", "k1", "k2", "k1"]) == [(0, 2), (2, 3), (3, 4)]
        assert domain_runs(3, None) == [(0, 3)]
        assert domain_runs(0, None) == []


class TestHostnamePrefixEncoding:
    def test_one_slice_per_pool_run(self):
        names = ["eks-ip-10-0-1-5", "eks-ip-10-0-1-6", "eks-ip-10-0-2-7", "eks-ip-10-0-2-8"]
        encoded = hostname_prefix_encoding(Columns.of(hosts(names, [1, 1, 2, 3])))
        assert encoded["slices"] == [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "eks-ip-10-0-1-", "roots": ["5", "6"]}}],
                "podCounts": {"universal": 1},
            },
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "eks-ip-10-0-2-", "roots": ["7", "8"]}}],
                "podCounts": {"individual": [2, 3]},
            },
        ]

    def test_interleaved_pools_keep_their_order(self):
        names = ["p-a-1", "p-b-1", "p-a-2", "p-b-2"]
        encoded = hostname_prefix_encoding(Columns.of(hosts(names)))
        assert len(encoded["slices"]) == 4
        assert round_trips(hosts(names), encoded)

    def test_only_the_hostname_level_is_split(self):
        assignment = TopologyAssignment.of(["rack"], [(["r-a-1"], 1), (["r-a-2"], 1), (["r-b-1"], 1)])
        assert len(hostname_prefix_encoding(Columns.of(assignment))["slices"]) == 1

    def test_runs_longer_than_a_slice_are_chunked(self):
        names = [f"pool-{i % 2}-node-{i:06d}" for i in range(MAX_DOMAINS_PER_SLICE + 7)]
        encoded = encode_assignment(hosts(names))
        assert [s["domainCount"] for s in encoded["slices"]] == [MAX_DOMAINS_PER_SLICE, 7]
        assert round_trips(hosts(names), encoded)

    def test_many_pools_back_off_and_stay_within_the_limits(self):
        names = [f"gke-big-np{p:04d}-{p * 7919:08x}-{i:02x}" for p in range(1500) for i in range(100)]
        encoded = encode_assignment(hosts(names))
        assert len(encoded["slices"]) <= MAX_SLICES
        assert all(s["domainCount"] <= MAX_DOMAINS_PER_SLICE for s in encoded["slices"])
        assert round_trips(hosts(names), encoded)


class TestV1Beta2FromChoice:
    def test_a_single_slice_prefix_encoding_is_kept(self):
        encoded = encode_assignment(hosts(["solo-node-1"]))
        assert encoded["slices"][0]["valuesPerLevel"] == [{"universal": "solo-node-1"}]

    def test_the_smaller_single_slice_wins_for_few_domains(self):
        names = ["pool-a-node-1", "pool-a-node-2", "pool-b-node-1", "pool-b-node-2"]
        columns = Columns.of(hosts(names))
        assert go_json_size(single_slice_encoding(columns)) < go_json_size(hostname_prefix_encoding(columns))
        assert encode_assignment(hosts(names)) == single_slice_encoding(columns)

    def test_the_smaller_prefix_encoding_wins_for_many_domains(self):
        names = [f"pool-{p}-node-{i:04d}" for p in "ab" for i in range(40)]
        columns = Columns.of(hosts(names))
        encoded = encode_assignment(hosts(names))
        assert encoded == hostname_prefix_encoding(columns)
        assert len(encoded["slices"]) == 2

    def test_a_tie_keeps_the_prefix_encoding(self, monkeypatch):
        import scheduler.codec as codec

        names = ["pool-a-node-1", "pool-a-node-2", "pool-b-node-1", "pool-b-node-2"]
        monkeypatch.setattr(codec, "go_json_size", lambda encoded, **_: 100)
        assert len(encode_assignment(hosts(names))["slices"]) == 2

    def test_go_size_counts_escapes_and_utf8_as_go_does(self):
        assert go_json_size({"v": "a<b"}) == len('{"v":"a\\u003cb"}')
        assert go_json_size({"v": "é"}) == len('{"v":"é"}'.encode())
        assert go_json_size({"v": "\u2028"}) == len('{"v":"\\u2028"}')
        assert go_json_size({"v": "\n"}) == len('{"v":"\\n"}')
        plain = {"levels": [HOST], "slices": [encode_assignment(hosts(["x-1", "y-2"]))["slices"][0]]}
        assert go_json_size(plain) == encoded_size(plain)


# ---------------------------------------------------------------- the compact encoder


class TestCompact:
    def test_beats_kueue_when_pools_exceed_the_slice_limit(self):
        # 1,200 pools of 40 nodes: Kueue backs off to one prefix for all; the search keeps
        # most pools in their own slice.
        names = [f"gke-ml-np{p:04d}-{(p * 2654435761) % 2**32:08x}-{i:04x}" for p in range(1200) for i in range(40)]
        kueue = encode_assignment(hosts(names))
        compact = encode_assignment(hosts(names), compact=True)
        assert encoded_size(compact) < 0.8 * encoded_size(kueue)
        assert len(compact["slices"]) <= MAX_SLICES
        assert round_trips(hosts(names), compact)

    def test_falls_back_to_kueue_when_not_smaller(self):
        names = [f"node-{i}" for i in range(10)]
        assert encode_assignment(hosts(names), compact=True) == encode_assignment(hosts(names))

    def test_drops_a_prefix_that_costs_more_than_it_saves(self):
        names = ["n-1", "n-2"]
        compact = encode_assignment(hosts(names), compact=True)
        assert compact["slices"][0]["valuesPerLevel"] == [{"individual": {"roots": names}}]
        assert encoded_size(compact) < encoded_size(encode_assignment(hosts(names)))

    def test_non_hostname_levels_merge_domains_into_slices(self):
        assignment = TopologyAssignment.of(
            ["block", "rack"], [([f"b{i // 8}", f"b{i // 8}-r{i % 8}"], 1 + i % 3) for i in range(64)]
        )
        compact = encode_assignment(assignment, compact=True)
        assert encoded_size(compact) <= encoded_size(encode_assignment(assignment))
        assert round_trips(assignment, compact)


# ---------------------------------------------------------------- neighbour prefixes


@pytest.mark.parametrize(
    "values",
    [
        ["abc", "abd", "ab", "ab", "", "x", "xyz"],
        ["same", "same", "same"],
        ["\x01a", "\x01b"],
        ["ünï", "üna", "ü"],
        ["a"],
        [],
    ],
)
def test_neighbour_common_prefixes(values):
    def naive(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    assert neighbour_common_prefixes(values) == [naive(a, b) for a, b in pairwise(values)]


# ---------------------------------------------------------------- decoding and validation


def valid_encoded() -> dict:
    return {
        "levels": ["zone", HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "z1"},
                    {"individual": {"prefix": "node-", "suffix": ".lan", "roots": ["a", "b"]}},
                ],
                "podCounts": {"individual": [1, 4]},
            },
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "z2"}, {"individual": {"roots": ["edge"]}}],
                "podCounts": {"universal": 2},
            },
        ],
    }


class TestDecode:
    def test_v1beta2(self):
        decoded = decode_assignment(valid_encoded())
        assert decoded.levels == ("zone", HOST)
        assert domains_of(decoded) == [
            (("z1", "node-a.lan"), 1),
            (("z1", "node-b.lan"), 4),
            (("z2", "edge"), 2),
        ]

    def test_v1beta1(self):
        data = {"levels": ["rack"], "domains": [{"values": ["r1"], "count": 2}, {"values": ["r2"], "count": 1}]}
        assert domains_of(decode_assignment(data)) == [(("r1",), 2), (("r2",), 1)]

    def test_nulls_count_as_unset(self):
        data = valid_encoded()
        data["slices"][1]["valuesPerLevel"][0] = {"universal": "z2", "individual": None}
        data["slices"][0]["valuesPerLevel"][1]["individual"]["suffix"] = None
        decoded = decode_assignment(data)
        assert decoded.domains[0].values == ("z1", "node-a")

    def test_decoded_json(self):
        assert decode_document(valid_encoded()) == {
            "levels": ["zone", HOST],
            "domains": [
                {"values": ["z1", "node-a.lan"], "count": 1},
                {"values": ["z1", "node-b.lan"], "count": 4},
                {"values": ["z2", "edge"], "count": 2},
            ],
        }

    def test_workload(self):
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "train", "namespace": "ml"},
            "status": {
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {"name": "launcher"},
                        {"name": "workers", "topologyAssignment": valid_encoded()},
                        {
                            "name": "ps",
                            "topologyAssignment": {"levels": [HOST], "domains": [{"values": ["n1"], "count": 1}]},
                        },
                    ],
                }
            },
        }
        pod_sets = decode_document(workload)["podSets"]
        assert [p["name"] for p in pod_sets] == ["workers", "ps"]
        assert pod_sets[1] == {"name": "ps", "levels": [HOST], "domains": [{"values": ["n1"], "count": 1}]}

    def test_workload_without_admission(self):
        assert decode_document({"kind": "Workload", "metadata": {"name": "w"}}) == {"podSets": []}

    def test_workload_error_names_object_and_field(self):
        workload = {
            "kind": "Workload",
            "metadata": {"name": "train", "namespace": "ml"},
            "status": {"admission": {"podSetAssignments": [{"name": "w", "topologyAssignment": {"levels": []}}]}},
        }
        with pytest.raises(InputError) as caught:
            decode_document(workload)
        assert caught.value.obj == "Workload/ml/train"
        assert caught.value.field == "status.admission.podSetAssignments[0].topologyAssignment.levels"

    @pytest.mark.parametrize("doc", [[1, 2], "text", 7, None, {"kind": "Pod", "metadata": {}}, {"spec": {}}])
    def test_anything_else_is_an_input_error(self, doc):
        with pytest.raises(InputError):
            decode_document(doc)


def mutated(path: str, value) -> dict:
    """valid_encoded() with the item at a dotted path (``slices.0.domainCount``) replaced;
    the value ``...`` deletes it."""
    data = valid_encoded()
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return data


BAD_INPUTS = [
    # (description, data, field, words in the reason)
    ("not an object", [], "topologyAssignment", "object"),
    ("levels missing", mutated("levels", ...), "levels", "missing"),
    ("levels empty", mutated("levels", []), "levels", "at least 1"),
    ("too many levels", mutated("levels", [f"l{i}" for i in range(17)]), "levels", "at most 16"),
    ("a level not a string", mutated("levels.1", 5), "levels[1]", "string"),
    ("an empty level", mutated("levels.1", ""), "levels[1]", "node label key"),
    ("a level twice", mutated("levels.1", "zone"), "levels[1]", "listed twice"),
    ("slices missing", mutated("slices", ...), "slices", "missing"),
    ("slices not a list", mutated("slices", {"a": 1}), "slices", "list"),
    ("too many slices", {"levels": ["a"], "slices": [{}] * 1001}, "slices", "at most 1,000"),
    ("slice not an object", mutated("slices.1", "x"), "slices[1]", "object"),
    ("domainCount missing", mutated("slices.0.domainCount", ...), "slices[0].domainCount", "missing"),
    ("domainCount zero", mutated("slices.1.domainCount", 0), "slices[1].domainCount", "at least 1"),
    ("domainCount a string", mutated("slices.1.domainCount", "1"), "slices[1].domainCount", "integer"),
    ("domainCount a boolean", mutated("slices.1.domainCount", True), "slices[1].domainCount", "integer"),
    ("domainCount too large", mutated("slices.1.domainCount", 100_001), "slices[1].domainCount", "at most"),
    (
        "valuesPerLevel shorter than levels",
        mutated("slices.1.valuesPerLevel", [{"universal": "z"}]),
        "slices[1].valuesPerLevel",
        "one entry per level",
    ),
    (
        "both universal and individual",
        mutated("slices.1.valuesPerLevel.0", {"universal": "z", "individual": {"roots": ["a"]}}),
        "slices[1].valuesPerLevel[0]",
        "both",
    ),
    (
        "neither universal nor individual",
        mutated("slices.1.valuesPerLevel.0", {}),
        "slices[1].valuesPerLevel[0]",
        "neither",
    ),
    (
        "roots missing",
        mutated("slices.1.valuesPerLevel.1.individual", {"prefix": "p"}),
        "slices[1].valuesPerLevel[1].individual.roots",
        "missing",
    ),
    (
        "empty roots",
        mutated("slices.1.valuesPerLevel.1.individual.roots", []),
        "slices[1].valuesPerLevel[1].individual.roots",
        "at least 1",
    ),
    (
        "roots shorter than domainCount",
        mutated("slices.0.valuesPerLevel.1.individual.roots", ["a"]),
        "slices[0].valuesPerLevel[1].individual.roots",
        "domainCount (2)",
    ),
    (
        "a root not a string",
        mutated("slices.0.valuesPerLevel.1.individual.roots", ["a", 3]),
        "slices[0].valuesPerLevel[1].individual.roots[1]",
        "string",
    ),
    (
        "a root too long",
        mutated("slices.0.valuesPerLevel.1.individual.roots", ["a", "b" * 64]),
        "slices[0].valuesPerLevel[1].individual.roots[1]",
        "at most 63",
    ),
    (
        "an empty prefix",
        mutated("slices.0.valuesPerLevel.1.individual.prefix", ""),
        "slices[0].valuesPerLevel[1].individual.prefix",
        "non-empty",
    ),
    (
        "a suffix not a string",
        mutated("slices.0.valuesPerLevel.1.individual.suffix", ["x"]),
        "slices[0].valuesPerLevel[1].individual.suffix",
        "string",
    ),
    (
        "a universal value not a string",
        mutated("slices.0.valuesPerLevel.0.universal", 1.5),
        "slices[0].valuesPerLevel[0].universal",
        "string",
    ),
    ("podCounts missing", mutated("slices.0.podCounts", ...), "slices[0].podCounts", "missing"),
    (
        "podCounts both",
        mutated("slices.1.podCounts", {"universal": 1, "individual": [1]}),
        "slices[1].podCounts",
        "both",
    ),
    ("podCounts neither", mutated("slices.1.podCounts", {}), "slices[1].podCounts", "neither"),
    ("universal count zero", mutated("slices.1.podCounts.universal", 0), "slices[1].podCounts.universal", "at least 1"),
    (
        "universal count beyond int32",
        mutated("slices.1.podCounts.universal", 2**31),
        "slices[1].podCounts.universal",
        "at most",
    ),
    (
        "individual counts mismatch domainCount",
        mutated("slices.0.podCounts.individual", [1, 2, 3]),
        "slices[0].podCounts.individual",
        "domainCount (2)",
    ),
    (
        "an individual count negative",
        mutated("slices.0.podCounts.individual", [1, -2]),
        "slices[0].podCounts.individual[1]",
        "at least 1",
    ),
    (
        "an individual count a float",
        mutated("slices.0.podCounts.individual", [1, 2.0]),
        "slices[0].podCounts.individual[1]",
        "integer",
    ),
    (
        "both slices and domains",
        {"levels": ["a"], "slices": [], "domains": []},
        "slices",
        "not both",
    ),
    (
        "v1beta1 values per level mismatch",
        {"levels": ["a", "b"], "domains": [{"values": ["x"], "count": 1}]},
        "domains[0].values",
        "one value per level",
    ),
    (
        "v1beta1 count zero",
        {"levels": ["a"], "domains": [{"values": ["x"], "count": 0}]},
        "domains[0].count",
        "at least 1",
    ),
    (
        "v1beta1 count missing",
        {"levels": ["a"], "domains": [{"values": ["x"]}]},
        "domains[0].count",
        "missing",
    ),
    ("v1beta1 domain not an object", {"levels": ["a"], "domains": [3]}, "domains[0]", "object"),
]


@pytest.mark.parametrize(("data", "field", "words"), [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_names_the_field(data, field, words):
    with pytest.raises(InputError) as caught:
        decode_assignment(data)
    assert caught.value.field == field
    assert words in caught.value.reason
    assert "\n" not in str(caught.value)


def test_a_huge_expansion_is_refused():
    universal = {"domainCount": 100_000, "valuesPerLevel": [{"universal": "n"}], "podCounts": {"universal": 1}}
    with pytest.raises(InputError, match="more than 1,000,000 domains") as caught:
        decode_assignment({"levels": [HOST], "slices": [universal] * 11})
    assert caught.value.field == "slices[10].domainCount"


def test_validate_encoded_rejects_the_v1beta1_form():
    with pytest.raises(InputError, match="domains"):
        validate_encoded({"levels": ["a"], "domains": [], "slices": []})


def test_encoding_a_malformed_assignment_is_an_input_error():
    with pytest.raises(InputError, match="values for 2 levels"):
        encode_assignment(TopologyAssignment.of(["a", "b"], [(["x"], 1)]))
    with pytest.raises(InputError, match="at least 1 level"):
        encode_assignment(TopologyAssignment.of([], []))


# ---------------------------------------------------------------- the command line


def write(tmp_path: Path, payload, name: str = "input.json") -> str:
    path = tmp_path / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return str(path)


class TestCommandLine:
    NAMES = [f"pool-{p}-node-{i:03d}" for p in "ab" for i in range(25)]

    def decoded(self) -> dict:
        return hosts(self.NAMES).to_decoded_json()

    def test_encode_then_decode(self, tmp_path, capsys):
        assert main(["encode", write(tmp_path, self.decoded())]) == 0
        encoded = json.loads(capsys.readouterr().out)
        assert len(encoded["slices"]) == 2
        assert main(["decode", write(tmp_path, encoded, "encoded.json")]) == 0
        assert json.loads(capsys.readouterr().out) == self.decoded()

    def test_encode_with_the_gate_off(self, tmp_path, capsys):
        path = write(tmp_path, self.decoded())
        assert main(["encode", path, "--feature-gates", "TASAssignmentsEncodingByHostnamePrefix=false"]) == 0
        assert len(json.loads(capsys.readouterr().out)["slices"]) == 1

    def test_encode_compact(self, tmp_path, capsys):
        assert main(["encode", write(tmp_path, self.decoded()), "--compact"]) == 0
        encoded = json.loads(capsys.readouterr().out)
        assert encoded_size(encoded) <= encoded_size(encode_assignment(hosts(self.NAMES)))
        assert round_trips(hosts(self.NAMES), encoded)

    def test_decode_yaml_workload(self, tmp_path, capsys):
        text = (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
            "status:\n  admission:\n    podSetAssignments:\n    - name: main\n      topologyAssignment:\n"
            "        levels: [kubernetes.io/hostname]\n        slices:\n        - domainCount: 2\n"
            "          valuesPerLevel: [{individual: {prefix: n-, roots: ['1', '2']}}]\n"
            "          podCounts: {universal: 1}\n"
        )
        assert main(["decode", write(tmp_path, text, "wl.yaml")]) == 0
        pod_sets = json.loads(capsys.readouterr().out)["podSets"]
        assert pod_sets[0]["domains"] == [{"values": ["n-1"], "count": 1}, {"values": ["n-2"], "count": 1}]

    @pytest.mark.parametrize(
        ("command", "payload", "words"),
        [
            ("decode", mutated("slices.0.domainCount", 0), "slices[0].domainCount: must be at least 1"),
            ("decode", mutated("slices.1.podCounts", {}), "slices[1].podCounts: exactly one of"),
            ("encode", {"levels": ["a"], "domains": [{"values": ["x"], "count": -1}]}, "domains[0].count"),
            ("encode", "{not json", "not valid YAML or JSON"),
            ("decode", [1, 2], "expected a TopologyAssignment"),
        ],
    )
    def test_bad_input_is_one_line_and_exit_1(self, tmp_path, capsys, command, payload, words):
        path = write(tmp_path, payload)
        assert main([command, path]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1
        assert path in lines[0] and words in lines[0]

    def test_a_missing_file(self, tmp_path, capsys):
        assert main(["decode", str(tmp_path / "absent.json")]) == 1
        assert len(capsys.readouterr().err.strip().splitlines()) == 1

    def test_an_unknown_gate_is_exit_2(self, tmp_path, capsys):
        assert main(["encode", write(tmp_path, self.decoded()), "--feature-gates", "NoSuchGate=true"]) == 2
