"""WHAT to measure: the catalog (hosts, engines, models, workloads), sweeps and the
configurations known to crash (quarantine)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.urls import reverse

from sweepcore import kinds
from sweepcore.methods import AUTOREGRESSIVE, LAUNCHABLE, REGISTRY, config_label, constant_name
from sweepcore.plan import canonical_params
from sweepcore.spec import MAX_NAME_CHARS
from sweeplab.celery import host_queue


class EngineKind(models.TextChoices):
    SGLANG = "sglang", "SGLang"
    VLLM = "vllm", "vLLM"
    LLAMACPP = "llamacpp", "llama.cpp"
    SIMULATED = "simulated", "Simulated (simengine)"


def text_choices(name, module, members):
    """Django TextChoices named ``name`` from ``(NAME, value, label)`` triples: the choices of
    a kind or status defined in sweepcore (same values, labels and order, so no migration)."""
    return models.TextChoices(name, [(key, (value, label)) for key, value, label in members], module=module)


def enum_choices(enum, module):
    """TextChoices of a sweepcore.kinds StrEnum, under the same class name."""
    return text_choices(enum.__name__, module, [(m.name, m.value, m.label) for m in enum])


# The decoding methods of the registry (sweepcore.methods), ``speculative`` (imported results
# only) included.
Method = text_choices("Method", __name__, [(constant_name(m.name), m.name, m.label) for m in REGISTRY])
# Why a run did not finish (sweepcore.kinds.FailureKind).
FailureKind = enum_choices(kinds.FailureKind, __name__)


class Host(models.Model):
    """A GPU machine. Its workers consume the Celery queue ``host.<name>``."""

    name = models.SlugField(max_length=100, unique=True)
    gpu_model = models.CharField(max_length=200, blank=True, help_text="Empty for a CPU host.")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    # "12.0" for SM120 (RTX PRO 6000 Blackwell), "9.0" for H200; empty on a CPU host.
    compute_capability = models.CharField(max_length=10, blank=True)
    description = models.TextField(blank=True)
    # Folders on this host a workload made by an import may read its data set from: the
    # host's admin chooses where uploaded files can point (sweepcore.files). None by default.
    data_roots = models.JSONField(
        default=list, blank=True,
        help_text="Absolute folders on this host that imported workloads' data sets may be read from "
                  "(a JSON list); empty: none.",
    )
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    last_worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name

    def clean(self):
        roots = self.data_roots
        if not _is_list_of_strings(roots) or not all(r.startswith("/") and "\x00" not in r for r in roots):
            raise ValidationError({"data_roots": "a JSON list of absolute folder paths, such as [\"/data/sets\"]"})

    @property
    def queue_name(self):
        return host_queue(self.name)


class Engine(models.Model):
    """How to launch one inference server. Admin-only: this is what a host executes."""

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=EngineKind.choices)
    # e.g. ["python", "-m", "sglang.launch_server", "--model-path", "{model_path}", ...]
    argv_template = models.JSONField(default=list)
    # method -> argv fragment appended for it, e.g.
    # {"ddtree": ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "{budget}"]}
    method_args = models.JSONField(default=dict, blank=True)
    env = models.JSONField(default=dict, blank=True)
    # The interpreter of the engine's own environment (vLLM on the CPU needs Python 3.11 and
    # its own packages): fills {python}. Relative to the project folder, or absolute; empty:
    # Sweeplab's own interpreter. Sweeplab never imports anything from it.
    python = models.CharField(
        max_length=500, blank=True,
        help_text="Interpreter of the engine's own virtualenv, for {python}; empty: Sweeplab's own.",
    )
    readiness_timeout_s = models.PositiveIntegerField(default=900)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name

    @property
    def methods(self):
        """Methods this engine can run: autoregressive, plus those with an argv fragment."""
        return [AUTOREGRESSIVE] + [m for m in self.method_args if m != AUTOREGRESSIVE]

    def clean(self):
        errors = {}
        if not _is_list_of_strings(self.argv_template) or not self.argv_template:
            errors["argv_template"] = "a non-empty JSON list of strings"
        if not isinstance(self.method_args, dict) or not all(
            m in LAUNCHABLE and _is_list_of_strings(v) for m, v in self.method_args.items()
        ):
            errors["method_args"] = (
                f"a JSON object mapping a method ({', '.join(LAUNCHABLE)}) to a list of strings"
            )
        if not isinstance(self.env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            errors["env"] = "a JSON object of string values"
        if errors:
            raise ValidationError(errors)


def _is_list_of_strings(value):
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class LLM(models.Model):
    name = models.CharField(max_length=200, unique=True)
    path = models.CharField(max_length=1000, help_text="Local path or hub id.")
    context_length = models.PositiveIntegerField(help_text="Declared context length in tokens.")
    draft_model_path = models.CharField(max_length=1000, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LLM"
        verbose_name_plural = "LLMs"

    def __str__(self):
        return self.name


class WorkloadKind(models.TextChoices):
    FIXED = "fixed", "Fixed prompt"
    SYNTHETIC = "synthetic", "Synthetic context of exact length"
    DATASET = "dataset", "Dataset file (ShareGPT JSON)"


class Workload(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=WorkloadKind.choices)
    prompt = models.TextField(blank=True, help_text="The prompt of a fixed workload.")
    dataset_path = models.CharField(max_length=1000, blank=True)
    description = models.TextField(blank=True)
    # Made by an import: its dataset path is the uploaded file's word, read on a host only
    # inside that host's data_roots. An admin who clears it makes the path their own choice.
    imported = models.BooleanField(
        default=False,
        help_text="Made by an import: its dataset path is read only inside the host's data roots.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name

    def clean(self):
        if self.kind == WorkloadKind.FIXED and not self.prompt.strip():
            raise ValidationError({"prompt": "a fixed workload needs its prompt"})
        if self.kind == WorkloadKind.DATASET and not self.dataset_path:
            raise ValidationError({"dataset_path": "a dataset workload needs its file"})


SweepStatus = enum_choices(kinds.SweepStatus, __name__)


class SweepSource(models.TextChoices):
    NATIVE = "native", "Measured by Sweeplab"
    IMPORTED = "imported", "Imported from a result file"


class Sweep(models.Model):
    name = models.CharField(max_length=MAX_NAME_CHARS)  # the spec's limit (sweepcore.spec)
    # The validated spec (sweepcore.spec), normalised; it round-trips to YAML.
    spec = models.JSONField()
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="sweeps")
    engine = models.ForeignKey(Engine, on_delete=models.PROTECT, related_name="sweeps")
    llm = models.ForeignKey(LLM, on_delete=models.PROTECT, related_name="sweeps")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    status = models.CharField(max_length=20, choices=SweepStatus.choices, default=SweepStatus.DRAFT)
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Where its numbers come from: measured here, or imported from a benchmark's result
    # file (runs.imports): then the file's format, name and SHA-256 are kept.
    source = models.CharField(max_length=20, choices=SweepSource.choices, default=SweepSource.NATIVE)
    import_format = models.CharField(max_length=30, blank=True)
    import_filename = models.CharField(max_length=255, blank=True)
    import_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            # One imported sweep per file content. Backs runs.imports.import_file's lookup
            # Sweep.objects.filter(source="imported", import_sha256=<hash>): importing the
            # same bytes twice finds the first sweep, and a concurrent second import fails
            # on this constraint instead of duplicating it.
            models.UniqueConstraint(
                fields=["import_sha256"],
                condition=Q(source="imported"),
                name="sweep_import_sha256_unique",
            ),
        ]
        permissions = [
            ("launch_sweep", "Can launch, cancel and resume sweeps"),
            ("curate_results", "Can exclude, include, annotate and mark baselines"),
        ]
        indexes = [
            # Sweep list: newest first, optionally by status.
            models.Index(fields=["-created_at"], name="sweep_created_idx"),
            models.Index(fields=["status", "-created_at"], name="sweep_status_created_idx"),
            # "Running sweeps on this host" (host page, scheduling).
            models.Index(fields=["host", "status"], name="sweep_host_status_idx"),
        ]

    def __str__(self):
        return f"#{self.pk} {self.name}"

    def get_absolute_url(self):
        return reverse("sweep-detail", args=[self.pk])

    @property
    def is_imported(self):
        return self.source == SweepSource.IMPORTED


class KnownFailure(models.Model):
    """A configuration that crashed with a deterministic signature on this kind of GPU.

    New sweeps plan a matching configuration ``skipped`` unless they ask to retry it."""

    engine_kind = models.CharField(max_length=20, choices=EngineKind.choices)
    llm = models.ForeignKey(LLM, on_delete=models.CASCADE, related_name="known_failures")
    method = models.CharField(max_length=30, choices=Method.choices)
    params = models.JSONField(default=dict)
    params_key = models.CharField(max_length=500, editable=False)
    tp = models.PositiveSmallIntegerField()
    compute_capability = models.CharField(max_length=10, blank=True)
    failure_kind = models.CharField(max_length=40, choices=FailureKind.choices)
    signature = models.TextField(help_text="The log line(s) that identify the failure.")
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)
    active = models.BooleanField(default=True)
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    lift_reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            # The natural key: one record per configuration and GPU kind; repeats bump it.
            models.UniqueConstraint(
                fields=["engine_kind", "llm", "method", "params_key", "tp", "compute_capability"],
                name="knownfailure_natural_key",
            ),
        ]
        indexes = [
            # Planning: active quarantines for (engine kind, model, GPU kind).
            models.Index(
                fields=["engine_kind", "llm", "compute_capability", "active"],
                name="knownfailure_plan_idx",
            ),
        ]

    def __str__(self):
        return f"{self.get_engine_kind_display()} {self.config_label}: {self.get_failure_kind_display()}"

    @property
    def config_label(self):
        return config_label(self.method, self.params, self.tp)

    def save(self, *args, **kwargs):
        self.params_key = canonical_params(self.params)
        if kwargs.get("update_fields") is not None and "params" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "params_key"}
        super().save(*args, **kwargs)
