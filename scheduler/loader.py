"""Reading Kubernetes objects from YAML/JSON files: single objects, arrays, `kind: List`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler.errors import InputError

try:  # libyaml's loader is an order of magnitude faster on large dumps
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _YamlLoader = yaml.SafeLoader


def parse_text(text: str, *, file: str) -> list[Any]:
    """The documents in `text`: JSON first (fast path), then YAML (single or multi-document)."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError:
            pass  # YAML flow style is a superset of JSON; let the YAML parser report
    try:
        return [doc for doc in yaml.load_all(text, Loader=_YamlLoader) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise InputError(f"not valid YAML or JSON{where}: {problem}", file=file) from None


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", file=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=path) from None
    except UnicodeDecodeError:
        raise InputError("not a text file (not UTF-8)", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=path) from None


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
    return flatten_objects(parse_text(read_text(path), file=path), file=path)


def read_document(path: str) -> Any:
    """The single document of a file (for `encode` / `decode`)."""
    docs = parse_text(read_text(path), file=path)
    if len(docs) != 1:
        raise InputError(f"expected one document, found {len(docs)}", file=path)
    return docs[0]
