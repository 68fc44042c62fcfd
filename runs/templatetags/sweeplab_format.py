"""Numbers as the pages show them: the server's twin of ``sweeplab.fmt`` in static/js/util.js, with
a median's interval, a point's verdict reasons, a simulator's time scale, and what the server's
own /metrics said of a point (a histogram bucket, a percentage)."""

import json
from decimal import ROUND_HALF_UP, Context, Decimal

from django import template
from django.utils.html import format_html, format_html_join

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


def _bound(ms):
    # A bucket bound in ms as the server declared it in seconds: 40, 2.5, 2560000, without
    # the float noise of the conversion (0.1 s is 100.00000000000001 ms).
    return f"{ms:.3f}".rstrip("0").rstrip(".")


@register.filter
def bucket(bounds):
    """Where a server histogram puts a median, from its bucket [lo, hi] in ms: "between 40
    and 60 ms", or "above 60 ms" for the +Inf bucket; empty when there is none."""
    if not bounds or len(bounds) != 2 or bounds[0] is None:
        return ""
    lo, hi = bounds
    return f"above {_bound(lo)} ms" if hi is None else f"between {_bound(lo)} and {_bound(hi)} ms"


@register.filter
def percent(share):
    """A share (0.12) as a percentage: "12 %", with one decimal below 10 % ("4.5 %"); empty
    for a missing value."""
    if share is None:
        return ""
    pct = share * 100
    return f"{pct:.1f} %" if abs(pct) < 10 and pct != 0 else f"{pct:.0f} %"


@register.filter
def tojson(value):
    """A value as JSON text, for a data- attribute (autoescaping makes it safe there)."""
    return json.dumps(value, separators=(",", ":"))


@register.filter
def code_spans(text):
    """A text whose `backquoted` parts are commands or flags (the importers' descriptions), with
    those parts as <code> and the rest escaped."""
    parts = str(text).split("`")
    return format_html_join("", "{}", ((format_html("<code>{}</code>", part) if i % 2 else part,)
                                       for i, part in enumerate(parts)))
