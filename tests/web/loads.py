"""Sweeps measured against load (open-loop points, capacity-search probes, capacities) built in
the database for the tests of the load curves, the Pareto view and the capacity table.

The numbers follow a simple queueing shape: p99 TTFT grows with the square of the rate,
TPOT with the rate, output throughput with the rate up to ``saturation`` req/s; a point
meets the SLO when its p99 TTFT is within ``SLO["ttft_p99_ms"]``."""

from benchmarks.models import Workload
from runs.models import Point, Run
from tests.web.sweeps import make_sweep

SLO = {"ttft_p99_ms": 2000.0, "tpot_p50_ms": 40.0}
OUTPUT_TOKENS = 256
CAP = 64  # the open loop's max_concurrency


def make_load_sweep(name="load", slo=SLO, metric="request_rate"):
    sweep = make_sweep(name)
    sweep.spec = {"name": name, "slo": dict(slo), "request_rate": [0.5, 1, 2, 4, 8], "max_concurrency": CAP,
                  "search": {"max_goodput": {"metric": metric, "low": 0.5, "high": 64, "resolution": 0.1}}}
    sweep.save(update_fields=["spec"])
    return sweep


def ttft_p99(rate, scale):
    return 100.0 * scale * rate * rate


def load_values(rate, tp, scale=1.0, saturation=6.0):
    """The metric columns of a point at ``rate`` req/s."""
    served = min(rate, saturation)
    p99 = ttft_p99(rate, scale)
    met = p99 <= SLO["ttft_p99_ms"]
    return {
        "median_ttft_ms": p99 / 3, "p90_ttft_ms": p99 / 1.5, "p99_ttft_ms": p99,
        "median_tpot_ms": 20.0 + rate * scale, "p90_tpot_ms": 24.0 + rate * scale, "p99_tpot_ms": 30.0 + rate * scale,
        "median_e2el_ms": 5000.0 + rate * 100, "p90_e2el_ms": 6000.0 + rate * 100, "p99_e2el_ms": 7000.0 + rate * 100,
        "output_throughput": served * OUTPUT_TOKENS, "completed": 40, "failed": 0,
        "goodput": served if met else served * 0.5, "slo_attainment": 1.0 if met else 0.5, "slo_met": met,
        "slo_checks": {"ttft_p99_ms": {"limit": SLO["ttft_p99_ms"], "observed": p99, "met": met}},
        "send_lag_median_ms": 0.4, "send_lag_p99_ms": 3.0, "send_lag_max_ms": 9.0,
        "send_based": {"p99_ttft_ms": 90.0, "median_ttft_ms": 60.0},
        "validity": "valid",
    }


def add_load_run(sweep, position, method, params, tp, rates=(0.5, 1, 2, 4, 8), probes=(), scale=1.0, statuses=None,
                 validity=None, capacity=None, port=30000, workload="long-context", prompt_tokens=3000):
    """A run with an open-loop point per rate (and a search probe per ``probes`` rate);
    ``statuses`` and ``validity`` map a rate to a status / verdict other than ok / valid.
    ``capacity``: the run's capacity without its point, which is the probe at its load."""
    run = Run.objects.create(sweep=sweep, position=position, method=method, params=params, tp=tp, status="done",
                             port=port)
    statuses, validity = statuses or {}, validity or {}
    points = {}
    for index, rate in enumerate([*rates, *probes]):
        status = statuses.get(rate, "ok")
        values = load_values(rate, tp, scale) if status == "ok" else {}
        if status == "ok" and rate in validity:
            values["validity"] = validity[rate]
            values["validity_reasons"] = [{"code": "few_samples", "message": f"{validity[rate]} at {rate}"}]
        points[rate] = Point.objects.create(
            run=run, position=index, workload=Workload.objects.get(name=workload), prompt_tokens=prompt_tokens,
            max_new_tokens=OUTPUT_TOKENS, concurrency=CAP, request_rate=rate, burstiness=1.0,
            from_search=index >= len(rates), status=status,
            reason="" if status == "ok" else f"{status} at {rate} req/s", **values,
        )
    if capacity is not None:
        load = capacity.get("load")
        run.capacity = {"metric": "request_rate", "stopped_because": "resolution", "message": "", "probes": len(probes),
                        "slo": dict(sweep.spec.get("slo") or {}), **capacity,
                        "point": points[load].pk if load in points else None}
        run.save(update_fields=["capacity"])
    return run
