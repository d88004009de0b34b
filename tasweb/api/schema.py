"""OpenAPI post-processing: describe the path parameters and responses that the views'
signatures cannot describe themselves."""

from __future__ import annotations

PATH_PARAMETERS = {
    "name": "the object's name (metadata.name)",
    "namespace": "the object's namespace (metadata.namespace)",
    "api_version": "the visibility API version: v1beta1 or v1beta2",
}


def describe_parameters(result: dict, generator, request, public) -> dict:
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if not parameter.get("description") and parameter.get("name") in PATH_PARAMETERS:
                    parameter["description"] = PATH_PARAMETERS[parameter["name"]]
            for code, response in operation.get("responses", {}).items():
                if isinstance(response, dict) and not response.get("description"):
                    response["description"] = "OK" if code.startswith("2") else "error"
    return result
