"""Give every point measured before issue 13 its verdict and intervals.

A point with request records is judged from them (sweepcore.metrics.summarize, then
sweepcore.validity.judge) exactly as the executor judges a new one, less what was not
recorded then: the host's load beside it (host_load stays {}) and the client's CPU share
(its event-loop lag was kept). A point without records (an imported one) is judged from
its stored columns. Planned, skipped and not-run points have nothing to judge. A point
measured on simengine at a time scale (its run's server_info says so) is converted to the
model's time, as the executor now stores one, and marked simulated; the others' metrics
are left as they were stored. Reversing it is a no-op (0008's removal of the columns drops
what this wrote, but not a conversion).
"""

from django.conf import settings
from django.db import migrations

UNMEASURED = ("planned", "skipped", "not_run")
COLUMNS = ("completed", "failed", "duration", "decode_tok_s", "server_decode_tok_s", "client_bound",
           "event_loop_lag_p99_ms")


def asked_output_tokens(engine_kind, max_new_tokens, server_info):
    """The output length every request had to return, where the engine forces it."""
    from sweepcore.engines import get_adapter

    try:
        body = get_adapter(engine_kind).extra_body(max_new_tokens, server_info or {})
    except (KeyError, ValueError):  # an engine kind this version does not know
        return None
    return max_new_tokens if body.get("ignore_eos") or body.get("logit_bias") else None


def backfill(apps, schema_editor):
    from sweepcore import metrics
    from sweepcore.validity import Thresholds, judge

    Point = apps.get_model("runs", "Point")
    RequestRecord = apps.get_model("runs", "RequestRecord")
    # The metric columns this state of the model has: later migrations add more to
    # metrics.FIELDS (the server's medians, 0010) than Point had here.
    columns = {field.name for field in Point._meta.get_fields()}
    converted_fields = [name for name in metrics.TIME_FIELDS | metrics.RATE_FIELDS if name in columns]
    # Likewise the request columns (a request's send lag, 0012).
    record_columns = {field.name for field in RequestRecord._meta.get_fields()}
    record_fields = [name for name in metrics.REQUEST_FIELDS if name in record_columns]
    thresholds = Thresholds.from_mapping(getattr(settings, "SWEEPLAB_VALIDITY", {}))
    points = (Point.objects.exclude(status__in=UNMEASURED).filter(validity="")
              .select_related("run__sweep__engine").order_by("pk"))
    for point in points.iterator(chunk_size=200):
        records = list(RequestRecord.objects.filter(point_id=point.pk).order_by("index")
                       .values(*record_fields))
        stored = {name: getattr(point, name) for name in COLUMNS}
        intervals = {}
        if records:
            summary = metrics.summarize(records, point.duration, client_bound=point.client_bound,
                                        event_loop_lag_p99_ms=point.event_loop_lag_p99_ms)
            summary["server_decode_tok_s"] = point.server_decode_tok_s
            intervals = summary["intervals"]
            run = point.run
            verdict = judge(
                records, summary, thresholds=thresholds,
                asked_output_tokens=asked_output_tokens(run.sweep.engine.kind, point.max_new_tokens, run.server_info),
                asked_prompt_tokens=point.prompt_tokens,
                server_prompt_tokens=[r["prompt_tokens"] for r in records if r["prompt_tokens"] is not None],
            )
        elif point.status == "crashed":
            Point.objects.filter(pk=point.pk).update(
                validity="invalid",
                validity_reasons=[{"code": "crashed", "message": point.reason or "the server died during this point"}],
            )
            continue
        else:
            verdict = judge(None, stored, thresholds=thresholds)
        changes = {"validity": verdict.validity, "validity_reasons": verdict.reasons_json(), "intervals": intervals}
        scale = metrics.simulated_time_scale(point.run.server_info)
        if scale:
            measured = {name: getattr(point, name) for name in metrics.FIELDS if name in columns}
            converted = metrics.to_model_time({**measured, "intervals": intervals}, scale)
            changes.update({name: converted[name] for name in converted_fields},
                           intervals=converted["intervals"], simulated_time_scale=scale)
        Point.objects.filter(pk=point.pk).update(**changes)


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0008_point_verdicts"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
