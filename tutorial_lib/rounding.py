"""The one rounding rule for every number the notebooks, the README and the guide show.

A number is shown at ``d`` decimals by **rounding half to even** the value as stored: Python's own
``f"{x:.2f}"`` (which rounds the float's exact binary value, ties to the even digit), pandas'
``round`` and :class:`decimal.Decimal`'s ``ROUND_HALF_EVEN`` all agree on it. So ``0.3675`` (a
float a little below it) shows as ``0.37``, ``0.125`` as ``0.12`` and ``2.5`` as ``2``. Every
generated reading formats with :func:`shown` (or an f-string, the same rule), and
``tests/test_numbers.py`` reads every number the prose quotes with :func:`shows`: a quoted number
matches a result only if that result, rounded by this rule to the quoted number of decimals, *is*
the quoted number — no tolerance either way.

A value printed with fewer decimals than a quote has (``0.37`` against a quoted ``0.368``) does not
support the quote: a reading cannot be more precise than what it reads.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal

ROUNDING = decimal.ROUND_HALF_EVEN  # the rule, named once
MINUS = "−"  # the typographic minus the prose uses; "-" is read the same


def shown(value: float, decimals: int, *, signed: bool = False) -> str:
    """``value`` as the prose shows it at ``decimals`` decimals (``signed``: always with its sign,
    ``+0.40``); the same digits as ``f"{value:.{decimals}f}"``."""
    exact = quantized(Decimal(value), decimals)
    text = f"{exact:.{decimals}f}"
    if text.lstrip("-") == f"{0:.{decimals}f}":  # -0.00 shows as 0.00
        text = text.lstrip("-")
    return ("+" + text if signed and not text.startswith("-") else text)


def quantized(value: Decimal, decimals: int) -> Decimal:
    """``value`` rounded to ``decimals`` decimals by the rule."""
    return value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUNDING)


def decimals_of(text: str) -> int:
    """How many decimals a written number shows (``"4.30"`` → 2, ``"2,051"`` → 0)."""
    mantissa = text.lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def plain(text: str) -> str:
    """A written number as Python reads it: typographic minus, thousands separators removed."""
    return text.replace(MINUS, "-").replace(",", "").replace("\u2009", "")


def as_decimal(value: float | str | Decimal) -> Decimal | None:
    """A stored value (a float: its exact binary value; a printed string: its digits) as a
    Decimal; None where it is not a finite number."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, str):
        try:
            out = Decimal(plain(value))
        except decimal.InvalidOperation:
            return None
        return out if out.is_finite() else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return Decimal(value)


def shows(quoted: str, value: float | str | Decimal, *, signed: bool | None = None,
          precision: int | None = None) -> bool:
    """Does ``value`` show as the written number ``quoted`` under the rule?

    ``signed``: the quote's sign must be the value's (default: only when the quote writes one —
    an unsigned ``3.6 points more`` matches −3.6). ``precision``: how many decimals ``value`` was
    printed with (a printed string: its own; a float: exact) — fewer than the quote's and it does
    not match. A quote in scientific notation with mantissa 1 (``1e-73``) is an order of
    magnitude: the value's log10 rounds to its exponent."""
    text = plain(quoted)
    number = as_decimal(value)
    if number is None:
        return False
    has_sign = text.startswith(("+", "-"))
    if signed is None:
        signed = has_sign
    if isinstance(value, str) and precision is None:
        precision = decimals_of(plain(value))
    if not signed:
        number, text = abs(number), text.lstrip("+-")
    if "e" in text.lower():
        mantissa, exponent = text.lower().split("e")
        if number == 0 or (mantissa.startswith("-") != (number < 0)):
            return False
        number, mantissa = abs(number), mantissa.lstrip("+-")
        if mantissa == "1":
            return round(math.log10(float(number))) == int(exponent.replace("+", ""))
        scaled = number.scaleb(-int(exponent.replace("+", "")))
        return quantized(scaled, decimals_of(mantissa)) == Decimal(mantissa)
    decimals = decimals_of(text)
    if precision is not None and precision < decimals:
        return False
    return quantized(number, decimals) == Decimal(text)
