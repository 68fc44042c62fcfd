"""Storing an imported benchmark result file (sweepcore.importers parses it) as a sweep.

``import_file(name, source, fmt, host, model, user)`` is the one entry point, for the
``import_results`` command and for a view (an upload form or the API): it takes the file's
name and the file (opened for reading bytes, read as a stream: sweepcore.importers) or its
bytes, stores everything in one transaction and returns an :class:`ImportResult`.
Anything wrong -- the file (:class:`sweepcore.importers.ImportFileError`) or the catalog
(:class:`CatalogError`) -- raises a :class:`sweepcore.importers.ImportRefused` with a one-line
message, and nothing is stored.

What is stored
--------------
* One **Sweep** per file, ``source="imported"``, with the file's format, name and SHA-256
  (``import_format``, ``import_filename``, ``import_sha256``), status ``done``, and a spec
  that says where it came from.  The same bytes imported again find that sweep (a
  partial unique constraint on the hash backs this) and store nothing.
* **Host**: ``host`` (required: no result file names the machine that ran it); unknown
  names are refused with the list of known hosts.  Hosts are admin-curated, never created.
* **LLM**: ``model``, else the file's model (vLLM ``model_id``; SGLang
  ``server_info.served_model_name``/``model_path``), matched to an LLM's name or path;
  unknown ones are refused with the list of known models (an LLM's declared context
  length is catalog data an admin enters).
* **Engine**: ``engine``, else the only engine of the file's kind (vLLM files -> ``vllm``;
  SGLang ones -> ``sglang`` unless their ``backend`` says ``vllm``); with several of that
  kind the choice is refused with their names; with none, an ``imported-<kind>`` engine is
  created with an *empty* argv template, so it can be named in history but launches
  nothing (Engine.clean refuses it as a launch configuration).
* **Workload**: the file's dataset name, created when missing (``synthetic`` for random
  datasets, else ``dataset`` with the file's dataset path or name).
* **Runs**: one per (method, parameters, TP) of the file, status ``done``; a point
  measured twice in one file (the same command run twice appends a second line) goes to
  a second attempt of its configuration, so both stay in history and the charts show the
  later one, as with a retried run.  TP is the file's, else ``tp``, else 1.
* **Points**: status ``ok``, or ``failed`` when no request completed or no token came
  back; ``finished_at`` is the file's date (vLLM) or the import time; ``extra`` holds the
  unmapped fields and ``extra.import`` the file, line and format.
* **RequestRecords** from the per-request arrays, where the file has them; a record
  without a send time in the file gets ``send_time`` 0.0 (the column is required). A point
  with more requests than Sweeplab stores (sweepcore.importers' limits) stores an even
  sample, and its ``extra.import`` says so: ``requests_in_file``, ``requests_stored`` and
  a ``note`` in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks.models import (
    LLM,
    Engine,
    EngineKind,
    Host,
    Sweep,
    SweepSource,
    SweepStatus,
    Workload,
    WorkloadKind,
)
from runs.models import Point, PointStatus, RequestRecord, Run, RunEvent, RunEventKind, RunStatus
from sweepcore import importers
from sweepcore.importers import ImportFileError, ImportRefused
from sweepcore.plan import canonical_params
from sweepcore.spec import text_problem


class CatalogError(ImportRefused):
    """The host, model or engine to file the results under is missing or ambiguous.
    ``field`` names which (``host``, ``model``, ``engine``, ``tp``): the upload form shows
    the message beside that field."""

    def __init__(self, message, field):
        super().__init__(message)
        self.field = field


@dataclass
class ImportResult:
    sweep: Sweep
    created: bool
    format: str
    points: int
    requests: int
    requests_in_file: int = 0  # more than ``requests`` when points stored a sample of theirs

    @property
    def message(self):
        if not self.created:
            return f"{self.sweep.import_filename}: already imported as sweep #{self.sweep.pk}; nothing stored"
        sampled = (f" (an even sample of the file's {self.requests_in_file:,}: Sweeplab's limit)"
                   if self.requests_in_file > self.requests else "")
        return (
            f"Imported {self.sweep.import_filename} ({self.format}) as sweep #{self.sweep.pk}: "
            f"{self.points} point{'s' if self.points != 1 else ''}, "
            f"{self.requests} request record{'s' if self.requests != 1 else ''}{sampled}"
        )


#: An imported sweep is named after its file: "import <file name>", then " (<label>)" where
#: the name's column has room for it (the label cut to fit).
NAME_PREFIX = "import "


def max_chars(model, field):
    """The characters ``model.field`` holds: one definition of each limit, the column's."""
    return model._meta.get_field(field).max_length


def max_filename_chars():
    """The longest file name an import takes: its column, and the sweep's name made of it."""
    return min(max_chars(Sweep, "import_filename"), max_chars(Sweep, "name") - len(NAME_PREFIX))


def _check_texts(filename, names):
    """The file's name and the catalog names an import is given (``names``: field -> name,
    as the upload form and the API call them) are refused with a NUL character (a lookup of
    one fails on PostgreSQL), the file's name and the workload's (which may be created) when
    longer than their columns; each message names the field and the limit."""
    problem = text_problem(filename, max_filename_chars())
    if problem:
        raise ImportFileError(f"file name: {problem}")
    for field, name in names.items():
        problem = text_problem(name or "", max_chars(Workload, "name") if field == "workload" else None)
        if problem:
            raise CatalogError(f"{field}: {problem}", field)


def _check_stored_texts(parsed, filename):
    """What the file gives for a column of a bounded length fits it (the parser refused a
    NUL character in any of its texts already): its engine version, and its dataset's path,
    which a workload the import makes keeps (its name is a slug cut to fit: workload_of)."""
    bounded = [("engine version", "engine_version", max_chars(Run, "engine_version")),
               ("dataset path", "dataset_path", max_chars(Workload, "dataset_path"))]
    for p in parsed.points:
        for what, attribute, most in bounded:
            problem = text_problem(getattr(p, attribute) or "", most)
            if problem:
                where = f"{filename} line {p.line}" if p.line is not None else filename
                raise ImportFileError(f"{where}: {what}: {problem}")


def sweep_name(filename, label):
    """"import <file name> (<label>)", the label cut to what the name's column leaves it (or
    left out); ``filename`` fits (``max_filename_chars``)."""
    name = f"{NAME_PREFIX}{filename}"
    room = max_chars(Sweep, "name") - len(name) - len(" ()")
    if not label or room < 2:
        return name
    return f"{name} ({label if len(label) <= room else label[:room - 1] + '…'})"


def existing_import(digest: str):
    return (
        Sweep.objects.filter(source=SweepSource.IMPORTED, import_sha256=digest)
        .select_related("host", "engine", "llm")
        .first()
    )


def _names(queryset, field="name"):
    names = list(queryset.order_by(field).values_list(field, flat=True)[:30])
    return ", ".join(names) if names else "none"


def _host(name):
    if not name:
        raise CatalogError(
            f"the file does not say which host ran it: pass --host NAME (known hosts: {_names(Host.objects)})", "host"
        )
    host = Host.objects.filter(name=name).first()
    if host is None:
        raise CatalogError(f"--host: no host named {name!r} (known hosts: {_names(Host.objects)})", "host")
    return host


def _llm(name, from_file):
    wanted = name or from_file
    if not wanted:
        raise CatalogError(
            f"the file does not name its model: pass --model NAME (known models: {_names(LLM.objects)})", "model"
        )
    llm = LLM.objects.filter(name=wanted).first() or LLM.objects.filter(path=wanted).order_by("pk").first()
    if llm is None:
        source = "--model" if name else "the file's model"
        raise CatalogError(
            f"{source} {wanted!r} is not in the catalog (known models: {_names(LLM.objects)}); "
            "pass --model NAME, or ask an admin to add it", "model"
        )
    return llm


def _engine(name, kind):
    if name:
        engine = Engine.objects.filter(name=name).first()
        if engine is None:
            raise CatalogError(f"--engine: no engine named {name!r} (known engines: {_names(Engine.objects)})",
                               "engine")
        return engine
    if kind is None:
        raise CatalogError(
            f"the file does not say which engine served it: pass --engine NAME "
            f"(known engines: {_names(Engine.objects)})", "engine"
        )
    candidates = list(Engine.objects.filter(kind=kind).order_by("name"))
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise CatalogError(
            f"several {kind} engines could have served it ({', '.join(e.name for e in candidates)}): "
            "pass --engine NAME", "engine"
        )
    engine, _ = Engine.objects.get_or_create(
        name=f"imported-{kind}",
        defaults={
            "kind": kind,
            "argv_template": [],
            "description": "Files imported results from this engine kind; its empty argv launches nothing.",
        },
    )
    return engine


def _workload(point, filename):
    workload = Workload.objects.filter(name=point.workload).first()
    if workload is not None:
        return workload
    kind = WorkloadKind.SYNTHETIC if point.workload_kind == "synthetic" else WorkloadKind.DATASET
    return Workload.objects.create(
        name=point.workload,
        kind=kind,
        dataset_path="" if kind == WorkloadKind.SYNTHETIC else (point.dataset_path or point.workload),
        # The file's dataset path is information: no host reads it outside its data roots.
        imported=True,
        description=f"Created by the import of {filename}.",
    )


def _engine_kind(parsed):
    kinds = {p.engine_kind for p in parsed.points}
    if len(kinds) == 1:
        kind = kinds.pop()
        return kind if kind in EngineKind.values else None
    return None


def import_file(name, source, fmt=None, host=None, model=None, user=None, engine=None, tp=None, workload=None):
    """Import one result file (see the module docstring); returns an ImportResult.

    ``name``: the file's name as the user knows it (a basename is stored); ``source``: the
    file, opened for reading bytes (an upload, an open file), or its bytes; ``fmt``: one of
    sweepcore.importers.FORMATS, or None to detect it; ``host``, ``model``, ``engine``:
    catalog names; ``user``: the sweep's owner; ``tp``: the TP when
    the file does not say; ``workload``: a workload name instead of the file's dataset.
    Raises ImportRefused (ImportFileError, CatalogError) with a one-line message.
    """
    filename = (name or "upload").replace("\\", "/").rsplit("/", 1)[-1] or "upload"
    _check_texts(filename, {"host": host, "model": model, "engine": engine, "workload": workload})
    # The file is checked first: a malformed one is refused the same way, stored or not.
    parsed = importers.parse(filename, source, fmt)
    _check_stored_texts(parsed, filename)
    digest = parsed.sha256
    found = existing_import(digest)
    if found is not None:
        return _already(found)
    if tp is not None and tp < 1:
        raise CatalogError(f"--tp: expected a positive integer, got {tp}", "tp")
    if workload:
        for point in parsed.points:
            point.workload = workload
    try:
        with transaction.atomic():
            return _store(parsed, filename, digest, host, model, user, engine, tp)
    except IntegrityError:
        found = existing_import(digest)
        if found is None:
            raise
        return _already(found)


def _already(sweep):
    return ImportResult(
        sweep, False, sweep.import_format,
        Point.objects.filter(run__sweep=sweep).count(),
        RequestRecord.objects.filter(point__run__sweep=sweep).count(),
    )


def _store(parsed, filename, digest, host_name, model_name, user, engine_name, tp):
    host = _host(host_name)
    models_in_file = {p.model for p in parsed.points if p.model}
    llm = _llm(model_name, sorted(models_in_file)[0] if len(models_in_file) == 1 else None)
    if not model_name and len(models_in_file) > 1:
        raise CatalogError(f"the file names several models ({', '.join(sorted(models_in_file))}): pass --model NAME",
                           "model")
    engine = _engine(engine_name, _engine_kind(parsed))
    now = timezone.now()
    dates = [p.measured_at for p in parsed.points if p.measured_at]
    started, finished = (min(dates), max(dates)) if dates else (now, now)
    label = next((p.label for p in parsed.points if p.label), "")
    sweep = Sweep.objects.create(
        name=sweep_name(filename, label),
        spec={
            "name": f"{NAME_PREFIX}{filename}",
            "description": f"Imported from {filename} ({importers.FORMAT_DESCRIPTIONS[parsed.format]}), "
                           f"SHA-256 {digest[:12]}.",
            "host": host.name,
            "engine": engine.name,
            "model": llm.name,
            "imported": {"format": parsed.format, "file": filename, "sha256": digest},
        },
        host=host,
        engine=engine,
        llm=llm,
        owner=user,
        status=SweepStatus.DONE,
        launched_at=started,
        finished_at=finished,
        source=SweepSource.IMPORTED,
        import_format=parsed.format,
        import_filename=filename,
        import_sha256=digest,
    )
    runs = {}  # (method, params_key, tp, attempt) -> Run
    taken = {}  # run id -> set of point keys
    run_points = {}  # run id -> number of points
    records = []
    for p in parsed.points:
        run_tp = p.tp or tp or 1
        key = canonical_params(p.params)
        workload = _workload(p, filename)
        point_key = (workload.pk, p.prompt_tokens, p.concurrency)
        attempt = 1
        while True:
            run = runs.get((p.method, key, run_tp, attempt))
            if run is None:
                run = Run.objects.create(
                    sweep=sweep, position=len(runs), method=p.method, params=p.params, tp=run_tp,
                    attempt=attempt, retry_of=runs.get((p.method, key, run_tp, attempt - 1)),
                    status=RunStatus.DONE, engine_version=p.engine_version,
                    reason=f"imported from {filename}",
                    server_info={**p.server_info, "imported_from": filename, "backend": p.backend or ""},
                    started_at=p.measured_at or started, finished_at=p.measured_at or finished,
                )
                runs[(p.method, key, run_tp, attempt)] = run
                taken[run.pk] = set()
                run_points[run.pk] = 0
            if point_key not in taken[run.pk]:
                break
            attempt += 1
        taken[run.pk].add(point_key)
        ok = bool(p.metrics.get("completed")) and (p.metrics.get("total_output_tokens") is None
                                                   or p.metrics["total_output_tokens"] > 0)
        extra = dict(p.extra)
        extra["import"] = {"file": filename, "format": parsed.format, "line": p.line, "index": p.index}
        if p.requests_note:
            extra["import"].update(requests_in_file=p.requests_in_file, requests_stored=len(p.requests),
                                   note=p.requests_note)
        point = Point.objects.create(
            run=run, position=run_points[run.pk], workload=workload, prompt_tokens=p.prompt_tokens,
            actual_prompt_tokens=p.actual_prompt_tokens, max_new_tokens=p.max_new_tokens,
            concurrency=p.concurrency, request_rate=p.request_rate,
            status=PointStatus.OK if ok else PointStatus.FAILED,
            reason="" if ok else "no request of this point completed (as recorded in the imported file)",
            started_at=p.measured_at or started, finished_at=p.measured_at or finished,
            errors=_errors(p), extra=extra,
            **{k: v for k, v in p.metrics.items() if k in POINT_METRIC_COLUMNS},
        )
        run_points[run.pk] += 1
        records.extend(
            RequestRecord(
                point=point, index=r.index, send_time=r.send_time if r.send_time is not None else 0.0,
                chunk_offsets=r.chunk_offsets, chunk_tokens=r.chunk_tokens, prompt_tokens=r.prompt_tokens,
                output_tokens=r.output_tokens, token_count_source=r.token_count_source,
                error_kind=r.error_kind, error=r.error,
            )
            for r in p.requests
        )
    RequestRecord.objects.bulk_create(records, batch_size=1000)
    RunEvent.objects.bulk_create(
        RunEvent(run=run, at=now, kind=RunEventKind.FINISHED,
                 message=f"imported from {filename} ({parsed.format})", data={"sha256": digest})
        for run in runs.values()
    )
    in_file = sum(max(p.requests_in_file, len(p.requests)) for p in parsed.points)
    return ImportResult(sweep, True, parsed.format, len(parsed.points), len(records), in_file)


POINT_METRIC_COLUMNS = {
    f.name for f in Point._meta.concrete_fields
} - {"id", "run", "position", "workload", "prompt_tokens", "actual_prompt_tokens", "max_new_tokens",
     "concurrency", "request_rate", "status", "reason", "started_at", "finished_at", "errors", "extra",
     "excluded", "exclude_reason", "is_baseline", "notes"}


def _errors(point):
    """``{kind: {"count", "example"}}`` from the request records, as sweepcore.metrics does."""
    out = {}
    for r in point.requests:
        if not r.error_kind:
            continue
        entry = out.setdefault(r.error_kind, {"count": 0, "example": ""})
        entry["count"] += 1
        entry["example"] = entry["example"] or r.error[:500]
    return out
