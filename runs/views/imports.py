"""Import a vLLM / SGLang result file as a sweep (runs.imports stores it)."""

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.shortcuts import redirect, render

from runs.forms import ImportForm
from runs.imports import import_file
from runs.roles import reader_required
from sweepcore.importers import FORMAT_DESCRIPTIONS, FORMAT_DETAILS, FORMATS, ImportRefused


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def import_new(request):
    """GET: the upload form. POST: import the file as a sweep, or say why not (400), beside
    the field it is about: the file's own errors at the file, the catalog's at the host,
    model, engine or TP it names (runs.imports.CatalogError.field)."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            result = import_file(
                data["file"].name, data["file"], fmt=data["format"] or None, host=data["host"],
                model=data["model"] or None, user=request.user, engine=data["engine"] or None, tp=data["tp"],
                workload=data["workload"] or None,
            )
        except ImportRefused as exc:
            form.add_error(getattr(exc, "field", "file"), str(exc))
        else:
            (messages.success if result.created else messages.info)(request, result.message + ".")
            return redirect("sweep-detail", sweep_id=result.sweep.pk)
    return _page(request, form, status=400 if request.method == "POST" else 200)


def _page(request, form, status, refused=""):
    formats = [{"description": FORMAT_DESCRIPTIONS[f], "details": FORMAT_DETAILS[f]} for f in FORMATS]
    return render(request, "runs/import_new.html", {"form": form, "formats": formats, "refused": refused},
                  status=status)


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def too_large(request, message):
    """The upload form again, saying why nothing was imported: the request was larger than
    an import may be (runs.limits refused it before reading it)."""
    return _page(request, ImportForm(), status=413, refused=message)


import_new.too_large = too_large
