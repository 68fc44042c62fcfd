import csv
import io

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Count, F, Q, Value
from django.db.models.functions import Concat
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from benchmarks.models import KnownFailure, Sweep
from runs import curation
from runs.lifecycle import SweepStateError
from runs.models import (
    ApiToken,
    CurationEvent,
    CurationTarget,
    LoginThrottle,
    Point,
    PointStatus,
    RequestRecord,
    Run,
    RunEvent,
    TelemetrySample,
    ran_on_field,
)
from runs.results.exports import export_response, spreadsheet_safe
from runs.lockout import lift

CURATION_FIELDS = ("excluded", "exclude_reason", "is_baseline", "notes")
# A configuration column sorts by method, then parameters (as the labels read).
CONFIG_ORDER = Concat("method", Value(" "), "params_key")
ESTIMATE_ABOVE_ROWS = 10_000
UNMEASURED = (PointStatus.PLANNED, PointStatus.SKIPPED)  # what a plan makes; any other status is a result
MANY = 10**15  # the count of a list whose total is not known (EstimatedCountPaginator)


class EstimatedCountPaginator(Paginator):
    """Admin lists of the big tables page without a COUNT(*) over the whole table.

    Up to ESTIMATE_ABOVE_ROWS matching rows are counted exactly, by a count bounded with
    LIMIT (it reads at most that many rows, whatever the table's size). Above that:

    - an unfiltered list on PostgreSQL shows the planner's row estimate (pg_class.reltuples),
      "about N";
    - otherwise (a filtered list, or SQLite, which keeps no row estimate) the total is not
      known: ``count`` is the sentinel MANY, the list says "more than N", and the page
      links run a few pages ahead of the current one instead of to a last page. A page
      past the end is an empty list.

    ``count_kind`` says which: "exact", "estimate" or "unknown".
    """

    count_kind = "exact"

    @cached_property
    def count(self):
        queryset = self.object_list
        self.exact_up_to = ESTIMATE_ABOVE_ROWS
        bounded = queryset.order_by().values("pk")[:ESTIMATE_ABOVE_ROWS + 1].count()
        if bounded <= ESTIMATE_ABOVE_ROWS:
            return bounded
        if connection.vendor == "postgresql" and not queryset.query.where:
            with connection.cursor() as cursor:
                cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                               [queryset.model._meta.db_table])
                row = cursor.fetchone()
            if row and row[0] > ESTIMATE_ABOVE_ROWS:
                self.count_kind = "estimate"
                return row[0]
        self.count_kind = "unknown"
        return MANY

    def get_elided_page_range(self, number=1, *, on_each_side=3, on_ends=2):
        if self.count_kind != "unknown":
            yield from super().get_elided_page_range(number, on_each_side=on_each_side, on_ends=on_ends)
            return
        number = self.validate_number(number)
        first = max(1, number - on_each_side)
        if first > on_ends + 2:
            yield from range(1, on_ends + 1)
            yield self.ELLIPSIS
        else:
            first = 1
        yield from range(first, number + on_each_side + 1)
        yield self.ELLIPSIS


class BigTableAdmin(admin.ModelAdmin):
    paginator = EstimatedCountPaginator
    show_full_result_count = False  # no second COUNT(*) of the whole table per page

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        cl = (getattr(response, "context_data", None) or {}).get("cl")
        if cl is not None and cl.paginator.count_kind == "unknown":
            # MANY is no number to show: no "N results" by the search box, no "select all
            # N" (admin/pagination.html says "more than N").
            cl.full_result_count = cl.result_count
            response.context_data["actions_selection_counter"] = False
        return response


def curation_history_html(target_type, target_id):
    events = curation.history_of(target_type, target_id)
    if not events:
        return "No curation changes."
    rows = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (e.at.strftime("%Y-%m-%d %H:%M"), e.user.get_username() if e.user else "—", e.get_action_display(),
             ", ".join(f"{f}: {b!r} → {a!r}" for f, (b, a) in e.changes.items()), e.reason or "—")
            for e in events
        ),
    )
    return format_html(
        "<table><thead><tr><th>When</th><th>Who</th><th>What</th><th>Changes</th><th>Why</th></tr></thead>"
        "<tbody>{}</tbody></table>", rows
    )


def ask_text(modeladmin, request, queryset, action, title, label, apply, required=True):
    """An action that needs words (a reason, a note): the first POST shows a form for
    them, the second applies ``apply(queryset, user, text)`` and reports the count."""
    if "apply" in request.POST:
        text = request.POST.get("text", "")
        try:
            count = apply(queryset, request.user, text)
        except (curation.CurationError, SweepStateError) as exc:
            modeladmin.message_user(request, str(exc), messages.ERROR)
            return None
        noun = modeladmin.model._meta.verbose_name if count == 1 else modeladmin.model._meta.verbose_name_plural
        modeladmin.message_user(request, f"{title}: {count} {noun} changed.", messages.SUCCESS)
        return None
    return TemplateResponse(request, "admin/runs/curation_text.html", {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "label": label,
        "required": required,
        "action": action,
        "objects": queryset,
        "opts": modeladmin.model._meta,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    })


# The points of a selection of runs, points or sweeps: the lookup from Point.
POINTS_OF = {Run: "run_id__in", Point: "pk__in", Sweep: "run__sweep_id__in"}


@admin.action(description="Export the selection's points as CSV")
def export_csv(modeladmin, request, queryset):
    """The sweep page's points.csv, for the points of the selected runs, points or sweeps."""

    opts = modeladmin.model._meta
    ids = list(queryset.values_list("pk", flat=True))
    points = Q(**{POINTS_OF[modeladmin.model]: ids})
    count = Point.objects.filter(points).count()
    response = export_response("points.csv", points, f"{opts.model_name}s-selection", {})
    noun = opts.verbose_name if len(ids) == 1 else opts.verbose_name_plural
    modeladmin.message_user(request, f"Exported {count} point(s) of {len(ids)} {noun} as CSV.", messages.SUCCESS)
    return response


class CurationAdmin(BigTableAdmin):
    """Measured values and what was launched are never edited by hand: only the
    curation flags and notes are writable, and every change is recorded."""

    actions = ["exclude_results", "include_results", "mark_baseline", "annotate", export_csv]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.concrete_fields if f.name not in CURATION_FIELDS] + ["curation_history"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # not even superusers: curation excludes, it never deletes

    def has_curate_permission(self, request):
        return request.user.has_perm("benchmarks.curate_results")

    @admin.display(description="Curation history")
    def curation_history(self, obj):
        return curation_history_html(curation.target_of(obj), obj.pk)

    def save_model(self, request, obj, form, change):
        before = {f: form.initial.get(f) for f in CURATION_FIELDS if f in form.changed_data}
        if before.get("excluded") is False and obj.excluded and not obj.exclude_reason.strip():
            # The change form cannot exclude without saying why, as the action cannot.
            messages.error(request, "Not excluded: an exclusion needs a reason (fill in “Exclude reason”).")
            obj.excluded = False
        super().save_model(request, obj, form, change)
        curation.record_edit(obj, request.user, before, reason=obj.exclude_reason if obj.excluded else "")

    @admin.action(description="Exclude from charts and history (asks for a reason)", permissions=["curate"])
    def exclude_results(self, request, queryset):
        return ask_text(self, request, queryset, "exclude_results", "Exclude from charts and history",
                        "Why are these excluded? (shown wherever they would have been)", curation.exclude)

    @admin.action(description="Include in charts and history again", permissions=["curate"])
    def include_results(self, request, queryset):
        count = curation.include(queryset, request.user)
        self.message_user(request, f"Included again: {count} changed.", messages.SUCCESS)

    @admin.action(description="Mark as the baseline of its series", permissions=["curate"])
    def mark_baseline(self, request, queryset):
        try:
            count = curation.mark_baseline(queryset, request.user)
        except curation.CurationError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"Marked as the baseline of its series: {count} changed.", messages.SUCCESS)

    @admin.action(description="Annotate (asks for a note)", permissions=["curate"])
    def annotate(self, request, queryset):
        return ask_text(self, request, queryset, "annotate", "Annotate", "Note (appended to the notes)",
                        curation.annotate)


@admin.display(description="Configuration", ordering=CONFIG_ORDER)
def configuration(obj):
    """The run's or known failure's configuration as every page names it (config_label),
    never its parameters' JSON."""
    return obj.config_label


class PointInline(admin.TabularInline):
    model = Point
    fields = ("position", "workload", "prompt_tokens", "concurrency", "status", "reason", "decode_tok_s",
              "output_throughput", "median_ttft_ms", "excluded")
    readonly_fields = fields
    ordering = ("position",)
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        # Each row is titled with its point (Point.__str__: the workload and the run).
        return super().get_queryset(request).select_related("workload", "run")


class RunEventInline(admin.TabularInline):
    model = RunEvent
    fields = ("at", "kind", "message")
    readonly_fields = fields
    ordering = ("at", "id")
    extra = 0
    max_num = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(CurationAdmin):
    list_display = ("id", "sweep", configuration, "attempt", "status", "failure_kind", "gpu_model",
                    "excluded", "is_baseline", "started_at")
    list_filter = ("status", "failure_kind", "sweep__host", "sweep__host__gpu_model", "method", "tp", "excluded",
                   "is_baseline")
    list_select_related = ("sweep", "sweep__host", "host")
    search_fields = ("sweep__name", "failure_cause", "reason", "engine_version")
    date_hierarchy = "created_at"
    inlines = [PointInline, RunEventInline]
    actions = CurationAdmin.actions + ["rerun"]

    @admin.display(description="GPU model", ordering=ran_on_field("gpu_model"))
    def gpu_model(self, obj):
        return obj.ran_on.gpu_model or "CPU"

    def has_rerun_permission(self, request):
        return request.user.has_perm("benchmarks.curate_results") and request.user.has_perm("benchmarks.launch_sweep")

    @admin.action(description="Re-run as a new attempt (the old one is kept)", permissions=["rerun"])
    def rerun(self, request, queryset):
        runs = list(queryset.select_related("sweep").order_by("id"))
        imported = [r for r in runs if r.sweep.is_imported]
        if imported:
            names = ", ".join(f"run {r.pk} (sweep {r.sweep_id})" for r in imported)
            self.message_user(request, f"Not re-run: {names} — imported from a result file, nothing here can "
                              "measure them again.", messages.WARNING)
            runs = [r for r in runs if not r.sweep.is_imported]
            if not runs:
                return
        try:
            new_runs = curation.rerun(runs, request.user)
        except SweepStateError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        listing = ", ".join(f"run {r.pk} (attempt {r.attempt})" for r in new_runs)
        self.message_user(request, f"Re-run queued: {listing}.", messages.SUCCESS)


@admin.register(Point)
class PointAdmin(CurationAdmin):
    list_display = ("id", "run", "workload", "prompt_tokens", "concurrency", "status", "validity", "completed",
                    "output_throughput", "decode_tok_s", "excluded", "is_baseline")
    list_filter = ("status", "validity", "run__failure_kind", "run__sweep__host", "run__sweep__host__gpu_model", "run__method",
                   "run__tp", "workload", "concurrency", "excluded", "is_baseline")
    list_select_related = ("run", "workload")
    search_fields = ("reason", "exclude_reason", "notes", "run__sweep__name")
    date_hierarchy = "finished_at"


class ReadOnlyAdmin(BigTableAdmin):
    """Raw records: shown, never written from the admin."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RequestRecord)
class RequestRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "point", "index", "output_tokens", "error_kind", "http_status")
    list_filter = ("error_kind",)
    list_select_related = ("point__workload", "point__run")


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(ReadOnlyAdmin):
    list_display = ("run", "at", "gpu_index", "memory_used_mib", "utilization_pct", "power_w", "temperature_c")
    list_select_related = ("run",)
    date_hierarchy = "at"


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ("run", "at", "kind", "message")
    list_filter = ("kind",)
    list_select_related = ("run",)
    date_hierarchy = "at"


@admin.register(CurationEvent)
class CurationEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "user", "action", "target", "reason")
    list_filter = ("action", "target_type", "user")
    list_select_related = ("user",)
    search_fields = ("target_label", "reason")
    date_hierarchy = "at"

    @admin.display(description="What")
    def target(self, obj):
        names = {CurationTarget.RUN: "runs_run_change", CurationTarget.POINT: "runs_point_change",
                 CurationTarget.KNOWN_FAILURE: "benchmarks_knownfailure_change",
                 CurationTarget.SWEEP: "benchmarks_sweep_change"}
        url = reverse(f"admin:{names[obj.target_type]}", args=[obj.target_id])
        return format_html('<a href="{}">{}</a>', url, obj.target_label or f"{obj.target_type} {obj.target_id}")


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "source", "llm", "engine", "host", "gpu_model", "run_count", "owner",
                    "created_at")
    list_filter = ("status", "source", "host", "host__gpu_model", "engine", "llm")
    list_select_related = ("llm", "engine", "host", "owner")
    date_hierarchy = "created_at"
    # Only the name and the notes are edited here, and each edit is recorded.
    readonly_fields = ("spec", "host", "engine", "llm", "owner", "status", "created_at", "launched_at", "finished_at",
                       "source", "import_format", "import_filename", "import_sha256", "curation_history")
    search_fields = ("name", "notes", "import_filename", "import_sha256")
    actions = [export_csv]
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(run_count=Count("runs"))

    def has_add_permission(self, request):
        return False  # sweeps are built in the builder, the CLI or the API, which validate them

    def has_delete_permission(self, request, obj=None):
        """A sweep with measured points is kept, even by superusers (exclude its runs
        instead); a draft, or one that measured nothing, may go with its planned runs."""
        if obj is not None and Point.objects.filter(run__sweep=obj).exclude(status__in=UNMEASURED).exists():
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Runs, points and their records are never deleted on their own; they go with a
        # sweep only when it measured nothing (a measured sweep is refused above: "sweep"
        # stays in perms_needed).
        perms_needed -= {m._meta.verbose_name for m in (Run, Point, RequestRecord, RunEvent, TelemetrySample)}
        return deleted, counts, perms_needed, protected

    @admin.display(description="GPU model", ordering="host__gpu_model")
    def gpu_model(self, obj):
        return obj.host.gpu_model or "CPU"

    @admin.display(description="Curation history")
    def curation_history(self, obj):
        return curation_history_html(CurationTarget.SWEEP, obj.pk)

    def save_model(self, request, obj, form, change):
        before = {f: form.initial.get(f) for f in ("name", "notes") if f in form.changed_data}
        super().save_model(request, obj, form, change)
        curation.record_edit(obj, request.user, before)

    @admin.display(description="Runs", ordering="run_count")
    def run_count(self, obj):
        return obj.run_count


KNOWN_FAILURE_COLUMNS = ("id", "engine_kind", "llm__name", "method", "params_key", "tp", "compute_capability",
                         "failure_kind", "signature", "first_seen_at", "last_seen_at", "seen_count", "active",
                         "lifted_at", "lift_reason")


@admin.register(KnownFailure)
class KnownFailureAdmin(admin.ModelAdmin):
    """Quarantines are lifted and re-imposed by the actions (each asks why and is
    recorded), never by editing the record."""

    list_display = ("engine_kind", "llm", configuration, "compute_capability", "failure_kind",
                    "seen_count", "active", "last_seen_at")
    list_filter = ("active", "failure_kind", "engine_kind", "method", "tp", "compute_capability")
    list_select_related = ("llm",)
    search_fields = ("signature", "lift_reason")
    date_hierarchy = "last_seen_at"
    actions = ["lift", "reimpose", "export_csv"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.concrete_fields] + ["curation_history"]

    def has_add_permission(self, request):
        return False  # known failures come from classified crashes

    def has_curate_permission(self, request):
        return request.user.has_perm("benchmarks.curate_results")

    @admin.display(description="Curation history")
    def curation_history(self, obj):
        return curation_history_html("knownfailure", obj.pk)

    @admin.action(description="Lift the quarantine (asks for a reason)", permissions=["curate"])
    def lift(self, request, queryset):
        return ask_text(self, request, queryset, "lift", "Lift the quarantine",
                        "Why may these configurations run again?", curation.lift_quarantine)

    @admin.action(description="Re-impose the quarantine (asks for a reason)", permissions=["curate"])
    def reimpose(self, request, queryset):
        return ask_text(self, request, queryset, "reimpose", "Re-impose the quarantine",
                        "Why are these configurations skipped again?", curation.reimpose_quarantine)

    @admin.action(description="Export the selection as CSV")
    def export_csv(self, request, queryset):
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(KNOWN_FAILURE_COLUMNS)
        writer.writerows([spreadsheet_safe(v) for v in row]
                         for row in queryset.order_by("id").values_list(*KNOWN_FAILURE_COLUMNS))
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = "attachment; filename=known-failures.csv"
        self.message_user(request, f"Exported {queryset.count()} known failure(s).", messages.SUCCESS)
        return response


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens: every staff user creates and revokes their own; superusers anyone's.
    The token is shown once, when it is created; only its sha256 is kept."""

    list_display = ("name", "user", "prefix", "read_only", "expires_at", "created_at", "last_used_at", "revoked_at")
    list_filter = ("read_only", "revoked_at", "expires_at")
    list_select_related = ("user",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        fields = ["name", "read_only", "expires_at", *self.readonly_fields]
        return (["user"] if request.user.is_superuser else []) + fields

    def get_readonly_fields(self, request, obj=None):
        # A token's scope and expiry are those it was made with: revoke it, or make another.
        return self.readonly_fields + (("read_only", "expires_at") if obj is not None else ())

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(user=request.user)

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request) and (
            obj is None or request.user.is_superuser or obj.user_id == request.user.pk)

    has_add_permission = has_module_permission

    def has_change_permission(self, request, obj=None):
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False  # revoked, not deleted: the audit of who had access stays

    def save_model(self, request, obj, form, change):
        if not change:
            if not request.user.is_superuser or not obj.user_id:
                obj.user = request.user
            token = obj.set_new_key()
            super().save_model(request, obj, form, change)
            self.message_user(
                request, f"API token “{obj.name}” for {obj.user.get_username()} ({obj.scope()}): {token} — copy it "
                "now, it is not shown again. Send it as “Authorization: Bearer <token>”.", messages.WARNING)
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s); they no longer authenticate.", messages.SUCCESS)


class LockedOutFilter(admin.SimpleListFilter):
    title = "locked out now"
    parameter_name = "locked"

    def lookups(self, request, model_admin):
        return (("yes", "Yes"), ("no", "No"))

    def queryset(self, request, queryset):
        locked = Q(locked_until__gt=timezone.now())
        return {"yes": queryset.filter(locked), "no": queryset.exclude(locked)}.get(self.value(), queryset)


@admin.register(LoginThrottle)
class LoginThrottleAdmin(admin.ModelAdmin):
    """Accounts and addresses with failed logins or bad API tokens in the window, and those
    locked out (runs.lockout): read-only, but for the action that lifts a lockout."""

    list_display = ("key", "kind", "failures", "locked_now", "locked_until", "last_failure_at", "window_start")
    list_filter = (LockedOutFilter, "kind")
    search_fields = ("key",)
    ordering = (F("locked_until").desc(nulls_last=True), "-last_failure_at")
    readonly_fields = ("kind", "key", "failures", "window_start", "last_failure_at", "locked_until")
    actions = ["lift_lockout"]

    @admin.display(description="locked out", boolean=True)
    def locked_now(self, obj):
        return obj.locked_until is not None and obj.locked_until > timezone.now()

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # lifted by the action, which logs who did it

    @admin.action(description="Lift the lockout", permissions=["change"])
    def lift_lockout(self, request, queryset):
        count = lift(queryset, by=request.user.get_username())
        self.message_user(request, f"Lifted {count} lockout(s): their counts start again from nothing.",
                          messages.SUCCESS)
