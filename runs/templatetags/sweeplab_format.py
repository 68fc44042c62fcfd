"""Numbers as the pages show them: the server's twin of ``sweeplab.fmt`` in static/js/util.js."""

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
