"""Import a vLLM / SGLang result file as a sweep (runs.imports stores it)."""

from ninja import Field, File, Form, Router, Schema, Status, UploadedFile
from ninja.errors import HttpError

from runs.api.auth import require
from runs.api.schemas import DENIED, FILTER_TEXT, ErrorOut
from runs.api.sweeps import SweepDetailOut, get_sweep
from runs.forms import IMPORT_MAX_BYTES, too_large_upload
from runs.imports import import_file
from sweepcore.importers import ImportRefused

router = Router()


class ImportOut(Schema):
    created: bool
    message: str
    format: str
    points: int
    requests: int
    requests_in_file: int = Field(description="the file's request records; more than `requests` when a point "
                                              "stored an even sample of its own (Sweeplab's limit, README)")
    sweep: SweepDetailOut


class ImportFields(Schema):
    format: str | None = Field(None, description="vllm, sglang or sglang-one-batch; detected when not given",
                               pattern=r"^[^\x00]*$", max_length=40)
    host: str = Field(description="the host that ran the benchmark", **{**FILTER_TEXT, "default": ...})
    model: str | None = Field(**FILTER_TEXT)
    engine: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(None, ge=1, le=1024)
    workload: str | None = Field(**FILTER_TEXT)


@router.post("/imports", response={200: ImportOut, 201: ImportOut, 400: ErrorOut, **DENIED,
                                   413: ErrorOut}, tags=["imports"])
def import_results(request, file: File[UploadedFile], fields: Form[ImportFields]):
    """Import a ``vllm bench serve --save-result`` JSON file or an SGLang ``bench_serving``
    / ``bench_one_batch_server`` JSONL file as a sweep (multipart form). 201: imported;
    200: the same file was imported before (nothing stored); 400: the line and field that
    is wrong, or the unknown host / model, and nothing stored; 413: the file is larger than
    the limit (README "Limits"), checked before it is read; the file is then read as a
    stream (its upload is on disk beyond 2 MiB), never whole into memory."""
    require(request, "benchmarks.add_sweep", "import results")
    if file.size > IMPORT_MAX_BYTES:
        raise HttpError(413, too_large_upload(file))
    try:
        result = import_file(file.name, file, fmt=fields.format or None, host=fields.host,
                             model=fields.model or None, user=request.user, engine=fields.engine or None,
                             tp=fields.tp, workload=fields.workload or None)
    except ImportRefused as exc:
        raise HttpError(400, str(exc)) from None
    body = {"created": result.created, "message": result.message, "format": result.format,
            "points": result.points, "requests": result.requests,
            "requests_in_file": max(result.requests_in_file, result.requests), "sweep": get_sweep(request, result.sweep.pk)}
    return Status(201 if result.created else 200, body)
