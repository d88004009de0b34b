"""Bounds on input, so that bad or hostile files fail with a one-line error.

Kubernetes objects are small and shallow: a file is read up to `max_input_bytes()`, a
document may nest mappings and lists at most `MAX_DEPTH` levels, and integers are kept to
Kubernetes' own bounds (int32 for counts, int64 for everything else).
"""

from __future__ import annotations

import os

from scheduler.errors import InputError

MAX_INPUT_BYTES_ENV = "TAS_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 256 * 2**20
MAX_DEPTH = 100
# YAML aliases let a small file name one value many times; written out (to JSON, to the
# database) it is that many values. A file whose aliases expand to more than this is
# refused, as Kubernetes' YAML decoder refuses "excessive aliasing".
MAX_EXPANDED_VALUES = 2_000_000
MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
# Python refuses to convert longer digit strings to int (sys.get_int_max_str_digits); no
# Kubernetes integer has more than 19 digits, so anything near that is a mistake
MAX_INT_DIGITS = 4000


class HugeInt:
    """An integer literal too long to be any Kubernetes value, kept as text so that the
    field holding it can be named in the error (parsing it would raise a bare ValueError)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"an integer of {len(self.text.lstrip('+-'))} digits"


def max_input_bytes() -> int:
    """The largest file read, in bytes: `TAS_MAX_INPUT_BYTES`, 256 MiB by default."""
    raw = os.environ.get(MAX_INPUT_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise InputError(f"{MAX_INPUT_BYTES_ENV}={raw!r} is not a positive number of bytes")
    return int(raw)


def nesting_depth_exceeds(doc: object, limit: int = MAX_DEPTH) -> bool:
    """Whether `doc` nests mappings/lists more than `limit` levels deep (no recursion)."""
    if type(doc) is not dict and type(doc) is not list:
        return False
    level: list = [doc]
    for _ in range(limit):
        deeper: list = []
        for node in level:
            for value in node.values() if type(node) is dict else node:
                kind = type(value)
                if kind is dict or kind is list:
                    deeper.append(value)
        if not deeper:
            return False
        level = deeper
    return True


def shared_values_problem(doc: object, *, depth_limit: int = MAX_DEPTH,
                          expanded_limit: int = MAX_EXPANDED_VALUES) -> str | None:
    """For a document whose mappings and lists may be shared (YAML aliases), what is wrong
    with it, or None: "cycle" (a value that contains itself), "deep" (nested more than
    `depth_limit` levels once aliases are followed) or "expands" (more than
    `expanded_limit` values once written out). Every shared value is looked at once, so
    this costs what the file holds, not what it expands to."""
    if type(doc) is not dict and type(doc) is not list:
        return None
    # per value (by id): (levels of nesting below and including it, values it expands to)
    done: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    stack: list[tuple[object, bool]] = [(doc, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = node.values() if type(node) is dict else node  # type: ignore[union-attr]
        if children_done:
            open_.discard(key)
            depth, size = 1, 1
            for value in children:
                below = done.get(id(value)) if type(value) is dict or type(value) is list else None
                if below is None:
                    size += 1
                else:
                    depth = max(depth, below[0] + 1)
                    size += below[1]
            if depth > depth_limit:
                return "deep"
            if size > expanded_limit:
                return "expands"
            done[key] = (depth, size)
            continue
        if key in done:
            continue
        if key in open_:
            return "cycle"
        open_.add(key)
        stack.append((node, True))
        for value in children:
            if (type(value) is dict or type(value) is list) and id(value) not in done:
                if id(value) in open_:
                    return "cycle"
                stack.append((value, False))
    return None
