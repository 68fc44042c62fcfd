"""DOING it and what came of it: runs (one server configuration), points (one
measurement), raw request records, GPU telemetry and the run timeline.

Measured numbers are plain columns so they can be filtered, aggregated and charted in SQL.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from benchmarks.models import FailureKind, KnownFailure, Method, Sweep, Workload, enum_choices
from runs.managers import RunManager
from runs.tokens import new_token
from sweepcore import kinds
from sweepcore.methods import config_label
from sweepcore.metrics import LATENCY_FIELDS
from sweepcore.plan import canonical_params, point_label

RunStatus = enum_choices(kinds.RunStatus, __name__)
PointStatus = enum_choices(kinds.PointStatus, __name__)
Validity = enum_choices(kinds.Validity, __name__)


class Curated(models.Model):
    """Curation flags. Curators change these, never the measured numbers."""

    excluded = models.BooleanField(default=False, help_text="Hidden from charts and history.")
    exclude_reason = models.TextField(blank=True)
    is_baseline = models.BooleanField(default=False)
    notes = models.TextField(blank=True)

    class Meta:
        abstract = True


def ran_on_field(field, path=""):
    """A query expression of ``Run.ran_on``'s ``field`` (``name``, ``gpu_model``), for a query
    of runs (``path`` "") or of what hangs from them (``path`` "run__" for points)."""
    return Coalesce(f"{path}host__{field}", f"{path}sweep__host__{field}")


class Run(Curated):
    """One server configuration of a sweep (method, parameters, TP) on its host."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="runs")
    position = models.PositiveIntegerField(help_text="Order within the sweep's plan.")
    method = models.CharField(max_length=30, choices=Method.choices)
    params = models.JSONField(default=dict, blank=True)
    params_key = models.CharField(max_length=500, editable=False)
    tp = models.PositiveSmallIntegerField()
    attempt = models.PositiveSmallIntegerField(default=1)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries"
    )
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.PLANNED)
    reason = models.TextField(blank=True, help_text="Why it was skipped or failed, in words.")
    failure_kind = models.CharField(max_length=40, choices=FailureKind.choices, blank=True)
    failure_cause = models.TextField(blank=True)
    failure_log = models.TextField(blank=True, help_text="The log lines the cause was read from.")
    known_failure = models.ForeignKey(
        KnownFailure, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    retry_quarantined = models.BooleanField(
        default=False, help_text="Run even though the configuration is quarantined."
    )
    # What was actually launched and what the server said about itself.
    argv = models.JSONField(default=list, blank=True)
    engine_version = models.CharField(max_length=200, blank=True)
    server_info = models.JSONField(default=dict, blank=True)
    context_length = models.PositiveIntegerField(null=True, blank=True)
    kv_capacity_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # The capacity search's answer (sweepcore.capacity): {"metric", "load", "goodput",
    # "output_tok_s", "tok_s_per_gpu", "tok_s_per_user", "stopped_because", "message",
    # "probes", "slo"}; {} for a run without a search.
    capacity = models.JSONField(default=dict, blank=True, help_text="The highest load that met the SLO.")
    log_path = models.CharField(max_length=1000, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    # The claim: which worker drives the run (on which of the sweep's hosts: set by the
    # claim; empty until then), and its last sign of life.
    host = models.ForeignKey("benchmarks.Host", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="runs_held")
    claimed_by = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When its task was last sent to a host queue (None: queued and held back, not sent):
    # a queued run nobody claims long after is sent again (runs.worker.watch).
    sent_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RunManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["sweep", "method", "params_key", "tp", "attempt"],
                name="run_natural_key",
            ),
        ]
        indexes = [
            # Sweep detail: a sweep's runs in plan order.
            models.Index(fields=["sweep", "position"], name="run_sweep_position_idx"),
            # Takeover: runs still "running" whose heartbeat went stale.
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat_idx"),
            # History: every run of one configuration across sweeps.
            models.Index(fields=["method", "params_key", "tp"], name="run_config_idx"),
        ]

    def __str__(self):
        attempt = f" attempt {self.attempt}" if self.attempt > 1 else ""
        return f"#{self.sweep_id} {self.config_label}{attempt}"

    @property
    def config_label(self):
        return config_label(self.method, self.params, self.tp)

    @property
    def ran_on(self):
        """The host the run was driven on; a run never claimed (planned, imported, or from
        before runs recorded their host) is its sweep's. In a query: ``ran_on_field(field)``."""
        return self.host if self.host_id is not None else self.sweep.host

    def save(self, *args, **kwargs):
        self.params_key = canonical_params(self.params)
        if kwargs.get("update_fields") is not None and "params" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "params_key"}
        super().save(*args, **kwargs)


class Point(Curated):
    """One measurement of a run: a workload at a prompt length and a concurrency."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="points")
    position = models.PositiveIntegerField(help_text="Order within the run.")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="points")
    # Target prompt length; None for a fixed prompt or a dataset (its length is measured).
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    actual_prompt_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Prompt tokens as the server counted them."
    )
    max_new_tokens = models.PositiveIntegerField()
    concurrency = models.PositiveIntegerField(help_text="Clients of a closed loop; an open loop's cap in flight.")
    request_rate = models.FloatField(null=True, blank=True, help_text="None: closed loop.")
    burstiness = models.FloatField(null=True, blank=True, help_text="An open loop's gamma shape (1: Poisson).")
    from_search = models.BooleanField(default=False, help_text="A probe of the run's capacity search.")
    status = models.CharField(max_length=20, choices=PointStatus.choices, default=PointStatus.PLANNED)
    reason = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Aggregates, named as `vllm bench serve` names them (sweepcore.metrics defines them).
    completed = models.PositiveIntegerField(null=True, blank=True)
    failed = models.PositiveIntegerField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True, help_text="Wall seconds.")
    total_input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    total_output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    request_throughput = models.FloatField(null=True, blank=True)
    output_throughput = models.FloatField(null=True, blank=True)
    total_token_throughput = models.FloatField(null=True, blank=True)
    # {mean,median,std,p90,p99}_{ttft,tpot,itl,e2el}_ms: one column each (LATENCY_FIELDS).
    for _field in LATENCY_FIELDS:
        locals()[_field] = models.FloatField(null=True, blank=True)
    del _field
    decode_tok_s = models.FloatField(null=True, blank=True)
    max_output_tokens_per_s = models.FloatField(null=True, blank=True)
    accept_length = models.FloatField(null=True, blank=True)
    server_decode_tok_s = models.FloatField(
        null=True, blank=True, help_text="Decode speed as the server itself reported it."
    )
    server_median_ttft_ms = models.FloatField(
        null=True, blank=True, help_text="The server's own median TTFT, from its histogram delta over the point."
    )
    server_median_itl_ms = models.FloatField(
        null=True, blank=True, help_text="The server's own median ITL, from its histogram delta over the point."
    )
    # Under an open loop TTFT and E2EL count from each request's scheduled send time (the
    # client's own queueing counts: coordinated omission); these are how late it sent, and
    # the same latencies from the actual send.
    send_lag_median_ms = models.FloatField(null=True, blank=True)
    send_lag_p99_ms = models.FloatField(null=True, blank=True)
    send_lag_max_ms = models.FloatField(null=True, blank=True)
    send_based = models.JSONField(default=dict, blank=True, help_text="TTFT and E2EL from the actual send.")
    # Against the sweep's SLO (sweepcore.slo); None without one.
    goodput = models.FloatField(null=True, blank=True, help_text="Requests/s that met every SLO limit.")
    slo_attainment = models.FloatField(null=True, blank=True, help_text="Share of requests that met every limit.")
    slo_met = models.BooleanField(null=True, blank=True, help_text="Every limit's percentile is within it.")
    slo_checks = models.JSONField(default=dict, blank=True, help_text='limit -> {"limit", "observed", "met"}')
    client_bound = models.BooleanField(default=False)
    event_loop_lag_p99_ms = models.FloatField(null=True, blank=True)
    # The evidence behind the numbers (sweepcore.validity, sweepcore.stats). `completed`
    # is the sample size n.
    validity = models.CharField(max_length=10, choices=Validity.choices, blank=True,
                                help_text="Blank until the point is measured.")
    validity_reasons = models.JSONField(default=list, blank=True, help_text='[{"code", "message"}]')
    intervals = models.JSONField(default=dict, blank=True, help_text="metric -> [lo, hi], 95 % of the median.")
    simulated_time_scale = models.FloatField(
        null=True, blank=True, help_text="Measured on a simulator at this x real time; stored in model time."
    )
    stop_reason = models.CharField(max_length=300, blank=True, help_text="Why the point stopped sending requests.")
    host_load = models.JSONField(default=dict, blank=True, help_text="Other processes beside the measurement.")
    co_runs = models.JSONField(
        default=list, blank=True,
        help_text="Other runs that held GPUs of the same host while this point was measured (options.packing: pack).",
    )
    # The server's own view of the point (sweepcore.servermetrics.point_view): counter
    # deltas, gauge maxima, histogram medians, speculative counters; {} where it has none.
    server_metrics = models.JSONField(
        default=dict, blank=True, help_text="The server's /metrics, deltas over this point; {} without one."
    )
    # kind -> {"count": n, "example": "..."}: failures are kept, never dropped.
    errors = models.JSONField(default=dict, blank=True)
    # What has no column: unmapped fields of imported files, engine-specific extras.
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            # The natural key (run, workload, prompt_tokens, concurrency, request_rate), as
            # four partial constraints because a NULL (a fixed prompt's length, a closed
            # loop's rate) never collides and upserts would duplicate.
            models.UniqueConstraint(
                fields=["run", "workload", "prompt_tokens", "concurrency"],
                condition=Q(prompt_tokens__isnull=False, request_rate__isnull=True),
                name="point_natural_key",
            ),
            models.UniqueConstraint(
                fields=["run", "workload", "concurrency"],
                condition=Q(prompt_tokens__isnull=True, request_rate__isnull=True),
                name="point_natural_key_fixed_prompt",
            ),
            models.UniqueConstraint(
                fields=["run", "workload", "prompt_tokens", "concurrency", "request_rate"],
                condition=Q(prompt_tokens__isnull=False, request_rate__isnull=False),
                name="point_natural_key_open_loop",
            ),
            models.UniqueConstraint(
                fields=["run", "workload", "concurrency", "request_rate"],
                condition=Q(prompt_tokens__isnull=True, request_rate__isnull=False),
                name="point_natural_key_open_loop_fixed_prompt",
            ),
        ]
        indexes = [
            # Sweep detail and run drawer: a run's points in order.
            models.Index(fields=["run", "position"], name="point_run_position_idx"),
            # Progress: points done/total per run, by status.
            models.Index(fields=["run", "status"], name="point_run_status_idx"),
            # History: one series (workload, prompt length, concurrency) across runs.
            models.Index(
                fields=["workload", "prompt_tokens", "concurrency"], name="point_series_idx"
            ),
            # Sweep header: a sweep's points counted by verdict.
            models.Index(fields=["run", "validity"], name="point_run_validity_idx"),
        ]

    def __str__(self):
        """What was measured and on which configuration, e.g. ``fibonacci, fixed prompt, c=4 —
        ddtree budget=15 topk_cap=8 TP1``. It reads the workload and the run: a list of points
        selects them with it (the admin's list_select_related), or pays a query each."""
        return f"{self.label} — {self.run.config_label}"

    @property
    def label(self):
        return point_label(self.workload.name, self.prompt_tokens, self.concurrency, self.request_rate,
                           self.workload.kind)


class RequestRecord(models.Model):
    """One measured request of a point, raw: every metric can be recomputed from these."""

    point = models.ForeignKey(Point, on_delete=models.CASCADE, related_name="requests")
    index = models.PositiveIntegerField()
    send_time = models.FloatField(help_text="Epoch seconds.")
    # Seconds since send of every chunk that carried tokens, and how many it carried.
    chunk_offsets = models.JSONField(default=list)
    chunk_tokens = models.JSONField(default=list)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(default=0)
    token_count_source = models.CharField(max_length=30, blank=True)
    finish_reason = models.CharField(max_length=50, blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_kind = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    spec_verify_ct = models.PositiveIntegerField(null=True, blank=True)
    send_lag = models.FloatField(
        null=True, blank=True, help_text="Seconds sent after its scheduled time (open loop); None: closed loop."
    )
    in_ramp = models.BooleanField(
        default=False,
        help_text="Sent while the load ramped up or down (the spec's steady_state): kept, left out of the point's "
                  "statistics.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["point", "index"], name="requestrecord_natural_key"),
        ]

    def __str__(self):
        return f"request {self.index} of point {self.point_id}"


class TelemetrySample(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="telemetry")
    at = models.DateTimeField()
    gpu_index = models.PositiveSmallIntegerField()
    memory_used_mib = models.FloatField(null=True, blank=True)
    memory_total_mib = models.FloatField(null=True, blank=True)
    utilization_pct = models.FloatField(null=True, blank=True)
    power_w = models.FloatField(null=True, blank=True)
    temperature_c = models.FloatField(null=True, blank=True)
    sm_clock_mhz = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [
            # Run charts: GPU memory and power over a run's time.
            models.Index(fields=["run", "at"], name="telemetry_run_at_idx"),
        ]

    def __str__(self):
        return f"GPU {self.gpu_index} of run {self.run_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class GpuLease(models.Model):
    """One GPU of a host held by one run, from ``leased_at`` until ``released_at`` (null while
    it is held). A run leases its GPUs before preflight and gives them back at teardown; the
    leases of a run whose worker stopped heartbeating are taken back by the next worker that
    needs the GPUs. The rows are kept: they are the record of which run held which GPU
    when (the sweep's Gantt chart; the proof that no GPU was ever held twice at once)."""

    host = models.ForeignKey("benchmarks.Host", on_delete=models.CASCADE, related_name="gpu_leases")
    gpu_index = models.PositiveSmallIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="gpu_leases")
    worker = models.CharField(max_length=200)
    leased_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            # The lease itself: of two workers inserting a live lease on one GPU, the database
            # lets exactly one succeed (RunStore.lease_gpus).
            models.UniqueConstraint(fields=["host", "gpu_index"], condition=Q(released_at__isnull=True),
                                    name="gpulease_one_live_per_gpu"),
        ]
        indexes = [
            # The sweep's Gantt chart and a run's own leases: leases by run, in time.
            models.Index(fields=["run", "leased_at"], name="gpulease_run_idx"),
        ]

    def __str__(self):
        return f"GPU {self.gpu_index} of {self.host_id} for run {self.run_id}"


class RunEventKind(models.TextChoices):
    PLANNED = "planned", "Planned"
    QUEUED = "queued", "Queued"
    CLAIMED = "claimed", "Claimed by a worker"
    WAITING_FOR_GPUS = "waiting_for_gpus", "Waiting for GPUs"
    GPUS_LEASED = "gpus_leased", "GPUs leased"
    PREFLIGHT_OK = "preflight_ok", "Preflight passed"
    PREFLIGHT_FAILED = "preflight_failed", "Preflight failed"
    LAUNCHED = "launched", "Server launched"
    READY = "ready", "Server ready"
    STARTUP_FAILED = "startup_failed", "Server failed to start"
    CONTEXT_CAPPED = "context_capped", "Points skipped by the context cap"
    WARMUP_DONE = "warmup_done", "Warmup done"
    POINT_STARTED = "point_started", "Point started"
    POINT_FINISHED = "point_finished", "Point finished"
    PROBE_FAILED = "probe_failed", "Health probe failed"
    STALLED = "stalled", "Request stalled: server probed"
    CRASHED = "crashed", "Server crashed"
    QUARANTINED = "quarantined", "Configuration quarantined"
    RETRY = "retry", "Retrying"
    RESUMED = "resumed", "Resumed"
    CANCELLED = "cancelled", "Cancelled"
    TEARDOWN = "teardown", "Server stopped"
    GPU_LEAK = "gpu_leak", "GPU memory not released"
    CACHE_RESET = "cache_reset", "Server cache reset"
    CAPACITY = "capacity", "Capacity found"
    TELEMETRY_UNAVAILABLE = "telemetry_unavailable", "Telemetry unavailable"
    FINISHED = "finished", "Run finished"


#: The key of a QUEUED event's data that names the sweep its run is held behind
#: (runs.lifecycle.start_after): its runs are sent once that sweep is finished.
AFTER_SWEEP = "after_sweep"


class RunEvent(models.Model):
    """The timeline of a run, as the UI shows it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=30, choices=RunEventKind.choices)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [
            # Run drawer: a run's timeline in order.
            models.Index(fields=["run", "at"], name="runevent_run_at_idx"),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} at {self.at:%Y-%m-%d %H:%M:%S}"


class CurationAction(models.TextChoices):
    EXCLUDE = "exclude", "Excluded from charts and history"
    INCLUDE = "include", "Included again"
    MARK_BASELINE = "mark_baseline", "Marked as the baseline of its series"
    UNMARK_BASELINE = "unmark_baseline", "No longer the baseline (another was marked)"
    ANNOTATE = "annotate", "Annotated"
    RERUN = "rerun", "Re-run as a new attempt"
    LIFT_QUARANTINE = "lift_quarantine", "Quarantine lifted"
    REIMPOSE_QUARANTINE = "reimpose_quarantine", "Quarantine re-imposed"
    EDIT = "edit", "Edited in the admin"


class CurationTarget(models.TextChoices):
    SWEEP = "sweep", "Sweep"
    RUN = "run", "Run"
    POINT = "point", "Point"
    KNOWN_FAILURE = "knownfailure", "Known failure"


class CurationEvent(models.Model):
    """Who changed which curation flag of what, when and why. Written by runs.curation,
    never edited; kept when its object is deleted."""

    at = models.DateTimeField(default=timezone.now)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="curation_events")
    action = models.CharField(max_length=30, choices=CurationAction.choices)
    target_type = models.CharField(max_length=20, choices=CurationTarget.choices)
    target_id = models.PositiveBigIntegerField()
    target_label = models.CharField(max_length=300, blank=True, help_text="What it was, in words, when it happened.")
    changes = models.JSONField(default=dict, blank=True, help_text="field -> [before, after]")
    reason = models.TextField(blank=True)

    class Meta:
        indexes = [
            # An object's curation history, newest first (the admin page, the history tooltips).
            models.Index(fields=["target_type", "target_id", "at"], name="curation_target_at_idx"),
            # The admin index: the latest curation changes.
            models.Index(fields=["at"], name="curation_at_idx"),
        ]

    def __str__(self):
        return f"{self.get_action_display()}: {self.target_label or f'{self.target_type} {self.target_id}'}"


class ApiToken(models.Model):
    """A token for scripts and CI: ``Authorization: Bearer <token>`` on /api/. Only its
    sha256 is stored; the token itself is shown once, when it is created (the admin, or
    ``manage.py create_api_token``). It acts as its user, with that user's roles, until it
    is revoked or expires; a read-only one only reads (GET, HEAD, OPTIONS), whatever the
    roles. Its scope and expiry are fixed when it is made."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'nightly CI'.")
    prefix = models.CharField(max_length=12, editable=False, help_text="The token's first characters, to tell it apart.")
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    read_only = models.BooleanField(
        default=False, help_text="Only reads (GET, HEAD, OPTIONS): anything else is refused with 403.")
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this it no longer authenticates (401). Empty: until revoked.")

    class Meta:
        constraints = [
            # Authentication: every API request looks its token up by this hash.
            models.UniqueConstraint(fields=["key_hash"], name="apitoken_key_hash_unique"),
        ]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    def set_new_key(self):
        """Give this unsaved token its secret: sets the digest and prefix kept, and returns
        the token itself, to be shown once."""
        token, self.key_hash = new_token()
        self.prefix = token[:12]
        return token

    def scope(self):
        """What it may do, and until when, in words."""
        until = f"until {self.expires_at:%Y-%m-%d %H:%M %Z}" if self.expires_at else "until revoked"
        return f"{'read-only' if self.read_only else 'reads and writes'}, {until}"

    def expired(self, now=None):
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class LoginThrottle(models.Model):
    """Failed logins and bad API tokens of one account (the username as typed, lower-cased)
    or one client address, counted over a window; at its limit further attempts are refused,
    without checking a password, until ``locked_until`` (runs.lockout, which keeps these
    rows: counts change only by conditional UPDATEs). Staff see and lift them in the admin."""

    class Kind(models.TextChoices):
        ACCOUNT = "account", "account"
        ADDRESS = "address", "address"

    kind = models.CharField(max_length=7, choices=Kind.choices)
    key = models.CharField(max_length=150, help_text="The username as typed (lower-cased), or the client's address.")
    failures = models.PositiveIntegerField(
        default=0, help_text="Failures in the window (a login being checked counts until it succeeds).")
    window_start = models.DateTimeField(help_text="When the failures counted began.")
    last_failure_at = models.DateTimeField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True, help_text="Refused until then.")

    class Meta:
        verbose_name = "login lockout"
        constraints = [models.UniqueConstraint(fields=["kind", "key"], name="loginthrottle_kind_key_unique")]

    def __str__(self):
        return f"{self.kind} {self.key}"
