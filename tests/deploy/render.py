"""Rendering deploy/ as `kubectl apply -k` would: with kubectl's kustomize (or a kustomize
binary) when one is installed, else with `build` below, a renderer of exactly the
kustomize features the manifests use, so that the tests run everywhere.

`build` knows: `resources` (files, and folders holding a kustomization), `components`,
`configMapGenerator` with literals (create and merge, the name suffixed with kustomize's
content hash and every `configMapRef` renamed to match) and `patches` given by `path`
(merged as strategic merge patches without lists). A kustomization using anything else is
refused, so that a new feature in the manifests cannot be rendered wrongly without notice.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = PROJECT_ROOT / "deploy"

KNOWN_FIELDS = {"apiVersion", "kind", "resources", "components", "configMapGenerator", "patches"}
GENERATED = "tas.test/generated"  # marks a generated ConfigMap until its name is hashed


def kustomize_command() -> list[str] | None:
    if shutil.which("kubectl"):
        return [shutil.which("kubectl"), "kustomize"]
    if shutil.which("kustomize"):
        return [shutil.which("kustomize"), "build"]
    return None


def render(path: Path) -> list[dict]:
    """The objects `kubectl apply -k path` would send."""
    command = kustomize_command()
    if command is None:
        return build(path)
    return render_with(command, path)


def render_with(command: list[str], path: Path) -> list[dict]:
    proc = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{' '.join(command)} {path}: {proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def composed(tmp: Path, *, resources: list[Path], components: list[Path]) -> Path:
    """A kustomization in `tmp` made of other folders (kustomize wants relative paths)."""
    def rel(path: Path) -> str:
        return os.path.relpath(path, tmp)

    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [rel(p) for p in resources], "components": [rel(p) for p in components]}))
    return tmp


# ---------------------------------------------------------------- the fallback


def build(path: Path) -> list[dict]:
    objects = _accumulate(Path(path), [])
    return _finish(objects)


def _kustomization(folder: Path) -> dict:
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if (folder / name).is_file():
            doc = yaml.safe_load((folder / name).read_text()) or {}
            unknown = set(doc) - KNOWN_FIELDS
            if unknown:
                raise NotImplementedError(f"{folder}: the fallback renderer does not know {sorted(unknown)}")
            return doc
    raise FileNotFoundError(f"{folder}: no kustomization")


def _key(obj: dict) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return obj.get("kind", ""), meta.get("namespace") or "", meta["name"]


def _accumulate(folder: Path, objects: list[dict]) -> list[dict]:
    """Kustomize's order: resources, then components, then generators, then patches."""
    kustomization = _kustomization(folder)
    for entry in kustomization.get("resources") or []:
        target = folder / entry
        if target.is_dir():
            objects.extend(_accumulate(target, []))
        else:
            objects.extend(doc for doc in yaml.safe_load_all(target.read_text()) if doc)
    for entry in kustomization.get("components") or []:
        objects = _accumulate(folder / entry, objects)
    for generator in kustomization.get("configMapGenerator") or []:
        _generate(generator, objects)
    for patch in kustomization.get("patches") or []:
        if set(patch) != {"path"}:
            raise NotImplementedError(f"{folder}: only patches given by path are rendered: {patch}")
        _patch(yaml.safe_load((folder / patch["path"]).read_text()), objects)
    return objects


def _generate(generator: dict, objects: list[dict]) -> None:
    if set(generator) - {"name", "namespace", "behavior", "literals"}:
        raise NotImplementedError(f"configMapGenerator: only literals are rendered: {generator}")
    data = {}
    for literal in generator.get("literals") or []:
        name, _, value = literal.partition("=")
        data[name] = value
    key = ("ConfigMap", generator.get("namespace") or "", generator["name"])
    behavior = generator.get("behavior") or "create"
    existing = [obj for obj in objects if _key(obj) == key and obj["metadata"].get("annotations", {}).get(GENERATED)]
    if behavior == "create":
        assert not existing, f"{key} is generated twice"
        metadata = {"name": generator["name"], "annotations": {GENERATED: "true"}}
        if generator.get("namespace"):
            metadata["namespace"] = generator["namespace"]
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
    elif behavior == "merge":
        assert len(existing) == 1, f"{key}: merge needs exactly one generated ConfigMap, found {len(existing)}"
        existing[0]["data"].update(data)
    else:
        raise NotImplementedError(f"configMapGenerator behavior {behavior!r}")


def _merge(target: Any, patch: Any) -> Any:
    if isinstance(patch, list):
        return _merge_named(target, patch)
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    out = dict(target)
    for key, value in patch.items():
        out[key] = _merge(out.get(key), value)
    return out


def _merge_named(target: Any, patch: list) -> list:
    """A strategic merge of a list whose items are named (containers, volumes, ports, env):
    each patch item merged into the target's item of its name, new names appended. Other
    lists (whose strategy depends on the field's schema) the fallback does not render."""
    if not isinstance(target, list) or not all(isinstance(i, dict) and "name" in i for i in [*target, *patch]):
        raise NotImplementedError("the fallback renderer merges only lists of named items in patches")
    out = [copy.deepcopy(item) for item in target]
    index = {item["name"]: i for i, item in enumerate(out)}
    for item in patch:
        if item["name"] in index:
            out[index[item["name"]]] = _merge(out[index[item["name"]]], item)
        else:
            out.append(copy.deepcopy(item))
    return out


def _patch(patch: dict, objects: list[dict]) -> None:
    matches = [i for i, obj in enumerate(objects) if _key(obj) == _key(patch)]
    assert len(matches) == 1, f"patch {_key(patch)} matches {len(matches)} objects"
    body = {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")}
    body["metadata"] = {k: v for k, v in body.get("metadata", {}).items() if k not in ("name", "namespace")}
    if not body["metadata"]:
        del body["metadata"]
    objects[matches[0]] = _merge(objects[matches[0]], body)


def configmap_hash(data: dict[str, str]) -> str:
    """kustomize's name suffix of a generated ConfigMap (api/hasher): the sha256 of Go's
    JSON encoding of {data, kind, name}, its first ten hex digits with some letters swapped
    so the suffix cannot spell words. The name it encodes is always empty: kustomize looks
    it up by the path "metadata/name" as one key, which no ConfigMap has."""
    encoded = json.dumps({"data": data, "kind": "ConfigMap", "name": ""}, sort_keys=True,
                         separators=(",", ":"), ensure_ascii=False)
    # Go escapes these three for HTML safety
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def _rename_refs(node: Any, namespace: str, renames: dict[tuple[str, str], str]) -> None:
    if isinstance(node, dict):
        ref = node.get("configMapRef")
        if isinstance(ref, dict) and (namespace, ref.get("name")) in renames:
            ref["name"] = renames[namespace, ref["name"]]
        for value in node.values():
            _rename_refs(value, namespace, renames)
    elif isinstance(node, list):
        for value in node:
            _rename_refs(value, namespace, renames)


def _finish(objects: list[dict]) -> list[dict]:
    renames: dict[tuple[str, str], str] = {}
    for obj in objects:
        annotations = obj["metadata"].get("annotations") or {}
        if annotations.pop(GENERATED, None):
            if not annotations:
                obj["metadata"].pop("annotations")
            name = obj["metadata"]["name"]
            obj["metadata"]["name"] = f"{name}-{configmap_hash(obj['data'])}"
            renames[obj["metadata"].get("namespace") or "", name] = obj["metadata"]["name"]
    for obj in objects:
        _rename_refs(obj, obj["metadata"].get("namespace") or "", renames)
    return objects
