"""Numbers as the pages show them: the server's twin of ``sweeplab.fmt`` in static/js/util.js, with
a median's interval, a point's verdict reasons and a simulator's time scale."""

from decimal import ROUND_HALF_UP, Context, Decimal

from django import template

register = template.Library()

_WIDE = Context(prec=400)  # enough digits for any float, so quantize never overflows


@register.filter
def num(value):
    """A measured value: no decimals from 100 up, two below; rounded as JavaScript's
    toFixed does (half away from zero, on the float's exact value), so a number reads the
    same in a table as in a chart's tooltip. Empty for a missing value."""
    if value is None:
        return ""
    places = Decimal(1) if abs(value) >= 100 else Decimal("0.01")
    # toFixed writes -0 as "0": so does this (0.0 == -0.0).
    return str(Decimal(value or 0.0).quantize(places, rounding=ROUND_HALF_UP, context=_WIDE))


@register.filter
def interval(bounds):
    """A 95 % interval [lo, hi] as the pages write it beside a median: "[33.20–35.00]";
    empty when there is none."""
    if not bounds or len(bounds) != 2 or bounds[0] is None or bounds[1] is None:
        return ""
    return f"[{num(bounds[0])}–{num(bounds[1])}]"


@register.filter
def reasons(items):
    """A point's validity_reasons as one line: "code: message; code: message"."""
    return "; ".join(f"{item.get('code', '')}: {item.get('message', '')}" for item in items or ())


@register.filter
def scale(value):
    """A simulator's time scale as written after "×": 0.02, 0.1, 1.5 (no trailing zeros)."""
    if value is None:
        return ""
    return f"{value:g}"
