"""The pages' forms: the import upload, and the GET parameters of the history, compare,
run-selection and chart endpoints (runs.queryparams: a bad one is a 400 that names it)."""

from django import forms

from benchmarks.models import LLM, Engine, Host, Workload
from runs.models import Run
from runs.queryparams import FlagParam, IdListParam, IntegerParam, QueryForm, TextParam
from runs.results import compare as compare_lib
from runs.results import history as hist
from sweepcore.importers import FORMAT_DESCRIPTIONS, FORMATS
from sweepcore.importers import MAX_FILE_BYTES as IMPORT_MAX_BYTES
HISTORY_MAX_WINDOW = 100
# A configuration's parameters as the history page's links give them (Run.params_key), and
# its ``config``: "method:params".
PARAMS_CHARS = Run._meta.get_field("params_key").max_length
CONFIG_CHARS = Run._meta.get_field("method").max_length + 1 + PARAMS_CHARS


class ImportForm(forms.Form):
    """The upload form of a vLLM / SGLang result file (runs.imports does the work)."""

    file = forms.FileField(
        label="Result file",
        help_text=f"JSON or JSON Lines, up to {IMPORT_MAX_BYTES >> 20} MiB. Nothing of a file with an error "
                  "anywhere is stored.",
    )
    format = forms.ChoiceField(
        required=False,
        choices=[("", "detect from the file")] + [(f, FORMAT_DESCRIPTIONS[f].replace("`", "")) for f in FORMATS],
        help_text="Told apart by the file's fields; name it if the detection fails.",
    )
    host = forms.ChoiceField(help_text="The machine that ran the benchmark: no result file names it.")
    model = forms.ChoiceField(
        required=False, help_text="Default: the model the file names, matched to a model's name or path.")
    engine = forms.ChoiceField(
        required=False, help_text="Default: the only engine of the file's kind (vLLM or SGLang).")
    tp = forms.IntegerField(required=False, min_value=1, label="TP",
                            help_text="Tensor-parallel size, where the file does not say (default 1).")
    workload = forms.ChoiceField(
        required=False, help_text="Default: the dataset the file names (a new workload if it is not in the catalog).")

    # The page's groups of fields, in order.
    SECTIONS = (
        ("The file", ("file", "format")),
        ("What it ran on", ("host", "model", "engine", "tp")),
        ("What it measured", ("workload",)),
    )

    def sections(self):
        """(title, bound fields) per group of SECTIONS, for the template."""
        return [(title, [self[name] for name in names]) for title, names in self.SECTIONS]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        blank = [("", "—")]
        self.fields["host"].choices = blank + [(n, n) for n in Host.objects.order_by("name").values_list("name", flat=True)]
        self.fields["model"].choices = blank + [(n, n) for n in LLM.objects.order_by("name").values_list("name", flat=True)]
        self.fields["engine"].choices = blank + [(n, n) for n in Engine.objects.order_by("name").values_list("name", flat=True)]
        self.fields["workload"].choices = blank + [
            (n, n) for n in Workload.objects.order_by("name").values_list("name", flat=True)
        ]

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > IMPORT_MAX_BYTES:
            raise forms.ValidationError(too_large_upload(upload))
        return upload


def too_large_upload(upload):
    """Why an upload is refused for its size, in words (the page's and the API's)."""
    return (f"{upload.name} is {upload.size:,} bytes; a result file may be up to {IMPORT_MAX_BYTES:,} bytes "
            f"({IMPORT_MAX_BYTES >> 20} MiB, Sweeplab's limit)")


class HistoryQueryForm(QueryForm):
    """One history series (runs.results.history.SERIES_KEYS), its metric and how regressions
    are detected; ``config`` (the page's select, "method:params_key") overrides method and
    params. The cleaned data carries the series as ``series``."""

    model = TextParam()
    engine = TextParam()
    method = TextParam()
    params = TextParam("{}", most=PARAMS_CHARS)
    tp = IntegerParam()
    workload = TextParam()
    prompt_tokens = IntegerParam()
    concurrency = IntegerParam()
    gpu = TextParam()
    config = TextParam(most=CONFIG_CHARS)
    metric = TextParam(hist.DEFAULT_METRIC)
    window = IntegerParam(hist.DEFAULT_WINDOW, minimum=hist.MIN_HISTORY, maximum=HISTORY_MAX_WINDOW)
    show_excluded = FlagParam()
    valid_only = FlagParam()

    def clean_metric(self):
        try:
            return hist.validate_metric(self.cleaned_data["metric"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        if data.get("config"):
            data["method"], _, params = data["config"].partition(":")
            data["params"] = params or "{}"
        data["series"] = {key: data.get(key) for key in hist.SERIES_KEYS}
        return data


class SelectionForm(QueryForm):
    """A selection of sweeps and/or runs: ?sweep=A&sweep=B, ?run=X&run=Y."""

    sweep = IdListParam("“{}” is not an id")
    run = IdListParam("“{}” is not an id")

    def selection_error(self):
        """The first bad id's message, or ""."""
        errors = self.errors.get("sweep") or self.errors.get("run")
        return errors[0] if errors else ""


class CompareForm(SelectionForm):
    """The compare page: the selection and the metric compared."""

    metric = TextParam(compare_lib.DEFAULT_METRIC)

    def clean_metric(self):
        metric = self.cleaned_data["metric"]
        if metric not in compare_lib.METRICS:
            raise forms.ValidationError(f"Unknown metric “{metric}”: choose one of {', '.join(compare_lib.METRICS)}.")
        return metric

    def asked_metric(self):
        """The metric asked for, known or not (the page shows it)."""
        return self.cleaned_data.get("metric") or self["metric"].data


class RunSelectionForm(QueryForm):
    """Runs from any sweeps: ?runs=1,2,3 (or runs=1&runs=2, as a form of checkboxes sends
    them). The cleaned ``runs`` are the Run rows in the order given, with their sweeps."""

    runs = IdListParam("“{}” is not a run id: give ids like ?runs=1,2,3", commas=True)

    def clean_runs(self):
        ids = self.cleaned_data["runs"]
        if not ids:
            raise forms.ValidationError("no runs selected: give run ids like ?runs=1,2,3")
        found = {
            run.pk: run
            for run in Run.objects.filter(pk__in=ids).select_related("sweep").only(
                "id", "sweep_id", "method", "params", "tp", "attempt", "status", "excluded", "exclude_reason",
                "sweep__id", "sweep__name"
            )
        }
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise forms.ValidationError(f"no run #{', #'.join(missing)}")
        return [found[i] for i in ids]


class ChartChoiceForm(QueryForm):
    """?family=ID or ?chart=ID (runs.results.charts.build_charts): the overview when neither."""

    family = TextParam(None)
    chart = TextParam(None)


def chart_choice(query):
    """The chart parameters of a charts endpoint, as build_charts' keywords."""
    return dict(ChartChoiceForm.parse(query))
