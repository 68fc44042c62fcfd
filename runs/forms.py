from django import forms

from benchmarks.models import LLM, Engine, Host, Workload
from sweepcore.importers import FORMAT_DESCRIPTIONS, FORMATS

IMPORT_MAX_BYTES = 64 << 20


class ImportForm(forms.Form):
    """The upload form of a vLLM / SGLang result file (runs.imports does the work)."""

    file = forms.FileField(help_text="A vLLM bench serve --save-result JSON file or an SGLang JSONL file.")
    format = forms.ChoiceField(
        required=False,
        choices=[("", "detect from the file")] + [(f, FORMAT_DESCRIPTIONS[f].replace("`", "")) for f in FORMATS],
    )
    host = forms.ChoiceField(help_text="The host that ran the benchmark.")
    model = forms.ChoiceField(required=False, help_text="Default: the model the file names.")
    engine = forms.ChoiceField(required=False, help_text="Default: the only engine of the file's kind.")
    tp = forms.IntegerField(required=False, min_value=1, label="TP", help_text="When the file does not say (default 1).")
    workload = forms.ChoiceField(required=False, help_text="Default: the file's dataset.")

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
            raise forms.ValidationError(f"{upload.name} is {upload.size:,} bytes; the limit is {IMPORT_MAX_BYTES:,}")
        return upload
