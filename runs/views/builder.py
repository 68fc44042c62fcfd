"""The sweep builder (/sweeps/new/) and its plan preview."""

import json
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep
from runs.lifecycle import SweepStateError, create_sweep, launch_sweep, plan_spec
from runs.results.estimate import estimate as estimate_duration
from runs.results.estimate import load_history
from runs.roles import reader_required
from sweepcore.spec import DEFAULTS, METHOD_PARAMS, OPTION_DEFAULTS, SpecError, dump_yaml, load_yaml, validate

BUILDER_EXAMPLE = Path(settings.BASE_DIR) / "examples" / "qwen3.6-27b-sm120.yaml"


SPEC_JSON_MAX_BYTES = 1 << 20


def _error_entries(errors):
    """"path: message" lines as {"path", "message"} for the page to place."""
    entries = []
    for line in errors:
        path, sep, message = line.partition(": ")
        entries.append({"path": path if sep else "", "message": message if sep else line})
    return entries


def builder_input(post):
    """The spec data the builder sent, and its YAML text.

    The form view sends ``spec_json`` (the data it edits) with ``editor=form``; the YAML
    view sends ``spec_yaml``. Returns (data, yaml_text); data is None when the text does
    not parse, and SpecError is raised with the parse error."""
    if post.get("editor") == "form":
        raw = post.get("spec_json", "")
        if len(raw) > SPEC_JSON_MAX_BYTES:
            raise SpecError(f"spec: more than {SPEC_JSON_MAX_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SpecError(f"spec: the form sent data that is not JSON ({exc})") from None
        return data, dump_yaml(data) if isinstance(data, dict) else ""
    text = post.get("spec_yaml", "")
    return load_yaml(text, source="spec"), text


def _quarantine_rule(run):
    return {"method": run.method, **run.params, "tp": run.tp}


def plan_preview(post):
    """What the builder shows: the spec as data and as YAML, its validation errors, or the
    plan's runs, skips, quarantines and the duration estimate."""
    try:
        data, text = builder_input(post)
    except SpecError as exc:
        return {"valid": False, "parsed": False, "errors": _error_entries(exc.errors)}
    answer = {"parsed": True, "data": data, "spec_yaml": text}
    catalog = load_catalog()
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
        "totals": the_plan.totals,
        "estimate": estimate_duration(the_plan, spec.requests_per_point, spec.warmup_requests, history),
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


def builder_catalog(catalog):
    """What the form offers: the catalog's names and what each method takes."""
    return {
        "hosts": [{"name": h.name, "gpu_count": h.gpu_count, "gpu_model": h.gpu_model} for h in catalog.hosts.values()],
        "engines": [{"name": e.name, "kind": e.kind, "methods": list(e.methods)} for e in catalog.engines.values()],
        "models": [{"name": m.name, "context_length": m.context_length} for m in catalog.models.values()],
        "workloads": [{"name": w.name, "kind": w.kind} for w in catalog.workloads.values()],
        "method_params": {
            method: [{"name": p.name, "swept": p.swept, "default": p.default} for p in params]
            for method, params in METHOD_PARAMS.items()
        },
        "defaults": {**DEFAULTS, "options": OPTION_DEFAULTS},
    }


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_new(request):
    """GET: the builder (from the example, or ?clone=ID). POST: save as draft, or launch."""
    errors = []
    data = None
    editor = "form"
    if request.method == "POST":
        launch = request.POST.get("action") == "launch"
        if launch and not request.user.has_perm("benchmarks.launch_sweep"):
            return HttpResponseForbidden("You may save drafts but not launch sweeps.")
        editor = "form" if request.POST.get("editor") == "form" else "yaml"
        spec_text = request.POST.get("spec_yaml", "")
        catalog = load_catalog()
        try:
            data, spec_text = builder_input(request.POST)
            spec = validate(data, catalog)
            sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
            if launch:
                launch_sweep(sweep)
        except (SpecError, SweepStateError) as exc:
            errors = _error_entries(exc.errors if isinstance(exc, SpecError) else [str(exc)])
            if data is None:
                editor = "yaml"  # the text does not parse: the form has nothing to show
        else:
            verb = "launched" if launch else "saved as a draft"
            messages.success(request, f"Sweep #{sweep.pk} {verb}.")
            return redirect("sweep-detail", sweep_id=sweep.pk)
    else:
        catalog = load_catalog()
        clone = request.GET.get("clone")
        source = Sweep.objects.filter(pk=clone).first() if clone and clone.isdigit() else None
        if source is not None:
            spec_text = dump_yaml(source.spec)
        elif BUILDER_EXAMPLE.exists():
            spec_text = BUILDER_EXAMPLE.read_text()
        else:
            spec_text = ""
        try:
            data = load_yaml(spec_text, source="spec")
        except SpecError:
            editor = "yaml"
    return render(
        request,
        "runs/sweep_new.html",
        {
            "spec_yaml": spec_text,
            "errors": errors,
            "builder": {"data": data, "errors": errors, "editor": editor, "catalog": builder_catalog(catalog)},
            "can_launch": request.user.has_perm("benchmarks.launch_sweep"),
        },
        status=400 if errors else 200,
    )


@reader_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_plan_preview(request):
    return JsonResponse(plan_preview(request.POST))
