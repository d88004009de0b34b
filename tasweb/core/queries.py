"""Query pieces every app uses."""

from __future__ import annotations

from django.db.models.fields.json import KeyTransform


def json_key(field: str, *keys: str) -> KeyTransform:
    """The value at `keys` in the JSON column `field`, for `annotate(...)` and then
    `values_list(...)`: as `values_list("field__a__b")` reads it, without what that costs.

    Given as a path of names, Django first looks each name up as a field, and the lookup that
    fails raises and catches an exception inside the query's construction. That exception's
    traceback keeps the frames of the whole call stack alive in a reference cycle: the caller
    and everything it holds (a scheduling pass: its results and every row it wrote) wait for
    the cyclic garbage collector instead of being freed at once.
    """
    if not keys:
        raise ValueError("json_key needs at least one key")
    expression: str | KeyTransform = field
    for key in keys:
        expression = KeyTransform(key, expression)
    assert isinstance(expression, KeyTransform)
    return expression
