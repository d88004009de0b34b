"""OpenAPI post-processing: describe the path parameters and responses that the views'
signatures cannot describe themselves, what every Workload status means, and whether reads
need credentials (they do not while `TAS_API_ANONYMOUS_READ` is on)."""

from __future__ import annotations

import re

from django.db import DatabaseError

from tasweb.api import selectors
from tasweb.api.permissions import anonymous_read_allowed
from tasweb.api.statuses import STATUS_MEANINGS, status_list_markdown

SAFE_METHODS = ("get", "head", "options")
NO_NUL = "^[^\\u0000]*$"  # the views refuse a NUL in any parameter


def exclude_null_characters(parameter: dict) -> None:
    schema = parameter.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "string" or "enum" in schema:
        return
    if "pattern" not in schema:
        schema["pattern"] = NO_NUL
    elif schema["pattern"] != NO_NUL:
        parameter["schema"] = {"type": "string", "allOf": [{"pattern": schema.pop("pattern")}, {"pattern": NO_NUL}],
                               **{k: v for k, v in schema.items() if k != "type"}}

PATH_PARAMETERS = {
    "name": "the object's name (metadata.name)",
    "namespace": "the object's namespace (metadata.namespace)",
    "api_version": "the visibility API version: v1beta1 or v1beta2",
}


def mirror_vocabulary() -> tuple[list[str], list[str]]:
    """The mirror's ResourceFlavors and topology level keys: the values the `flavor` and
    `level` filters accept. Empty when there is no database to read (a schema built offline)."""
    try:
        return selectors.flavor_names(), sorted(selectors.known_level_keys())
    except DatabaseError:
        return [], []


def constrain_mirror_parameters(parameter: dict, flavors: list[str], levels: list[str]) -> None:
    """`flavor` and `level` accept what the mirror holds now; the schema says which."""
    if parameter.get("in") != "query":
        return
    if parameter.get("name") == "flavor" and flavors:
        # empty, as every text filter, means no filter
        parameter["schema"] = {"type": "string", "enum": ["", *flavors]}
    elif parameter.get("name") == "level" and levels:
        keys = "|".join(re.escape(level) for level in levels)
        parameter["schema"] = {"type": "string", "pattern": f"^(?:\\s*(?:{keys})\\s*=[\\s\\S]*)?$"}


def describe_parameters(result: dict, generator, request, public) -> dict:
    anonymous = anonymous_read_allowed()
    flavors, levels = mirror_vocabulary()
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if not parameter.get("description") and parameter.get("name") in PATH_PARAMETERS:
                    parameter["description"] = PATH_PARAMETERS[parameter["name"]]
                constrain_mirror_parameters(parameter, flavors, levels)
                if parameter.get("in") in ("query", "path"):
                    exclude_null_characters(parameter)
            for code, response in operation.get("responses", {}).items():
                if isinstance(response, dict) and not response.get("description"):
                    response["description"] = "OK" if code.startswith("2") else "error"
            if operation.get("operationId") == "what_if" and "requestBody" in operation:
                operation["requestBody"]["required"] = True  # without a body there is nothing to place
            security = operation.get("security")
            if anonymous and security and {} not in security and operation is path_item.get("get"):
                operation["security"] = [*security, {}]  # no credentials needed to read
    status_enum = result.get("components", {}).get("schemas", {}).get("WorkloadStatusEnum")
    if status_enum is not None:
        status_enum["description"] = f"Where the Workload stands:\n\n{status_list_markdown()}"
        status_enum["x-enumDescriptions"] = {status: STATUS_MEANINGS[status] for status in status_enum["enum"]}
    return result
