import csv
import io

from django.contrib import admin, messages
from django.db.models import Count, Q
from django.http import HttpResponse

from benchmarks.models import LLM, Engine, Host, KnownFailure, Sweep, Workload

# Hosts, engines (their argv templates are what a host executes) and models are edited by
# staff admins only: the roles (runs/migrations/0002_roles.py) give nobody else change
# permission on them, and the admin's default permission checks enforce it.


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu_model", "gpu_count", "compute_capability", "last_heartbeat_at", "last_worker")
    list_filter = ("gpu_model", "compute_capability")
    search_fields = ("name", "gpu_model")
    readonly_fields = ("last_heartbeat_at", "last_worker", "created_at")


@admin.register(Engine)
class EngineAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "readiness_timeout_s")
    list_filter = ("kind",)
    search_fields = ("name",)


@admin.register(LLM)
class LLMAdmin(admin.ModelAdmin):
    list_display = ("name", "path", "context_length")
    search_fields = ("name", "path")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "description")
    list_filter = ("kind",)
    search_fields = ("name",)


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "llm", "engine", "host", "gpu_model", "run_count", "owner", "created_at")
    list_filter = ("status", "host", "host__gpu_model", "engine", "llm")
    list_select_related = ("llm", "engine", "host", "owner")
    search_fields = ("name", "notes")
    date_hierarchy = "created_at"
    readonly_fields = ("spec", "host", "engine", "llm", "owner", "status", "created_at", "launched_at", "finished_at")
    actions = ["export_csv"]
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(run_count=Count("runs"))

    def has_add_permission(self, request):
        return False  # sweeps are built in the builder, the CLI or the API, which validate them

    @admin.display(description="GPU model", ordering="host__gpu_model")
    def gpu_model(self, obj):
        return obj.host.gpu_model or "CPU"

    @admin.display(description="Runs", ordering="run_count")
    def run_count(self, obj):
        return obj.run_count

    @admin.action(description="Export the selection's points as CSV")
    def export_csv(self, request, queryset):
        from runs.admin import export_points_csv

        return export_points_csv(Q(run__sweep_id__in=list(queryset.values_list("pk", flat=True))), "sweeps-selection")


KNOWN_FAILURE_COLUMNS = ("id", "engine_kind", "llm__name", "method", "params_key", "tp", "compute_capability",
                         "failure_kind", "signature", "first_seen_at", "last_seen_at", "seen_count", "active",
                         "lifted_at", "lift_reason")


@admin.register(KnownFailure)
class KnownFailureAdmin(admin.ModelAdmin):
    """Quarantines are lifted and re-imposed by the actions (each asks why and is
    recorded), never by editing the record."""

    list_display = ("engine_kind", "llm", "method", "params_key", "tp", "compute_capability", "failure_kind",
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
        from runs.admin import curation_history_html

        return curation_history_html("knownfailure", obj.pk)

    @admin.action(description="Lift the quarantine (asks for a reason)", permissions=["curate"])
    def lift(self, request, queryset):
        from runs import curation
        from runs.admin import ask_text

        return ask_text(self, request, queryset, "lift", "Lift the quarantine",
                        "Why may these configurations run again?", curation.lift_quarantine)

    @admin.action(description="Re-impose the quarantine (asks for a reason)", permissions=["curate"])
    def reimpose(self, request, queryset):
        from runs import curation
        from runs.admin import ask_text

        return ask_text(self, request, queryset, "reimpose", "Re-impose the quarantine",
                        "Why are these configurations skipped again?", curation.reimpose_quarantine)

    @admin.action(description="Export the selection as CSV")
    def export_csv(self, request, queryset):
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(KNOWN_FAILURE_COLUMNS)
        writer.writerows(queryset.order_by("id").values_list(*KNOWN_FAILURE_COLUMNS))
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = "attachment; filename=known-failures.csv"
        self.message_user(request, f"Exported {queryset.count()} known failure(s).", messages.SUCCESS)
        return response
