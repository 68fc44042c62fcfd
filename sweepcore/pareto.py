"""The Pareto front of measured points: those no other point beats on both axes.

The sweep page's Pareto view (runs.results.load_charts) plots output tok/s per GPU against
tok/s per user (1000 / median TPOT) and highlights the front, as vLLM's ``bench sweep``
plots do: each point on it is a configuration and load that nothing measured improves on
in one axis without losing in the other. Both axes are "more is better".

A point is *dominated* when another is at least as good on both axes and better on one.
Equal points do not dominate each other: both stay on the front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points of ``points`` ((x, y) pairs, more is better on both) that
    no other point dominates, ordered by x (then y) ascending: the order a line through
    the front is drawn in. ValueError for a value that is not a finite number."""
    for x, y in points:
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"not a finite point: ({x}, {y})")
    # Best x first; among equal x the best y first. A point is on the front when its y is
    # its x's best and beats every y seen at a strictly larger x.
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    front = []
    best_y_at_larger_x = -math.inf
    start = 0
    while start < len(order):
        x = points[order[start]][0]
        end = start
        while end < len(order) and points[order[end]][0] == x:
            end += 1
        top = points[order[start]][1]
        if top > best_y_at_larger_x:
            front.extend(i for i in order[start:end] if points[i][1] == top)
        best_y_at_larger_x = max(best_y_at_larger_x, top)
        start = end
    return sorted(front, key=lambda i: (points[i][0], points[i][1], i))
