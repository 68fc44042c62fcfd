"""The sweep builder (/sweeps/new/): its form and YAML views of a spec, drawn by the server,
and the plan preview (a JSON endpoint, and the partial the page swaps in)."""

import json
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db import transaction
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep
from runs.lifecycle import SweepStateError, create_sweep, launch_sweep, plan_spec
from runs.queryparams import MAX_ID, IntegerParam, QueryError, QueryForm
from runs.results.estimate import estimate as estimate_duration
from runs.results.estimate import load_history, requests_per_point
from runs.roles import reader_required
from runs.views.builder_forms import LISTS, SpecForm, add_entry, remove_entry, retry_ticked
from sweepcore import capacity
from sweepcore.spec import SpecError, dump_yaml, load_json, load_yaml, validate

BUILDER_EXAMPLE = Path(settings.BASE_DIR) / "examples" / "qwen3.6-27b-sm120.yaml"


class CloneForm(QueryForm):
    """?clone=ID: the builder starts from that sweep's spec (from the example when blank,
    or when there is no such sweep)."""

    clone = IntegerParam(maximum=MAX_ID)


def _error_entries(errors):
    """"path: message" lines as {"path", "message"} for the page to place."""
    entries = []
    for line in errors:
        path, sep, message = line.partition(": ")
        entries.append({"path": path if sep else "", "message": message if sep else line})
    return entries


def _read(post, catalog):
    """(data, yaml_text, drawn) of what the builder sent.

    The form view sends ``spec_json`` (the data it was drawn from) with ``editor=form``,
    and with ``fields`` its controls, whose changed values edit that data; the YAML view
    sends ``spec_yaml``. ``drawn`` is the form as the page drew it, or None. SpecError is
    raised with the parse error when the text does not parse."""
    if post.get("editor") == "form":
        try:
            data = load_json(post.get("spec_json", ""), source="spec")
        except ValueError as exc:
            raise SpecError(f"spec: the form sent data that is not JSON ({exc})") from None
        drawn = SpecForm(data, catalog) if post.get("fields") and isinstance(data, dict) else None
        if drawn is not None:
            data = drawn.edited(post)
        return data, dump_yaml(data) if isinstance(data, dict) else "", drawn
    text = post.get("spec_yaml", "")
    return load_yaml(text, source="spec"), text, None


def builder_input(post, catalog):
    """The spec data the builder sent, and its YAML text (see ``_read``)."""
    return _read(post, catalog)[:2]


def search_text(search):
    """What a capacity search will do, for the plan preview (its runs plan no points)."""
    bound = capacity.search_probes_bound(search)
    low, high = f"{search.low:g}", f"{search.high:g}"
    if search.metric == capacity.REQUEST_RATE:
        over, within = f"request rate {low}–{high} req/s", f"{search.resolution * 100:g} %"
    else:
        over, within = f"concurrency {low}–{high}", f"{search.resolution:g}"
    return (f"capacity search over {over}, up to {bound} probes per run "
            f"(doubling from {low} while the SLO holds, then bisecting to within {within})")


def _quarantine_rule(run):
    return {"method": run.method, **run.params, "tp": run.tp}


def plan_preview(post):
    """What the builder shows: the spec as data and as YAML, its validation errors, or the
    plan's runs, skips, quarantines and the duration estimate."""
    catalog = load_catalog()
    try:
        data, text = builder_input(post, catalog)
    except SpecError as exc:
        return unparsed(exc)
    return preview(data, text, catalog)


def unparsed(exc):
    """The preview of a text that does not parse."""
    return {"valid": False, "parsed": False, "errors": _error_entries(exc.errors)}


def preview(data, text, catalog):
    """The preview of parsed spec data (see ``plan_preview``)."""
    answer = {"parsed": True, "data": data, "spec_yaml": text}
    try:
        spec = validate(data, catalog)
        the_plan = plan_spec(spec, catalog)
    except SpecError as exc:
        return {**answer, "valid": False, "errors": _error_entries(exc.errors)}
    skips = {}
    for run in the_plan.runs:
        for p in run.points:
            if p.status == "skipped" and not run.reason:
                length = f" {p.prompt_tokens} tokens" if p.prompt_tokens is not None else ""
                key = (f"{p.workload}{length} x{p.concurrency}", p.reason)
                skips[key] = skips.get(key, 0) + 1
    history = load_history(spec, catalog.hosts[spec.host].gpu_model)
    return {
        **answer,
        "valid": True,
        "errors": [],
        "warnings": the_plan.warnings,
        # Why launching it would be refused (it would measure nothing); "" when it measures.
        "nothing_to_measure": the_plan.nothing_to_measure,
        "totals": the_plan.totals,
        "estimate": estimate_duration(the_plan, requests_per_point(spec), spec.warmup_requests, history),
        "search": {"text": search_text(spec.search_spec), "probes_per_run": capacity.search_probes_bound(
            spec.search_spec)} if spec.search else None,
        "runs": [
            {
                "label": r.label,
                "status": r.status,
                "reason": r.reason,
                "planned": sum(p.status == "planned" for p in r.points),
                "points": len(r.points),
            }
            for r in the_plan.runs
        ],
        "skips": [{"point": point, "reason": reason, "runs": n} for (point, reason), n in skips.items()],
        "quarantined": [
            {"label": r.label, "failure_kind": r.quarantine.failure_kind, "signature": r.quarantine.signature,
             "retrying": r.retry_quarantined, "rule": _quarantine_rule(r)}
            for r in the_plan.runs
            if r.quarantine is not None
        ],
    }


def yaml_view_text(data, text):
    """The YAML view's text of the data: the text as written (comments and all) while it
    still says the same, else the data's own YAML."""
    try:
        if text and load_yaml(text) == data:
            return text
    except SpecError:
        pass
    return dump_yaml(data)


def _page_answer(answer):
    """The preview as the page draws it: each quarantine's rule also as the JSON its
    "retry anyway" box sends back."""
    quarantined = [{**q, "rule_json": json.dumps(q["rule"])} for q in answer.get("quarantined", ())]
    return {**answer, "quarantined": quarantined}


def builder_context(request, editor, data, text, answer, catalog, errors=(), notes=None):
    """What the builder's templates draw: the form (or the YAML view), the errors placed on
    the fields they name, the notes of what an edit took out, and the plan preview."""
    form = SpecForm(data, catalog, notes) if editor == "form" and isinstance(data, dict) else None
    shown = answer["errors"] + [e for e in errors if e not in answer["errors"]]
    return {
        "editor": "form" if form else "yaml",
        "form": form,
        "spec_json": json.dumps(data) if form else "",
        "spec_yaml": text,
        "answer": _page_answer(answer),
        "errors": form.place(shown) if form else shown,
        "can_launch": request.user.has_perm("benchmarks.launch_sweep"),
    }


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_new(request):
    """GET: the builder (from the example, or ?clone=ID). POST: save as draft, or launch."""
    catalog = load_catalog()
    if request.method != "POST":
        try:
            clone, refused = CloneForm.parse(request.GET)["clone"], []
        except QueryError as exc:
            clone, refused = None, [{"path": "", "message": str(exc)}]
        source = Sweep.objects.filter(pk=clone).first() if clone is not None else None
        if source is not None:
            text = dump_yaml(source.spec)
        else:
            text = BUILDER_EXAMPLE.read_text() if BUILDER_EXAMPLE.exists() else ""
        status = 400 if refused else 200
        try:
            data = load_yaml(text, source="spec")
        except SpecError as exc:
            return _builder_page(request, "yaml", None, text, unparsed(exc), catalog, refused, status=status)
        return _builder_page(request, "form", data, text, preview(data, text, catalog), catalog, refused,
                             status=status)

    launch = request.POST.get("action") == "launch"
    if launch and not request.user.has_perm("benchmarks.launch_sweep"):
        return HttpResponseForbidden("You may save drafts but not launch sweeps.")
    editor = "form" if request.POST.get("editor") == "form" else "yaml"
    try:
        data, text = builder_input(request.POST, catalog)
    except SpecError as exc:
        return _builder_page(request, "yaml", None, request.POST.get("spec_yaml", ""), unparsed(exc), catalog,
                             status=400)
    try:
        spec = validate(data, catalog)
        with transaction.atomic():  # a launch refused stores no draft either
            sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
            if launch:
                launch_sweep(sweep)
    except (SpecError, SweepStateError) as exc:
        errors = _error_entries(exc.errors if isinstance(exc, SpecError) else [str(exc)])
        return _builder_page(request, editor, data, text, preview(data, text, catalog), catalog, errors, status=400)
    verb = "launched" if launch else "saved as a draft"
    messages.success(request, f"Sweep #{sweep.pk} {verb}.")
    return redirect("sweep-detail", sweep_id=sweep.pk)


def _builder_page(request, editor, data, text, answer, catalog, errors=(), status=200):
    return render(request, "runs/sweep_new.html", builder_context(request, editor, data, text, answer, catalog, errors),
                  status=status)


@reader_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_plan_preview(request):
    return JsonResponse(plan_preview(request.POST))


@reader_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def builder_preview(request):
    """The plan preview of the builder as it is now (every edit posts it), with the errors
    placed on the fields the page drew: htmx swaps the preview in and the errors out of band."""
    catalog = load_catalog()
    try:
        data, text, drawn = _read(request.POST, catalog)
        answer = preview(data, text, catalog)
    except SpecError as exc:
        drawn, answer = None, unparsed(exc)
    errors = drawn.place(answer["errors"]) if drawn else answer["errors"]
    slots = drawn.with_path().values() if drawn else ()
    return render(request, "runs/partials/builder_update.html",
                  {"answer": _page_answer(answer), "errors": errors, "slots": slots,
                   "can_launch": request.user.has_perm("benchmarks.launch_sweep")})


MUST_PARSE = {"path": "", "message": "The YAML must parse before the form can show it."}


@reader_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def builder_edit(request):
    """An edit that changes the builder itself: a list entry added or removed, a choice
    that changes what the form offers, a quarantine's "retry anyway", the other view.
    Answers the builder drawn again."""
    post, catalog = request.POST, load_catalog()
    editor = "form" if post.get("editor") == "form" else "yaml"
    try:
        data, text, drawn = _read(post, catalog)
    except SpecError as exc:
        answer = unparsed(exc)
        if post.get("op") == "editor" and post.get("to") == "form":
            answer["errors"].insert(0, MUST_PARSE)
        return _builder_body(request, "yaml", None, post.get("spec_yaml", ""), answer, catalog)
    op, errors = post.get("op"), []
    if op == "editor":
        editor = "form" if post.get("to") == "form" else "yaml"
        if editor == "form" and not isinstance(data, dict):
            editor, errors = "yaml", [MUST_PARSE]
    elif isinstance(data, dict) and op in ("add", "remove", "retry"):
        _edit(data, post, catalog)
        text = dump_yaml(data)
    if editor == "form" or op == "editor":
        text = yaml_view_text(data, post.get("spec_yaml", "")) if isinstance(data, dict) else text
    notes = drawn.fit_notes if drawn else None
    return _builder_body(request, editor, data, text, preview(data, text, catalog), catalog, errors, notes)


def _edit(data, post, catalog):
    """Apply one of the builder's edits to the data."""
    op, key = post.get("op"), post.get("list")
    if op == "add" and key in LISTS:
        add_entry(data, key, catalog)
    elif op == "remove" and key in LISTS and post.get("index", "").isdecimal():  # int() refuses "²"
        remove_entry(data, key, int(post["index"]))
    elif op == "retry":
        retry_ticked(data, _rules(post.getlist("retry-shown")), _rules(post.getlist("retry")))


def _rules(values):
    """Configuration rules sent back as JSON; anything else (a text that is not JSON, or
    one beyond a spec's limits) is dropped."""
    rules = []
    for value in values:
        try:
            rule = load_json(value, source="rule")
        except (ValueError, SpecError):
            continue
        if isinstance(rule, dict):
            rules.append(rule)
    return rules


def _builder_body(request, editor, data, text, answer, catalog, errors=(), notes=None):
    context = builder_context(request, editor, data, text, answer, catalog, notes=notes)
    if errors:  # said first, above what the preview found
        context["errors"] = list(errors) + context["errors"]
    return render(request, "runs/partials/builder_body.html", context)
