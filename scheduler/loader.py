"""Reading Kubernetes objects from YAML/JSON files: single objects, arrays, `kind: List`.

Input is bounded (see `scheduler.limits`): files are read up to a size, documents may nest
only so deep, integer literals too long for any Kubernetes field are kept as `HugeInt` for
the field's parser to refuse, and a YAML mapping may not repeat a key.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, ScalarNode

from scheduler.errors import InputError
from scheduler.limits import (
    MAX_DEPTH,
    MAX_EXPANDED_VALUES,
    MAX_INPUT_BYTES_ENV,
    MAX_INT_DIGITS,
    HugeInt,
    max_input_bytes,
    nesting_depth_exceeds,
    shared_values_problem,
)

try:  # libyaml's loader is an order of magnitude faster on large dumps
    _BaseLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _BaseLoader = yaml.SafeLoader

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _YamlLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """The safe loader, refusing repeated keys and keeping over-long integers as text."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            try:
                keys = {key.value for key, _ in node.value}
            except TypeError:  # a key that is itself a mapping or a list
                keys = set()
            if len(keys) != len(node.value):
                _refuse_duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int | HugeInt:
        if len(node.value) > MAX_INT_DIGITS:
            return HugeInt(node.value)
        return super().construct_yaml_int(node)


def _refuse_duplicates(node: MappingNode) -> None:
    """A ConstructorError at the second of two equal scalar keys (merge keys `<<` aside)."""
    seen: set[tuple[str, str]] = set()
    for key_node, _ in node.value:
        if type(key_node) is ScalarNode and key_node.tag != _MERGE_TAG:
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
            seen.add(key)


_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_yaml_int)


def _json_int(text: str) -> int | HugeInt:
    return HugeInt(text) if len(text) > MAX_INT_DIGITS else int(text)


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object; a key given twice is an error, as kubectl's strict field validation
    makes it (a JSON parser would keep the last value and drop the first without a word)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _load_json(text: str, *, file: str) -> Any:
    try:
        try:
            return json.loads(text, object_pairs_hook=_refuse_duplicate_pairs)
        except json.JSONDecodeError:
            raise
        except _DuplicateKey:
            raise
        except ValueError:  # an integer literal past Python's digit limit: keep it for the field to name
            return json.loads(text, parse_int=_json_int, object_pairs_hook=_refuse_duplicate_pairs)
    except _DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.key!r} in a JSON object", file=file) from None


def _too_deep(file: str) -> InputError:
    return InputError(f"nested more than {MAX_DEPTH} levels deep (Kubernetes objects are shallow)", file=file)


def _parse_documents(text: str, *, file: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [_load_json(text, file=file)]
        except json.JSONDecodeError:
            pass  # YAML flow style is a superset of JSON; let the YAML parser report
    try:
        return [doc for doc in yaml.load_all(text, Loader=_YamlLoader) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        if "nesting depth" in problem:
            raise _too_deep(file) from None
        raise InputError(f"not valid YAML or JSON{where}: {problem}", file=file) from None


def parse_text(text: str, *, file: str) -> list[Any]:
    """The documents in `text`: JSON first (fast path), then YAML (single or multi-document)."""
    try:
        documents = _parse_documents(text, file=file)
    except RecursionError:
        raise _too_deep(file) from None
    if "&" in text and "*" in text:  # YAML anchors and aliases, maybe: values may be shared
        for doc in documents:
            problem = shared_values_problem(doc)
            if problem == "deep":
                raise _too_deep(file)
            if problem == "expands":
                raise InputError(f"its YAML aliases expand to more than {MAX_EXPANDED_VALUES:,} values (excessive "
                                 "aliasing)", file=file)
            if problem == "cycle":
                raise InputError("a YAML alias refers to a value that contains it", file=file)
    elif any(nesting_depth_exceeds(doc) for doc in documents):
        raise _too_deep(file)
    return documents


STDIN = "-"  # as a FILE: standard input (`kubectl get ... -o json | tas simulate -`)


def source_name(path: str) -> str:
    """How errors name where the input came from."""
    return "standard input" if path == STDIN else path


def read_text(path: str) -> str:
    """The file's (or, for `-`, standard input's) text, refused beyond `max_input_bytes()`
    (read no further than that)."""
    limit = max_input_bytes()
    name = source_name(path)
    try:
        if path == STDIN:
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputError("no such file", file=name) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=name) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=name) from None
    if len(data) > limit:
        raise InputError(f"larger than {limit:,} bytes (the limit; set {MAX_INPUT_BYTES_ENV} to raise it)",
                         file=name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not a text file (not UTF-8)", file=name) from None


def flatten_objects(documents: list[Any], *, file: str) -> list[dict]:
    """Every object in the documents, with JSON arrays and `kind: List` items expanded."""
    out: list[dict] = []

    def visit(doc: Any, where: str) -> None:
        if isinstance(doc, list):
            for i, item in enumerate(doc):
                visit(item, f"{where}[{i}]")
        elif isinstance(doc, dict):
            if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
                items = doc.get("items")
                if items is None:
                    return
                if not isinstance(items, list):
                    raise InputError("must be a list", field=f"{where}items".lstrip("."), file=file)
                for i, item in enumerate(items):
                    visit(item, f"{where}items[{i}]")
            else:
                out.append(doc)
        else:
            raise InputError(
                f"expected a Kubernetes object (a mapping), got {type(doc).__name__}",
                field=where or "document", file=file,
            )

    for n, doc in enumerate(documents):
        visit(doc, f"document {n + 1}: " if len(documents) > 1 else "")
    return out


def read_objects(path: str) -> list[dict]:
    """All Kubernetes objects in one file."""
    name = source_name(path)
    return flatten_objects(parse_text(read_text(path), file=name), file=name)


def read_document(path: str) -> Any:
    """The single document of a file (for `encode` / `decode`)."""
    name = source_name(path)
    docs = parse_text(read_text(path), file=name)
    if len(docs) != 1:
        raise InputError(f"expected one document, found {len(docs)}", file=name)
    return docs[0]
