from django.contrib import admin

from runs.models import Point, RequestRecord, Run, RunEvent, TelemetrySample

CURATION_FIELDS = ("excluded", "exclude_reason", "is_baseline", "notes")


class CurationOnlyAdmin(admin.ModelAdmin):
    """Measured values and what was launched are never edited by hand: only the
    curation flags and notes are writable."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.concrete_fields if f.name not in CURATION_FIELDS]

    def has_add_permission(self, request):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Raw records: shown, never written from the admin."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(CurationOnlyAdmin):
    list_display = ("id", "sweep", "method", "params_key", "tp", "attempt", "status", "failure_kind", "started_at")
    list_filter = ("status", "failure_kind", "method", "tp", "excluded", "is_baseline")
    list_select_related = ("sweep",)
    search_fields = ("sweep__name", "failure_cause")


@admin.register(Point)
class PointAdmin(CurationOnlyAdmin):
    list_display = ("id", "run", "workload", "prompt_tokens", "concurrency", "status", "output_throughput", "decode_tok_s")
    list_filter = ("status", "workload", "concurrency", "excluded", "is_baseline")
    list_select_related = ("run", "workload")


@admin.register(RequestRecord)
class RequestRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "point", "index", "output_tokens", "error_kind", "http_status")
    list_filter = ("error_kind",)
    list_select_related = ("point",)


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(ReadOnlyAdmin):
    list_display = ("run", "at", "gpu_index", "memory_used_mib", "utilization_pct", "power_w", "temperature_c")
    list_select_related = ("run",)


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ("run", "at", "kind", "message")
    list_filter = ("kind",)
    list_select_related = ("run",)
