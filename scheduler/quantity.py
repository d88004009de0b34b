"""Kubernetes resource quantities, as exact integers.

Kueue compares resources as int64: CPU in milli-units (`MilliValue`), everything else in
whole units (`Value`, bytes for memory). Both round *up* a fractional value, as
`resource.Quantity` does. We parse with exact rational arithmetic, so `0.1`, `100m` and
`1e-1` are the same amount and nothing is lost to floating point.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from scheduler.limits import HugeInt

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?\d+))?$",
    re.ASCII,  # digits 0-9 only, as Kubernetes reads them (\d alone takes every script's)
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


# Kubernetes keeps a quantity in an int64 with a scale (or an inf.Dec for the rare rest);
# a number written with more digits than this is no amount anyone means
MAX_QUANTITY_CHARS = 64


@lru_cache(maxsize=65536)
def parse_quantity(text: str) -> Fraction:
    """The exact amount a quantity string denotes (`"1.5Gi"` -> 1610612736)."""
    if len(text) > MAX_QUANTITY_CHARS and len(text.strip()) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"a quantity of {len(text.strip())} characters is too long "
                            f"(at most {MAX_QUANTITY_CHARS})")
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a valid quantity (e.g. 500m, 2, 1.5Gi, 1e3)")
    amount = Fraction(match["num"])
    if match["suffix"] is not None:
        factor = _BINARY.get(match["suffix"]) or _DECIMAL[match["suffix"]]
        amount *= factor
    elif match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 64:
            raise QuantityError(f"{text!r} has an exponent out of range")
        amount *= Fraction(10) ** exponent
    return -amount if match["sign"] == "-" else amount


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def to_fraction(raw: object) -> Fraction:
    """A quantity from YAML/JSON: a string, or a bare number YAML parsed for us."""
    if isinstance(raw, bool) or raw is None:
        raise QuantityError(f"{raw!r} is not a valid quantity")
    if isinstance(raw, int):
        return Fraction(raw)
    if type(raw) is HugeInt:
        raise QuantityError(f"{raw!r} is too large")
    if isinstance(raw, float):
        return parse_quantity(repr(raw))
    if isinstance(raw, str):
        return parse_quantity(raw)
    raise QuantityError(f"{raw!r} is not a valid quantity")


# Kueue keeps resource values in int64; we refuse anything near that bound rather than
# letting sums of such values overflow.
MAX_VALUE = 2**62


def _scaled(name: str, amount: Fraction) -> int:
    return _ceil(amount * 1000) if name == CPU else _ceil(amount)


def _integer_value(name: str, amount: Fraction, text: object) -> int:
    value = _scaled(name, amount)
    if abs(value) > MAX_VALUE:
        unit = "milli-units" if name == CPU else "units"
        raise QuantityError(f"{text!r} is too large (more than 2^62 {unit})")
    return value


@lru_cache(maxsize=65536)
def _resource_value_of_str(name: str, text: str) -> int:
    return _integer_value(name, parse_quantity(text), text)


MAX_INT64 = 2**63 - 1


def request_value(name: str, raw: object) -> int:
    """A pod's request or limit as Kueue reads it: `resource_value`, except that an amount beyond
    int64 saturates at its bound (Kueue's resources.ResourceValue) instead of being refused, so a
    workload asking for more than any quota stays pending (ExceedsMaxQuota) rather than failing
    the whole input."""
    if isinstance(raw, str):
        return _request_value_of_str(name, raw)
    return _saturated(_scaled(name, to_fraction(raw)))


def _saturated(value: int) -> int:
    return max(-MAX_INT64 - 1, min(MAX_INT64, value))


@lru_cache(maxsize=65536)
def _request_value_of_str(name: str, text: str) -> int:
    return _saturated(_scaled(name, parse_quantity(text)))


def resource_value(name: str, raw: object) -> int:
    """Kueue's integer value of a resource: milli-CPU for `cpu`, whole units otherwise."""
    if isinstance(raw, str):
        return _resource_value_of_str(name, raw)
    return _integer_value(name, to_fraction(raw), raw)


_BINARY_DESC = sorted(_BINARY.items(), key=lambda kv: -kv[1])


def format_value(name: str, value: int) -> str:
    """A compact quantity string for an integer resource value (for people and messages)."""
    if name == CPU:
        if value % 1000 == 0:
            return str(value // 1000)
        return f"{value}m"
    if name == MEMORY or name.endswith("storage"):
        for suffix, factor in _BINARY_DESC:
            if value and value % factor == 0:
                return f"{value // factor}{suffix}"
    return str(value)


def afs_amount(name: str, value: int) -> float:
    """An integer amount as the float Kubernetes' `AsApproximateFloat64` makes of it (cores for
    cpu): the unit admission fair sharing adds usage in."""
    return value / 1000 if name == CPU else float(value)
