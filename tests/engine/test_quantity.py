"""Kubernetes quantities: exact parsing, Kueue's integer values, rejects and formatting."""

from __future__ import annotations

from fractions import Fraction

import pytest

from scheduler.quantity import QuantityError, format_value, parse_quantity, resource_value, to_fraction


class TestParse:
    @pytest.mark.parametrize(
        ("text", "amount"),
        [
            ("500m", Fraction(1, 2)),
            ("1.5Gi", 1536 * 2**20),
            ("1e3", 1000),
            ("1E3", 1000),
            ("2e-3", Fraction(2, 1000)),
            (".5", Fraction(1, 2)),
            ("5.", 5),
            ("2k", 2000),
            ("3M", 3_000_000),
            ("1Ki", 1024),
            ("4Ti", 4 * 2**40),
            ("250u", Fraction(250, 10**6)),
            ("7n", Fraction(7, 10**9)),
            ("2E", 2 * 10**18),  # a bare E is the exa suffix, not an exponent
            ("+3", 3),
            ("-3", -3),
            ("-1.5Gi", -(1536 * 2**20)),
            ("0", 0),
        ],
    )
    def test_amount(self, text, amount):
        assert parse_quantity(text) == amount

    def test_exact_decimal_arithmetic(self):
        assert parse_quantity("0.1") == parse_quantity("100m") == parse_quantity("1e-1") == Fraction(1, 10)

    # the last two: digits of other scripts, which Kubernetes does not read as numbers
    @pytest.mark.parametrize("text", ["two", "1.5.5", "Gi", "1Zi", "", "m", "1 Gi", "1e", "--1", "1e3Gi", "0x10",
                                      "\u0661", "1e\u0663"])
    def test_rejects(self, text):
        with pytest.raises(QuantityError):
            parse_quantity(text)

    def test_exponent_out_of_range(self):
        with pytest.raises(QuantityError, match="exponent"):
            parse_quantity("1e99")

    def test_error_names_the_text(self):
        with pytest.raises(QuantityError, match="'two' is not a valid quantity"):
            parse_quantity("two")

    @pytest.mark.parametrize(("raw", "amount"), [(2, 2), (0.25, Fraction(1, 4)), ("3", 3)])
    def test_yaml_scalars(self, raw, amount):
        assert to_fraction(raw) == amount

    @pytest.mark.parametrize("raw", [None, True, False, [1], {"cpu": 1}])
    def test_yaml_non_quantities(self, raw):
        with pytest.raises(QuantityError):
            to_fraction(raw)


class TestResourceValue:
    @pytest.mark.parametrize(
        ("name", "raw", "value"),
        [
            ("cpu", "1", 1000),
            ("cpu", "250m", 250),
            ("cpu", "1.5", 1500),
            ("cpu", 2, 2000),
            ("cpu", 0.5, 500),
            ("cpu", "0.0001", 1),  # rounded up to a whole milli-CPU
            ("cpu", "1500u", 2),
            ("memory", "1Gi", 2**30),
            ("memory", "1.5", 2),  # whole bytes, rounded up
            ("memory", "100m", 1),
            ("memory", "1k", 1000),
            ("pods", "110", 110),
            ("nvidia.com/gpu", "8", 8),
            ("ephemeral-storage", "10Gi", 10 * 2**30),
        ],
    )
    def test_value(self, name, raw, value):
        assert resource_value(name, raw) == value

    def test_only_cpu_is_in_milli_units(self):
        assert resource_value("cpu", "3") == 3000
        assert resource_value("example.com/cpu-like", "3") == 3

    @pytest.mark.parametrize("raw", ["two", "", True, None])
    def test_rejects(self, raw):
        with pytest.raises(QuantityError):
            resource_value("cpu", raw)


class TestFormatValue:
    @pytest.mark.parametrize(
        ("name", "value", "text"),
        [
            ("cpu", 2000, "2"),
            ("cpu", 1500, "1500m"),
            ("cpu", 1, "1m"),
            ("cpu", 0, "0"),
            ("memory", 2**30, "1Gi"),
            ("memory", 1536 * 2**20, "1536Mi"),
            ("memory", 3 * 2**40, "3Ti"),
            ("memory", 1000, "1000"),
            ("memory", 0, "0"),
            ("ephemeral-storage", 2**21, "2Mi"),
            ("pods", 1024, "1024"),
            ("nvidia.com/gpu", 8, "8"),
        ],
    )
    def test_format(self, name, value, text):
        assert format_value(name, value) == text

    @pytest.mark.parametrize(("name", "text"), [("cpu", "2"), ("cpu", "750m"), ("memory", "12Gi"), ("memory", "7")])
    def test_round_trip(self, name, text):
        assert format_value(name, resource_value(name, text)) == text
