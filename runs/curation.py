"""Curation: the flags and notes curators set on results, each change recorded.

Curation changes what is shown and how it is read (excluded, baseline, notes, an active
quarantine), never a measured number. Every function here writes one CurationEvent per
object it changed (who, when, what before and after, why) in the same transaction, and
returns the number of objects changed. The admin actions and the change forms call these.
"""

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from benchmarks.models import KnownFailure
from runs.lifecycle import queue_new_attempts
from runs.models import CurationAction, CurationEvent, CurationTarget, Point, Run
from sweepcore.spec import MAX_TEXT_CHARS, text_problem


class CurationError(ValueError):
    """The request cannot be applied; the message says why, in words."""


def target_of(obj):
    if isinstance(obj, Point):
        return CurationTarget.POINT
    if isinstance(obj, Run):
        return CurationTarget.RUN
    if isinstance(obj, KnownFailure):
        return CurationTarget.KNOWN_FAILURE
    return CurationTarget.SWEEP


def label_of(obj):
    if isinstance(obj, Point):
        return f"point {obj.pk}: {obj.run.config_label}, {obj.label}, sweep {obj.run.sweep_id}"
    if isinstance(obj, Run):
        return f"run {obj.pk}: {obj.config_label}, attempt {obj.attempt}, sweep {obj.sweep_id}"
    return str(obj)[:300]


def _event(user, action, obj, changes, reason=""):
    return CurationEvent(
        user=user if user is not None and user.is_authenticated else None,
        action=action,
        target_type=target_of(obj),
        target_id=obj.pk,
        target_label=label_of(obj)[:300],
        changes=changes,
        reason=reason,
    )


def _apply(objects, user, action, values, reason=""):
    """Set ``values`` on each object that differs, save those fields, record each change."""
    events = []
    for obj in objects:
        changes = {f: [getattr(obj, f), v] for f, v in values.items() if getattr(obj, f) != v}
        if not changes:
            continue
        for field, (_, after) in changes.items():
            setattr(obj, field, after)
        obj.save(update_fields=list(changes))
        events.append(_event(user, action, obj, _plain(changes), reason))
    CurationEvent.objects.bulk_create(events)
    return len(events)


def _plain(changes):
    """JSON-safe before/after values (datetimes as ISO text)."""
    return {
        field: [v.isoformat() if hasattr(v, "isoformat") else v for v in pair] for field, pair in changes.items()
    }


def _text(text, field="reason"):
    """A curator's words (a reason, a note), stripped: refused with a NUL character or over
    MAX_TEXT_CHARS, naming ``field`` and the limit."""
    text = (text or "").strip()
    problem = text_problem(text, MAX_TEXT_CHARS)
    if problem:
        raise CurationError(f"{field}: {problem}")
    return text


def _required(reason, what, field="reason"):
    reason = _text(reason, field)
    if not reason:
        raise CurationError(f"{what} needs a reason: say why, it is shown wherever the result is")
    return reason


@transaction.atomic
def exclude(objects, user, reason):
    """Hide points or runs from charts and history, with the reason shown in their place."""
    reason = _required(reason, "Excluding")
    return _apply(list(objects), user, CurationAction.EXCLUDE, {"excluded": True, "exclude_reason": reason}, reason)


@transaction.atomic
def include(objects, user, reason=""):
    return _apply(list(objects), user, CurationAction.INCLUDE, {"excluded": False, "exclude_reason": ""}, _text(reason))


@transaction.atomic
def annotate(objects, user, note):
    """Add a note (appended to the notes already there)."""
    note = _required(note, "An annotation", "note")
    count = 0
    for obj in objects:
        notes = f"{obj.notes}\n{note}" if obj.notes else note
        count += _apply([obj], user, CurationAction.ANNOTATE, {"notes": notes}, note)
    return count


def _series_key(obj):
    """What makes two results the same series: the history page's series."""
    if isinstance(obj, Point):
        run = obj.run
        return (run.sweep.llm_id, run.sweep.engine_id, run.sweep.host.gpu_model, run.method, run.params_key, run.tp,
                obj.workload_id, obj.prompt_tokens, obj.concurrency)
    return (obj.sweep.llm_id, obj.sweep.engine_id, obj.sweep.host.gpu_model, obj.method, obj.params_key, obj.tp)


def _series_members(obj):
    if isinstance(obj, Point):
        run = obj.run
        return Point.objects.filter(
            run__sweep__llm_id=run.sweep.llm_id, run__sweep__engine_id=run.sweep.engine_id,
            run__sweep__host__gpu_model=run.sweep.host.gpu_model, run__method=run.method,
            run__params_key=run.params_key, run__tp=run.tp, workload_id=obj.workload_id,
            prompt_tokens=obj.prompt_tokens, concurrency=obj.concurrency,
        )
    return Run.objects.filter(
        sweep__llm_id=obj.sweep.llm_id, sweep__engine_id=obj.sweep.engine_id,
        sweep__host__gpu_model=obj.sweep.host.gpu_model, method=obj.method, params_key=obj.params_key, tp=obj.tp,
    )


@transaction.atomic
def mark_baseline(objects, user, reason=""):
    """Make each object the baseline of its series; the series' previous baseline stops
    being one. One object per series: two of the same series is refused."""
    objects, reason = list(objects), _text(reason)
    seen = {}
    for obj in objects:
        key = _series_key(obj)
        if key in seen:
            raise CurationError(
                f"{label_of(seen[key])} and {label_of(obj)} are the same series: a series has one baseline, pick one"
            )
        seen[key] = obj
    count = 0
    for obj in objects:
        previous = _series_members(obj).filter(is_baseline=True).exclude(pk=obj.pk).select_related(
            *(("run__sweep__host", "workload") if isinstance(obj, Point) else ("sweep__host",))
        )
        _apply(previous, user, CurationAction.UNMARK_BASELINE, {"is_baseline": False}, f"{label_of(obj)} became the baseline")
        count += _apply([obj], user, CurationAction.MARK_BASELINE, {"is_baseline": True}, reason)
    return count


@transaction.atomic
def lift_quarantine(failures, user, reason):
    """Stop skipping these configurations; the next sweep plans them again."""
    reason = _required(reason, "Lifting a quarantine")
    now = timezone.now()
    count = 0
    for kf in failures:
        count += _apply([kf], user, CurationAction.LIFT_QUARANTINE, {
            "active": False, "lifted_at": now, "lifted_by_id": user.pk if user else None, "lift_reason": reason,
        }, reason)
    return count


@transaction.atomic
def reimpose_quarantine(failures, user, reason):
    reason = _required(reason, "Re-imposing a quarantine")
    return _apply(list(failures), user, CurationAction.REIMPOSE_QUARANTINE, {
        "active": True, "lifted_at": None, "lifted_by_id": None, "lift_reason": "",
    }, reason)


@transaction.atomic
def rerun(runs, user, reason=""):
    """Each run again, as a new attempt of the same configuration in its sweep; the old
    attempt and its points are kept. Returns the new runs."""
    runs, reason = list(runs), _text(reason)
    new_runs = queue_new_attempts(runs, f"re-run by {user.get_username() if user else 'a curator'}")
    CurationEvent.objects.bulk_create(
        _event(user, CurationAction.RERUN, old, {"rerun_as": [None, new.pk]}, reason)
        for old, new in zip(runs, new_runs)
    )
    return new_runs


def record_edit(obj, user, before, reason=""):
    """A change made in an admin change form: the fields that differ from ``before``."""
    changes = {f: [old, getattr(obj, f)] for f, old in before.items() if getattr(obj, f) != old}
    if changes:
        _event(user, CurationAction.EDIT, obj, _plain(changes), reason).save()
    return bool(changes)


def history_of(target_type, target_id, limit=50):
    return list(
        CurationEvent.objects.filter(target_type=target_type, target_id=target_id)
        .select_related("user")
        .order_by("-at", "-id")[:limit]
    )


def notes_for(point_ids, run_ids, per_object=3):
    """Point id -> the latest curation changes of the point and of its run, in words, for
    tooltips: "Excluded from charts and history by cora on 2026-12-02: thermal throttling".
    One query. ``run_ids`` maps point id -> run id."""
    events = (
        CurationEvent.objects.filter(
            Q(target_type=CurationTarget.POINT, target_id__in=list(point_ids))
            | Q(target_type=CurationTarget.RUN, target_id__in=set(run_ids.values()))
        )
        .select_related("user")
        .order_by("-at", "-id")
    )
    by_target = {}
    for e in events:
        texts = by_target.setdefault((e.target_type, e.target_id), [])
        if len(texts) < per_object:
            who = e.user.get_username() if e.user else "someone"
            scope = "run: " if e.target_type == CurationTarget.RUN else ""
            texts.append(f"{scope}{e.get_action_display()} by {who} on {e.at:%Y-%m-%d}" + (f": {e.reason}" if e.reason else ""))
    return {
        pid: by_target.get((CurationTarget.POINT, pid), []) + by_target.get((CurationTarget.RUN, run_ids[pid]), [])
        for pid in point_ids
    }
