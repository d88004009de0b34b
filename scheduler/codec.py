"""The v1beta2 TopologyAssignment codec (KEP-2724), as Kueue v0.19 stores it in a Workload.

Kueue keeps every admitted pod set's topology assignment inside the Workload object, and etcd
refuses objects over 1.5 MiB, so the wire form is built to be small:

* ``levels`` names the node labels, from the highest to the lowest topology level;
* ``slices`` partitions the ordered domains into consecutive groups. A slice holds
  ``domainCount`` domains, one ``valuesPerLevel`` entry per level (a ``universal`` value
  shared by every domain of the slice, or ``individual`` values stored as ``roots`` around a
  common ``prefix`` / ``suffix``) and ``podCounts`` (``universal`` or ``individual``).

Three encoders produce it:

* the single-slice encoder (Kueue's ``singleCompactTopologyAssignmentEncoding``): one slice,
  common prefix and suffix per level, universal values and pod counts where possible;
* the hostname-prefix encoder (``TASAssignmentsEncodingByHostnamePrefix``, on by default):
  consecutive domains whose hostnames share a reusable ``-``-delimited prefix become one slice
  each, backing off to shorter prefixes while the slices would exceed the limit; Kueue keeps
  whichever of the two encodings serializes smaller;
* the compact encoder (beyond Kueue, opt-in): a size-driven search over slice boundaries
  that still only uses constructs Kueue's decoder reads, and never returns more bytes than
  Kueue's own choice.

Decoding accepts the v1beta2 form and the v1beta1 / test form (``levels`` + ``domains``),
validates it against the v1beta2 API rules and raises `InputError` naming the offending field.
"""

from __future__ import annotations

import heapq
import json
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, cycle, pairwise, repeat
from typing import Any, TypedDict

from scheduler.assignment import HOSTNAME_LABEL, DomainAssignment, TopologyAssignment
from scheduler.errors import InputError
from scheduler.memory import gc_paused

# The v1beta2 API's validation limits (apis/kueue/v1beta2 TopologyAssignment and its parts).
MAX_LEVELS = 16
MAX_LEVEL_KEY_LENGTH = 317
MAX_SLICES = 1_000
MAX_DOMAINS_PER_SLICE = 100_000  # MaxItems of roots and of individual pod counts
MAX_VALUE_LENGTH = 63  # a label value: roots, prefix, suffix and universal values
MAX_INT32 = 2**31 - 1
# Not an API rule but this decoder's guard: universal-only slices cost a few bytes for any
# number of domains, and no cluster has this many nodes.
MAX_DECODED_DOMAINS = 1_000_000

# etcd's request size limit, the budget a Workload (and so its assignments) must fit in.
ETCD_OBJECT_LIMIT = 1_572_864  # 1.5 MiB


# ---------------------------------------------------------------- wire form (JSON shapes)


class IndividualValuesJSON(TypedDict, total=False):
    prefix: str
    suffix: str
    roots: list[str]


class LevelValuesJSON(TypedDict, total=False):
    universal: str
    individual: IndividualValuesJSON


class PodCountsJSON(TypedDict, total=False):
    universal: int
    individual: list[int]


class SliceJSON(TypedDict):
    domainCount: int
    valuesPerLevel: list[LevelValuesJSON]
    podCounts: PodCountsJSON


class TopologyAssignmentJSON(TypedDict):
    levels: list[str]
    slices: list[SliceJSON]


@dataclass(frozen=True, slots=True)
class Columns:
    """An assignment stored level by level: ``values[level][domain]`` and ``counts[domain]``.

    Every encoder works on whole columns, because prefixes, suffixes and universal values are
    properties of one level across many domains.
    """

    levels: tuple[str, ...]
    values: tuple[list[str], ...]
    counts: list[int]

    @classmethod
    def of(cls, assignment: TopologyAssignment) -> Columns:
        levels = assignment.levels
        domains = assignment.domains
        if not levels:
            raise InputError("must have at least 1 level", field="levels")
        width = len(levels)
        rows = list(map(operator.attrgetter("values"), domains))
        if set(map(len, rows)) - {width}:
            bad = next(i for i, row in enumerate(rows) if len(row) != width)
            raise InputError(f"has {len(rows[bad])} values for {width} levels", field=f"domains[{bad}].values")
        if width == 1:
            values: tuple[list[str], ...] = (list(map(operator.itemgetter(0), rows)),)
        elif rows:
            values = tuple(map(list, zip(*rows, strict=True)))
        else:
            values = tuple([] for _ in levels)
        return cls(levels, values, list(map(operator.attrgetter("count"), domains)))

    def __len__(self) -> int:
        return len(self.counts)

    def lowest_level_is_hostname(self) -> bool:
        return self.levels[-1] == HOSTNAME_LABEL


# ---------------------------------------------------------------- common prefixes and suffixes


_NONZERO = bytes([0] + [1] * 255)


def neighbour_common_prefixes(values: Sequence[str], lengths: Sequence[int] | None = None) -> list[int]:
    """``[len(common prefix of values[i] and values[i + 1]) for each i]``.

    For ASCII text every value is padded to one width, rows alternately with \\x01 and \\x02,
    and each row is XORed with the next as one big integer: the first non-zero byte of a row
    is where the pair first differs (at the latest where the shorter one ends, since the
    padding differs from its neighbour's). All loops run in C; other text goes pair by pair.
    ``lengths`` are the values' lengths, when known.
    """
    count = len(values)
    if count < 2:
        return []
    lengths = list(map(len, values)) if lengths is None else lengths
    width = max(lengths) + 1
    text = "".join(map(str.ljust, values, repeat(width), cycle("\x01\x02")))
    # The padding must be the only \x01 and \x02 characters: count them.
    padding = (width * ((count + 1) // 2) - sum(lengths[::2]), width * (count // 2) - sum(lengths[1::2]))
    if not text.isascii() or (text.count("\x01"), text.count("\x02")) != padding:
        return [_common_prefix_pair(a, b) for a, b in pairwise(values)]
    rows = text.encode("ascii")
    size = len(rows) - width
    diff = int.from_bytes(rows[:-width], "big") ^ int.from_bytes(rows[width:], "big")
    marks = diff.to_bytes(size, "big").translate(_NONZERO)
    starts = range(0, size, width)
    return list(map(operator.sub, map(marks.find, repeat(1), starts, range(width, size + width, width)), starts))


def _common_prefix_pair(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    low, high = 0, limit - 1  # binary search: slice comparisons run in C
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix_pair(a: str, b: str) -> int:
    return _common_prefix_pair(a[::-1], b[::-1])


def _common_affix_length(
    values: Sequence[str], bound: int, matches: Callable[[str, str], bool], affix: Callable[[str, int], str]
) -> int:
    """The longest ``affix(values[0], n)``, ``n <= bound``, that every value ``matches``.

    The bound comes from a sample of the values and usually holds, so one C-level pass
    confirms it; failing that, a binary search ("all values have it" is monotone in ``n``).
    """
    sample = values[0]
    low, high = 0, bound
    while low < high:
        mid = high if high == bound and low == 0 else (low + high + 1) // 2
        if all(map(matches, values, repeat(affix(sample, mid)))):
            low = mid
        else:
            high = mid - 1
    return low


def _samples(values: Sequence[str]) -> list[str]:
    return [*values[:: max(1, len(values) // 16)], values[-1]]


# Up to this many values, min and max find common affixes faster than sampling does.
_FEW_VALUES = 256


def _common_prefix_length(values: Sequence[str]) -> int:
    if len(values) <= _FEW_VALUES:  # the common prefix of the least and the greatest is everyone's
        return _common_prefix_pair(min(values), max(values))
    first = values[0]
    bound = min(_common_prefix_pair(first, v) for v in _samples(values))
    return _common_affix_length(values, bound, str.startswith, lambda v, n: v[:n])


def _common_suffix_length(values: Sequence[str], shortest: int) -> int:
    if len(values) <= _FEW_VALUES:
        reversed_values = [v[::-1] for v in values]
        return _common_prefix_pair(min(reversed_values), max(reversed_values))
    first = values[0]
    bound = min(shortest, *(_common_suffix_pair(first, v) for v in _samples(values)))
    return _common_affix_length(values, bound, str.endswith, lambda v, n: v[len(v) - n :])


# ---------------------------------------------------------------- Kueue's slice encoding


def _roots(values: Sequence[str], prefix: int, suffix: int) -> list[str]:
    if not prefix and not suffix:
        return list(values)
    return list(map(operator.getitem, values, repeat(slice(prefix, -suffix if suffix else None))))


def _individual(values: Sequence[str], prefix: int, suffix: int) -> LevelValuesJSON:
    individual: IndividualValuesJSON = {}
    first = values[0]
    if prefix:
        individual["prefix"] = first[:prefix]
    if suffix:
        individual["suffix"] = first[len(first) - suffix :]
    individual["roots"] = _roots(values, prefix, suffix)
    return {"individual": individual}


@dataclass(frozen=True, slots=True)
class LevelShape:
    """What decides how one level of a slice is written: the values' common prefix and
    suffix lengths (before Kueue's overlap rule), and their shortest, longest, total lengths."""

    prefix: int
    suffix: int
    shortest: int
    longest: int
    total: int

    @classmethod
    def of(cls, values: Sequence[str]) -> LevelShape:
        lengths = list(map(len, values))
        shortest = min(lengths)
        return cls(
            _common_prefix_length(values),
            _common_suffix_length(values, shortest),
            shortest,
            max(lengths),
            sum(lengths),
        )

    @property
    def universal(self) -> bool:
        return self.prefix == self.shortest == self.longest

    def joined(self, other: LevelShape, seam_prefix: int, seam_suffix: int) -> LevelShape:
        """The shape of this run followed by ``other``, given the common prefix and suffix of
        the two values across the seam."""
        return LevelShape(
            min(self.prefix, other.prefix, seam_prefix),
            min(self.suffix, other.suffix, seam_suffix),
            min(self.shortest, other.shortest),
            max(self.longest, other.longest),
            self.total + other.total,
        )

    def kueue_affixes(self) -> tuple[int, int]:
        """Kueue's prefix and suffix lengths: when the two overlap in the shortest value, the
        suffix is kept whole and the prefix shortened (["ababa", "aba"]: suffix "aba")."""
        if self.prefix + self.suffix > self.shortest:
            return self.shortest - self.suffix, self.suffix
        return self.prefix, self.suffix


def _level_values(values: Sequence[str], shape: LevelShape) -> LevelValuesJSON:
    if shape.universal:
        return {"universal": values[0]}
    return _individual(values, *shape.kueue_affixes())


def level_values(values: Sequence[str]) -> LevelValuesJSON:
    """One level of one slice, as Kueue's ``fillSingleCompactSliceValues`` writes it: all
    values equal give ``universal``, others ``individual`` roots around the longest common
    prefix and suffix (see `LevelShape.kueue_affixes`)."""
    return _level_values(values, LevelShape.of(values))


def pod_counts(counts: Sequence[int]) -> PodCountsJSON:
    first = counts[0]
    if counts.count(first) == len(counts):
        return {"universal": first}
    return {"individual": list(counts)}


def compact_slice(columns: Columns, start: int, stop: int) -> SliceJSON:
    """Kueue's ``compactSliceEncoding`` of domains ``[start, stop)``."""
    return _compact_slice(columns, start, stop)[0]


def _compact_slice(columns: Columns, start: int, stop: int) -> tuple[SliceJSON, list[LevelShape]]:
    values_per_level, shapes = [], []
    for column in columns.values:
        values = column[start:stop]
        shape = LevelShape.of(values)
        values_per_level.append(_level_values(values, shape))
        shapes.append(shape)
    encoded: SliceJSON = {
        "domainCount": stop - start,
        "valuesPerLevel": values_per_level,
        "podCounts": pod_counts(columns.counts[start:stop]),
    }
    return encoded, shapes


def _chunks(start: int, stop: int, size: int = MAX_DOMAINS_PER_SLICE) -> Iterable[tuple[int, int]]:
    for chunk_start in range(start, stop, size):
        yield chunk_start, min(chunk_start + size, stop)


def _assignment(
    columns: Columns,
    runs: Iterable[tuple[int, int]],
    encode: Callable[[Columns, int, int], SliceJSON] = compact_slice,
) -> dict:
    return {"levels": list(columns.levels), "slices": [encode(columns, a, b) for a, b in runs]}


def single_slice_encoding(columns: Columns) -> dict:
    """One compact slice for all domains (no slices for none).

    Kueue writes a single slice however many domains there are; past the per-slice limit of
    100,000 domains that object would be rejected by the API server, so here the domains are
    chunked at that limit instead. Up to the limit the result is Kueue's, byte for byte.
    """
    return _assignment(columns, _chunks(0, len(columns)))


# ---------------------------------------------------------------- sizes


def encoded_size(encoded: object) -> int:
    """The size this project reports: ``len(json.dumps(encoded, separators=(",", ":")))``."""
    return len(json.dumps(encoded, separators=(",", ":")))


_GO_EXTRA_ESCAPES = re.compile("[<>&\u2028\u2029]")


def _is_plain(text: str, specials: str = '"\\') -> bool:
    """Whether JSON writes ``text`` one byte per character (printable ASCII, no escapes)."""
    return text.isascii() and text.isprintable() and not any(c in text for c in specials)


def _go_text_size(text: str) -> int:
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    for match in _GO_EXTRA_ESCAPES.findall(text):
        size += 5 if match in "<>&" else 3
    return size


def go_json_size(encoded: object, *, plain_roots: bool = False) -> int:
    """The byte length of Go's ``json.Marshal`` of the same object, which Kueue compares.

    Go writes non-ASCII text as raw UTF-8 and escapes ``<``, ``>``, ``&`` (as \\u003c, six
    bytes) and U+2028/U+2029 (six bytes instead of three); control characters it escapes as
    Python does. Long lists of plain roots are counted without serializing them;
    ``plain_roots`` says they all are (they are parts of values already checked).
    """
    if not isinstance(encoded, dict) or not isinstance(encoded.get("slices"), list):
        return _go_text_size(json.dumps(encoded, separators=(",", ":"), ensure_ascii=False))
    size = 0
    skeleton_slices = []
    for item in encoded["slices"]:
        levels = []
        for values in item["valuesPerLevel"]:
            individual = values.get("individual")
            roots = individual.get("roots") if isinstance(individual, dict) else None
            if isinstance(roots, list) and roots and (plain_roots or _is_plain("".join(roots), '"\\<>&')):
                size += sum(map(len, roots)) + 3 * len(roots) - 1  # quotes and commas
                values = {"individual": {**individual, "roots": []}}
            levels.append(values)
        skeleton_slices.append({**item, "valuesPerLevel": levels})
    skeleton = {**encoded, "slices": skeleton_slices}
    return size + _go_text_size(json.dumps(skeleton, separators=(",", ":"), ensure_ascii=False))


# Fixed JSON bytes of the parts of a slice (compact separators), the slice's comma included.
_SLICE_FIXED = len('{"domainCount":,"valuesPerLevel":[],"podCounts":},')
_UNIVERSAL_FIXED = len('{"universal":""}')
_INDIVIDUAL_FIXED = len('{"individual":{"roots":[]}}')
_AFFIX_FIXED = len('"prefix":"",')
_COUNTS_UNIVERSAL_FIXED = len('{"universal":}')
_COUNTS_INDIVIDUAL_FIXED = len('{"individual":[]}')


# ---------------------------------------------------------------- hostname-prefix runs


def _is_sorted(values: Sequence[str]) -> bool:
    return all(map(operator.le, values, values[1:]))


def _has_candidates(hostnames: Sequence[str]) -> bool:
    """Whether any hostname has a "-" before its last character (a prefix candidate)."""
    return any(h.find("-", 0, len(h) - 1) >= 0 for h in hostnames)


def _reusable_counts(hostnames: Sequence[str], lengths: list[int]) -> tuple[list[int], list[int]]:
    """How many of each hostname's candidates are reusable, and the common prefix length of
    each neighbouring pair in the given order (``lengths``: the hostnames' lengths).

    A candidate is a prefix ending in a "-" that is not the hostname's last character; it is
    reusable when two hostnames have it. In sorted order a candidate of ``s[k]`` is shared iff
    ``s[k + 1]`` starts with it, or ``s[k - 1]`` does and is longer (a hostname equal to the
    prefix has no candidate there, its "-" being last). So the reusable candidates are a
    hostname's first ones, those ending within that neighbour reach.
    """
    already_sorted = _is_sorted(hostnames)
    ordered = hostnames if already_sorted else sorted(hostnames)
    ordered_lengths = lengths if already_sorted else list(map(len, ordered))
    shared = neighbour_common_prefixes(ordered, ordered_lengths)
    last = list(map(operator.sub, ordered_lengths, repeat(1)))
    before = [0, *map(min, shared, last)]
    limits = map(min, map(max, before, [*shared, 0]), last)
    reusable_sorted = list(map(str.count, ordered, repeat("-"), repeat(0), limits))
    if already_sorted:
        return reusable_sorted, shared
    # Equal hostnames have equal counts, so a hostname's count can be looked up by value.
    by_name = dict(zip(ordered, reusable_sorted, strict=True))
    return list(map(by_name.__getitem__, hostnames)), neighbour_common_prefixes(hostnames, lengths)


def _runs(count: int, starts: Sequence[int]) -> list[tuple[int, int]]:
    bounds = [0, *starts, count]
    return list(pairwise(bounds))


def _slices_needed(count: int, starts: Sequence[int]) -> int:
    if count <= MAX_DOMAINS_PER_SLICE:
        return len(starts) + 1
    return sum(-(-(b - a) // MAX_DOMAINS_PER_SLICE) for a, b in _runs(count, starts))


_ALWAYS = 1 << 30


def _key_thresholds(hostnames: Sequence[str]) -> tuple[list[int], list[int]]:
    """Per hostname its count of reusable candidates ``r``; per neighbouring pair the deepest
    depth up to which their keys are equal (`_ALWAYS` when equal at every depth).

    Neighbours with ``c`` candidates in common have equal keys at depth ``d`` iff
    ``d <= min(c, r_left, r_right)``, or at every depth when ``r_left == r_right <= c``.
    """
    lengths = list(map(len, hostnames))
    reusable, shared = _reusable_counts(hostnames, lengths)
    last = list(map(operator.sub, lengths, repeat(1)))
    common = list(map(str.count, hostnames, repeat("-"), repeat(0), map(min, shared, last, last[1:])))
    left, right = reusable[:-1], reusable[1:]
    always = map(operator.and_, map(operator.eq, left, right), map(operator.le, left, common))
    # Adding _ALWAYS lifts the pairs equal at every depth beyond any depth.
    thresholds = list(map(operator.add, map(min, common, left, right), map(operator.mul, always, repeat(_ALWAYS))))
    return reusable, thresholds


def _starts_at(depth: int, thresholds: Sequence[int]) -> list[int]:
    """Where runs of equal keys start at ``depth`` (after the first run)."""
    return list(compress(range(1, len(thresholds) + 1), map(operator.lt, thresholds, repeat(depth))))


def _prefix_runs(hostnames: Sequence[str]) -> tuple[int, list[int], list[int]] | None:
    """Kueue's hostname-prefix runs: ``(depth, reusable counts, run starts)``, or ``None`` for
    one run of all domains.

    Depth ``d`` keys a hostname by its ``min(d, r)``-th candidate, ``r`` being its count of
    reusable candidates ("" when that is 0). Depths are tried from the deepest down and the
    first whose runs fit the slice limit wins. Neighbours with ``c`` candidates in common have
    equal keys at depth ``d`` iff ``d <= min(c, r_left, r_right)``, or at every depth when
    ``r_left == r_right <= c`` (`_key_thresholds`); so one histogram of those thresholds
    gives the number of runs at every depth, and the runs themselves are computed once.
    """
    if not _has_candidates(hostnames):
        return None  # Kueue's depth loop never runs
    reusable, thresholds = _key_thresholds(hostnames)
    below = Counter(thresholds)
    count = len(hostnames)
    deepest = max(max(reusable), 1)  # deeper depths give every hostname its deepest key
    boundaries = sum(n for threshold, n in below.items() if threshold < deepest)
    for depth in range(deepest, 0, -1):
        if depth < deepest:
            boundaries -= below.get(depth, 0)  # pairs that share a key from this depth down
        if boundaries + 1 > MAX_SLICES:
            continue
        starts = _starts_at(depth, thresholds)
        if _slices_needed(count, starts) <= MAX_SLICES:
            return depth, reusable, starts
    return None


def reusable_hostname_prefix_keys(hostnames: Sequence[str]) -> list[str] | None:
    """Each hostname's run key as Kueue chooses it: its longest reusable ``-``-delimited
    prefix at the deepest depth whose runs fit the slice limit ("" when it has none there).
    A prefix is reusable when at least two hostnames have it. ``None`` when no depth fits, or
    no hostname has a ``-`` before its last character: then all domains form one run."""
    found = _prefix_runs(hostnames)
    if found is None:
        return None
    depth, reusable, _ = found
    keys = []
    for hostname, candidates in zip(hostnames, reusable, strict=True):
        end = 0
        for _ in range(min(depth, candidates)):
            end = hostname.index("-", end) + 1
        keys.append(hostname[:end])
    return keys


def domain_runs(count: int, keys: Sequence[str] | None) -> list[tuple[int, int]]:
    """Kueue's ``compactDomainRuns``: ``[start, stop)`` ranges of consecutive domains with
    equal keys (keys a, a, b, a give three runs); no keys means one run of all."""
    if count == 0:
        return []
    if not keys:
        return [(0, count)]
    return _runs(count, [i for i in range(1, count) if keys[i] != keys[i - 1]])


def _hostname_prefix_slices(columns: Columns) -> tuple[dict, list[tuple[int, int]], list[list[LevelShape]]]:
    """Kueue's hostname-prefix encoding, with each slice's domain range and level shapes."""
    count = len(columns)
    runs = [(0, count)] if count else []
    if count > 1 and columns.lowest_level_is_hostname():
        found = _prefix_runs(columns.values[-1])
        if found is not None:
            runs = _runs(count, found[2])
    chunks = [chunk for a, b in runs for chunk in _chunks(a, b)]
    built = [_compact_slice(columns, a, b) for a, b in chunks]
    encoded = {"levels": list(columns.levels), "slices": [item for item, _ in built]}
    return encoded, chunks, [shapes for _, shapes in built]


def hostname_prefix_encoding(columns: Columns) -> dict:
    """Kueue's ``compactTopologyAssignmentEncodingWithHostnamePrefixRuns``."""
    return _hostname_prefix_slices(columns)[0]


def _single_slice_size(columns: Columns, chunks: list[tuple[int, int]], shapes: list[list[LevelShape]]) -> int:
    """The JSON size of the single-slice encoding of plain values, worked out from the
    hostname-prefix slices' shapes instead of building it: a level's common prefix across all
    slices is the least of theirs and of the pairs across the seams, and likewise its suffix.
    """
    count = len(columns)
    size = go_json_size({"levels": list(columns.levels), "slices": []})
    size += _SLICE_FIXED - 1 + len(str(count)) + len(columns.levels) - 1
    for level, column in enumerate(columns.values):
        shape = shapes[0][level]
        for (start, _), later in zip(chunks[1:], shapes[1:], strict=True):
            before, after = column[start - 1], column[start]
            shape = shape.joined(later[level], _common_prefix_pair(before, after), _common_suffix_pair(before, after))
        if shape.universal:
            size += _UNIVERSAL_FIXED + shape.total // count
            continue
        prefix, suffix = shape.kueue_affixes()
        size += _INDIVIDUAL_FIXED + shape.total - count * (prefix + suffix) + 3 * count - 1
        size += (_AFFIX_FIXED + prefix if prefix else 0) + (_AFFIX_FIXED + suffix if suffix else 0)
    counts = columns.counts
    if counts.count(counts[0]) == count:
        return size + _COUNTS_UNIVERSAL_FIXED + len(str(counts[0]))
    return size + _COUNTS_INDIVIDUAL_FIXED + sum(map(len, map(str, counts))) + count - 1


def v1beta2_from(columns: Columns, *, by_hostname_prefix: bool = True) -> dict:
    """Kueue's ``V1Beta2From``: the encoding Kueue stores for this assignment.

    With the hostname-prefix gate, an encoding of one slice is kept as is, one of more than
    the per-slice limit of domains too (the single slice could not hold them); otherwise the
    single-slice encoding wins only when its JSON is strictly smaller.
    """
    if not by_hostname_prefix:
        return single_slice_encoding(columns)
    by_prefix, chunks, shapes = _hostname_prefix_slices(columns)
    if len(chunks) <= 1 or len(columns) > MAX_DOMAINS_PER_SLICE:
        return by_prefix
    if all(_is_plain("".join(column), '"\\<>&') for column in columns.values):
        # Go and Python write plain text alike, one byte per character.
        if _single_slice_size(columns, chunks, shapes) < go_json_size(by_prefix, plain_roots=True):
            return single_slice_encoding(columns)
        return by_prefix
    single = single_slice_encoding(columns)
    return single if go_json_size(single) < go_json_size(by_prefix) else by_prefix


# ---------------------------------------------------------------- the compact encoder
#
# A size-driven search over slice boundaries. Domains stay in order (their order carries
# meaning: ranks, scale-down), so a slice is a run of consecutive domains and the search is
# over where runs start. It starts from units (`_compact_units`: node pools, subnets, scale
# sets, or single domains) and greedily merges the neighbouring pair whose merge saves the
# most bytes, while merging saves bytes; then, while there are more slices than the API
# allows, the pair whose merge costs the fewest extra bytes. Where Kueue, once the slice limit
# is hit, drops to a shorter prefix for every domain, this spends merges where they cost least.
#
# A run's statistics merge in O(1) (the common prefix of a run is the minimum of its parts'
# and of the pair across the seam), so each step prices a merge exactly, without building it.


def _json_weight(text: str) -> int:
    """Bytes ``json.dumps`` writes for the characters of ``text`` (without the quotes)."""
    if _is_plain(text):
        return len(text)
    return len(json.dumps(text)) - 2


def _affixes(size: int, prefix: int, suffix: int, shortest: int, sample: str, plain: bool) -> tuple[int, int, int]:
    """The prefix and suffix lengths that make one level of ``size`` values smallest, and the
    bytes they save (negative) against storing whole values as roots.

    Unlike Kueue, an affix is left out when its key costs more than it saves, and when the
    common prefix and suffix overlap, the overlap goes to whichever side saves a key.
    """

    def saving(start: int, stop: int) -> int:
        weight = stop - start if plain else _json_weight(sample[start:stop])
        return _AFFIX_FIXED + weight - size * weight

    prefix, suffix = min(prefix, shortest), min(suffix, shortest)
    options = [(0, 0), (prefix, 0), (0, suffix)]
    if prefix + suffix <= shortest:
        options.append((prefix, suffix))
    else:
        options += [(prefix, shortest - prefix), (shortest - suffix, suffix)]
    best = (0, 0, 0)
    for p, s in options:
        delta = (saving(0, p) if p else 0) + (saving(len(sample) - s, len(sample)) if s else 0)
        if delta < best[2]:
            best = (p, s, delta)
    return best


@dataclass(slots=True)
class _Run:
    """What prices the slice of a run of consecutive domains ``[start, stop)``."""

    start: int
    stop: int
    shapes: list[LevelShape]  # per level
    weights: list[int]  # per level: JSON bytes of the values' characters (their length when plain)
    counts_uniform: bool
    count_digits: int  # characters of all pod counts
    cost: int = 0
    version: int = 0  # grows with every merge into the run starting here


class _CompactSearch:
    def __init__(self, columns: Columns, units: Sequence[tuple[int, int]]) -> None:
        self.columns = columns
        self.plain = [_is_plain("".join(column)) for column in columns.values]
        self.pushed = 0
        self.runs = [self._unit(start, stop) for start, stop in units]

    def _unit(self, start: int, stop: int) -> _Run:
        shapes, weights = [], []
        for plain, column in zip(self.plain, self.columns.values, strict=True):
            values = column[start:stop]
            shape = LevelShape.of(values)
            shapes.append(shape)
            weights.append(shape.total if plain else sum(map(_json_weight, values)))
        counts = self.columns.counts[start:stop]
        run = _Run(
            start,
            stop,
            shapes,
            weights,
            counts_uniform=counts.count(counts[0]) == len(counts),
            count_digits=sum(map(len, map(str, counts))),
        )
        run.cost = self.cost(run)
        return run

    def cost(self, run: _Run) -> int:
        """JSON bytes of the run's slice, with its separating comma."""
        size = run.stop - run.start
        total = _SLICE_FIXED + len(str(size)) + len(run.shapes) - 1
        for shape, weight, plain, column in zip(run.shapes, run.weights, self.plain, self.columns.values, strict=True):
            if shape.universal:
                total += _UNIVERSAL_FIXED + weight // size
                continue
            _, _, delta = _affixes(size, shape.prefix, shape.suffix, shape.shortest, column[run.start], plain)
            total += _INDIVIDUAL_FIXED + weight + 3 * size - 1 + delta
        if run.counts_uniform:
            total += _COUNTS_UNIVERSAL_FIXED + run.count_digits // size
        else:
            total += _COUNTS_INDIVIDUAL_FIXED + run.count_digits + size - 1
        return total

    def merged(self, left: _Run, right: _Run) -> _Run:
        seam = right.start
        shapes = []
        for column, before, after in zip(self.columns.values, left.shapes, right.shapes, strict=True):
            a, b = column[seam - 1], column[seam]
            shapes.append(before.joined(after, _common_prefix_pair(a, b), _common_suffix_pair(a, b)))
        counts = self.columns.counts
        run = _Run(
            left.start,
            right.stop,
            shapes,
            list(map(operator.add, left.weights, right.weights)),
            counts_uniform=left.counts_uniform and right.counts_uniform and counts[left.start] == counts[seam],
            count_digits=left.count_digits + right.count_digits,
        )
        run.cost = self.cost(run)
        return run

    def _push(self, heap: list, left: _Run, right: _Run) -> None:
        if right.stop - left.start > MAX_DOMAINS_PER_SLICE:
            return
        joint = self.merged(left, right)
        self.pushed += 1  # a tie-breaker, so that runs themselves are never compared
        heapq.heappush(
            heap, (joint.cost - left.cost - right.cost, self.pushed, left.start, left.version, right.version, joint)
        )

    def search(self) -> list[tuple[int, int]]:
        heap: list = []
        for left, right in pairwise(self.runs):
            self._push(heap, left, right)
        starting = {run.start: run for run in self.runs}
        ending = {run.stop: run for run in self.runs}
        live = len(self.runs)
        while heap:
            delta, _, start, left_version, right_version, joint = heap[0]
            if delta >= 0 and live <= MAX_SLICES:
                break
            heapq.heappop(heap)
            left = starting.get(start)  # a pair is stale once either side merged since
            if left is None or left.version != left_version:
                continue
            right = starting.get(left.stop)
            if right is None or right.version != right_version:
                continue
            del starting[right.start], ending[left.stop]
            joint.version = left.version + 1
            starting[joint.start] = ending[joint.stop] = joint
            live -= 1
            before = ending.get(joint.start)
            if before is not None:
                self._push(heap, before, joint)
            after = starting.get(joint.stop)
            if after is not None:
                self._push(heap, joint, after)
        return sorted((run.start, run.stop) for run in starting.values())

    def slice(self, columns: Columns, start: int, stop: int) -> SliceJSON:
        per_level: list[LevelValuesJSON] = []
        for plain, column in zip(self.plain, columns.values, strict=True):
            values = column[start:stop]
            shape = LevelShape.of(values)
            if shape.universal:
                per_level.append({"universal": values[0]})
                continue
            prefix, suffix, _ = _affixes(len(values), shape.prefix, shape.suffix, shape.shortest, values[0], plain)
            per_level.append(_individual(values, prefix, suffix))
        return {
            "domainCount": stop - start,
            "valuesPerLevel": per_level,
            "podCounts": pod_counts(columns.counts[start:stop]),
        }


# Below this many domains without "-"-delimited names, the search may start from single domains.
_MAX_SINGLE_DOMAIN_UNITS = 20_000


def _compact_units(columns: Columns) -> list[tuple[int, int]]:
    """Where the search starts, as ``[start, stop)`` runs of at most one slice each.

    Runs of equal deepest reusable ``-``-prefixes of the lowest level's values (a node pool,
    a subnet, a scale set) are the natural units: splitting one never pays for the slice it
    costs. Without such prefixes, single domains, unless there are too many to merge one by
    one; then one run.
    """
    count = len(columns)
    values = columns.values[-1]
    if count > 1 and _has_candidates(values):
        reusable, thresholds = _key_thresholds(values)
        runs = _runs(count, _starts_at(max(reusable), thresholds))
    elif count <= _MAX_SINGLE_DOMAIN_UNITS:
        runs = [(i, i + 1) for i in range(count)]
    else:
        runs = [(0, count)]
    return [chunk for a, b in runs for chunk in _chunks(a, b)]


def compact_encoding(columns: Columns) -> dict:
    """The smallest encoding the search finds, or Kueue's own when that is not larger.

    Kueue's choice (with the hostname-prefix gate) is the baseline, so the result is never
    larger than what Kueue would store, by this project's measure or by Go's.
    """
    baseline = v1beta2_from(columns, by_hostname_prefix=True)
    if len(columns) <= 1:
        return baseline
    search = _CompactSearch(columns, _compact_units(columns))
    runs = search.search()
    if len(runs) > MAX_SLICES:
        return baseline
    found = _assignment(columns, runs, encode=search.slice)
    if encoded_size(found) < encoded_size(baseline) and go_json_size(found) <= go_json_size(baseline):
        return found
    return baseline


def encode_assignment(
    assignment: TopologyAssignment, *, by_hostname_prefix: bool = True, compact: bool = False
) -> dict:
    """The v1beta2 JSON of ``assignment``: Kueue v0.19's ``V1Beta2From`` under the given gate
    (keys in Kueue's order, unset fields omitted), or the compact encoding when ``compact``."""
    with gc_paused():
        columns = Columns.of(assignment)
        if compact:
            return compact_encoding(columns)
        return v1beta2_from(columns, by_hostname_prefix=by_hostname_prefix)


# ---------------------------------------------------------------- validation and decoding

_JSON_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _is_int(value: object) -> bool:
    return type(value) is int  # bool is an int subclass, and no count is a boolean


def _require(data: Mapping, key: str, where: str) -> Any:
    if data.get(key) is None:
        raise InputError("required field is missing", field=_join(where, key))
    return data[key]


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _mapping(value: object, field: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise InputError(f"must be an object, got {_kind(value)}", field=field)
    return value


def _list(value: object, field: str, *, min_items: int = 0, max_items: int | None = None) -> Sequence:
    if not isinstance(value, list | tuple):
        raise InputError(f"must be a list, got {_kind(value)}", field=field)
    if len(value) < min_items:
        raise InputError(f"must have at least {min_items} item{'s' if min_items > 1 else ''}", field=field)
    if max_items is not None and len(value) > max_items:
        raise InputError(f"must have at most {max_items:,} items, got {len(value):,}", field=field)
    return value


def _strings(values: Sequence, field: str, max_length: int) -> Sequence[str]:
    if not set(map(type, values)) <= {str}:
        i = next(i for i, v in enumerate(values) if type(v) is not str)
        raise InputError(f"must be a string, got {_kind(values[i])}", field=f"{field}[{i}]")
    if values and max(map(len, values)) > max_length:
        i = next(i for i, v in enumerate(values) if len(v) > max_length)
        raise InputError(f"must be at most {max_length} characters, got {len(values[i])}", field=f"{field}[{i}]")
    return values


def _string(value: object, field: str, max_length: int) -> str:
    if type(value) is not str:
        raise InputError(f"must be a string, got {_kind(value)}", field=field)
    if len(value) > max_length:
        raise InputError(f"must be at most {max_length} characters, got {len(value)}", field=field)
    return value


def _count(value: object, field: str, *, maximum: int = MAX_INT32) -> int:
    if not _is_int(value):
        raise InputError(f"must be an integer, got {_kind(value)}", field=field)
    if value < 1:
        raise InputError(f"must be at least 1, got {value}", field=field)
    if value > maximum:
        raise InputError(f"must be at most {maximum:,}, got {value:,}", field=field)
    return value


def _counts(values: Sequence, field: str) -> Sequence[int]:
    if set(map(type, values)) <= {int} and (not values or (min(values) >= 1 and max(values) <= MAX_INT32)):
        return values
    for i, c in enumerate(values):
        _count(c, f"{field}[{i}]")
    return values  # pragma: no cover - the loop raised


def _levels(data: Mapping) -> list[str]:
    levels = _list(_require(data, "levels", ""), "levels", min_items=1, max_items=MAX_LEVELS)
    levels = list(_strings(levels, "levels", MAX_LEVEL_KEY_LENGTH))
    for i, level in enumerate(levels):  # node label keys, one per level
        if not level:
            raise InputError("must be a node label key, got ''", field=f"levels[{i}]")
        if level in levels[:i]:
            raise InputError(f"{level!r} is listed twice", field=f"levels[{i}]")
    return levels


def _one_of(data: Mapping, field: str) -> tuple[str, Any]:
    """Exactly one of ``universal`` / ``individual`` (a null counts as unset)."""
    universal, individual = data.get("universal"), data.get("individual")
    if universal is not None and individual is not None:
        raise InputError("exactly one of universal, individual must be set, both are", field=field)
    if universal is None and individual is None:
        raise InputError("exactly one of universal, individual must be set, neither is", field=field)
    return ("universal", universal) if universal is not None else ("individual", individual)


def _affix(data: Mapping, key: str, where: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    value = _string(value, _join(where, key), MAX_VALUE_LENGTH)
    if not value:
        raise InputError("must be non-empty when set (leave it out instead)", field=_join(where, key))
    return value


def _decode_level(data: object, size: int, where: str) -> list[str]:
    data = _mapping(data, where)
    which, value = _one_of(data, where)
    if which == "universal":
        return [_string(value, f"{where}.universal", MAX_VALUE_LENGTH)] * size
    where = f"{where}.individual"
    individual = _mapping(value, where)
    prefix = _affix(individual, "prefix", where)
    suffix = _affix(individual, "suffix", where)
    roots = _list(_require(individual, "roots", where), f"{where}.roots", min_items=1)
    if len(roots) != size:
        raise InputError(f"must have domainCount ({size}) items, got {len(roots)}", field=f"{where}.roots")
    _strings(roots, f"{where}.roots", MAX_VALUE_LENGTH)
    values: Iterable[str] = roots
    if prefix:
        values = map(operator.add, repeat(prefix), values)
    if suffix:
        values = map(operator.add, values, repeat(suffix))
    return list(values)


def _decode_pod_counts(data: object, size: int, where: str) -> list[int]:
    data = _mapping(data, where)
    which, value = _one_of(data, where)
    if which == "universal":
        return [_count(value, f"{where}.universal")] * size
    counts = _list(value, f"{where}.individual", min_items=1)
    if len(counts) != size:
        raise InputError(f"must have domainCount ({size}) items, got {len(counts)}", field=f"{where}.individual")
    return list(_counts(counts, f"{where}.individual"))


def _decode_slices(data: Mapping, levels: list[str]) -> Columns:
    if data.get("slices") is None:
        raise InputError("required field is missing (or give the v1beta1 form's domains)", field="slices")
    slices = _list(data["slices"], "slices", max_items=MAX_SLICES)
    columns: tuple[list[str], ...] = tuple([] for _ in levels)
    counts: list[int] = []
    for s, item in enumerate(slices):
        where = f"slices[{s}]"
        item = _mapping(item, where)
        size = _count(_require(item, "domainCount", where), f"{where}.domainCount", maximum=MAX_DOMAINS_PER_SLICE)
        if len(counts) + size > MAX_DECODED_DOMAINS:
            raise InputError(
                f"the slices so far hold more than {MAX_DECODED_DOMAINS:,} domains", field=f"{where}.domainCount"
            )
        per_level = _list(
            _require(item, "valuesPerLevel", where), f"{where}.valuesPerLevel", min_items=1, max_items=MAX_LEVELS
        )
        if len(per_level) != len(levels):
            raise InputError(
                f"must have one entry per level ({len(levels)}), got {len(per_level)}",
                field=f"{where}.valuesPerLevel",
            )
        for level, values in enumerate(per_level):
            columns[level].extend(_decode_level(values, size, f"{where}.valuesPerLevel[{level}]"))
        counts.extend(_decode_pod_counts(_require(item, "podCounts", where), size, f"{where}.podCounts"))
    return Columns(tuple(levels), columns, counts)


def _decode_domains(data: Mapping, levels: list[str]) -> Columns:
    domains = _list(_require(data, "domains", ""), "domains")
    columns: tuple[list[str], ...] = tuple([] for _ in levels)
    counts: list[int] = []
    width = len(levels)
    for d, item in enumerate(domains):
        where = f"domains[{d}]"
        item = _mapping(item, where)
        values = _list(_require(item, "values", where), f"{where}.values")
        if len(values) != width:
            raise InputError(f"must have one value per level ({width}), got {len(values)}", field=f"{where}.values")
        _strings(values, f"{where}.values", MAX_VALUE_LENGTH)
        for column, value in zip(columns, values, strict=True):
            column.append(value)
        counts.append(_count(_require(item, "count", where), f"{where}.count"))
    return Columns(tuple(levels), columns, counts)


def decode_columns(data: object) -> Columns:
    """Validate an assignment in either form and return it level by level."""
    data = _mapping(data, "topologyAssignment")
    has_slices, has_domains = data.get("slices") is not None, data.get("domains") is not None
    if has_slices and has_domains:
        raise InputError("set either slices (v1beta2) or domains (v1beta1), not both", field="slices")
    levels = _levels(data)
    if has_domains:
        return _decode_domains(data, levels)
    return _decode_slices(data, levels)


def validate_encoded(data: object) -> None:
    """Check a v1beta2 assignment against the API's validation rules; `InputError` if not.

    The rules: 1 to 16 levels; at most 1,000 slices; per slice a domainCount of 1 to 100,000,
    one valuesPerLevel entry per level, exactly one of universal / individual in each entry
    and in podCounts, roots and individual pod counts as long as domainCount, prefix and
    suffix unset or non-empty, label values at most 63 characters, pod counts of at least 1
    (and at most int32). Beyond the API, no more than `MAX_DECODED_DOMAINS` domains in all.
    """
    data = _mapping(data, "topologyAssignment")
    if data.get("slices") is None:
        raise InputError("required field is missing", field="slices")
    if data.get("domains") is not None:
        raise InputError("v1beta2 has no domains field; use slices", field="domains")
    _decode_slices(data, _levels(data))


def _to_assignment(columns: Columns) -> TopologyAssignment:
    rows = zip(*columns.values, strict=True)  # one tuple of values per domain
    return TopologyAssignment(columns.levels, tuple(map(DomainAssignment, rows, columns.counts)))


def decode_assignment(data: Mapping) -> TopologyAssignment:
    """The ordered domains of an assignment in v1beta2 (``levels`` + ``slices``) or v1beta1
    (``levels`` + ``domains``) form; `InputError` naming the field on any violation."""
    with gc_paused():
        return _to_assignment(decode_columns(data))


def _decoded_json(columns: Columns) -> dict:
    rows = map(list, zip(*columns.values, strict=True))
    return {
        "levels": list(columns.levels),
        "domains": [{"values": v, "count": c} for v, c in zip(rows, columns.counts, strict=True)],
    }


def _workload_pod_sets(doc: Mapping) -> dict:
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    name = "/".join(str(part) for part in (metadata.get("namespace"), metadata.get("name")) if part)
    obj = f"Workload/{name}" if name else "Workload"
    try:
        status = doc.get("status")
        admission = _mapping(status, "status").get("admission") if status is not None else None
        if admission is None:
            return {"podSets": []}
        admission = _mapping(admission, "status.admission")
        assignments = admission.get("podSetAssignments")
        if assignments is None:
            return {"podSets": []}
        pod_sets = []
        for i, psa in enumerate(_list(assignments, "status.admission.podSetAssignments")):
            where = f"status.admission.podSetAssignments[{i}]"
            psa = _mapping(psa, where)
            assignment = psa.get("topologyAssignment")
            if assignment is None:
                continue
            try:
                decoded = _decoded_json(decode_columns(assignment))
            except InputError as exc:
                raise exc.under(f"{where}.topologyAssignment") from None
            pod_sets.append({"name": psa.get("name", "main"), **decoded})
        return {"podSets": pod_sets}
    except InputError as exc:
        raise exc.located(obj=obj) from None


def decode_document(doc: object) -> dict:
    """What ``python -m scheduler decode FILE`` prints for one document.

    An assignment in either form gives ``{"levels", "domains"}``; a Workload gives the decoded
    assignment of each of its admitted pod sets, ``{"podSets": [{"name", "levels",
    "domains"}]}``; anything else is an `InputError`.
    """
    if isinstance(doc, Mapping):
        with gc_paused():
            if doc.get("kind") == "Workload":
                return _workload_pod_sets(doc)
            if "levels" in doc or "slices" in doc or "domains" in doc:
                return _decoded_json(decode_columns(doc))
        kind = doc.get("kind")
        if kind is not None:
            raise InputError(f"expected a TopologyAssignment or a Workload, got kind {kind!r}", field="kind")
    raise InputError(
        f"expected a TopologyAssignment ({{levels, slices}} or {{levels, domains}}) or a Workload, got {_kind(doc)}"
    )
