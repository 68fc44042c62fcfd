from django.contrib import admin

from benchmarks.models import LLM, Engine, Host, KnownFailure, Sweep, Workload


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu_model", "gpu_count", "compute_capability", "last_heartbeat_at", "last_worker")
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
    list_display = ("id", "name", "status", "source", "llm", "engine", "host", "owner", "created_at")
    list_filter = ("status", "source", "host", "engine")
    list_select_related = ("llm", "engine", "host", "owner")
    search_fields = ("name",)
    date_hierarchy = "created_at"
    readonly_fields = ("spec", "created_at", "launched_at", "finished_at", "source", "import_format",
                       "import_filename", "import_sha256")


@admin.register(KnownFailure)
class KnownFailureAdmin(admin.ModelAdmin):
    list_display = ("engine_kind", "llm", "method", "params_key", "tp", "compute_capability", "failure_kind", "seen_count", "active", "last_seen_at")
    list_filter = ("active", "failure_kind", "engine_kind", "method", "compute_capability")
    list_select_related = ("llm",)
    search_fields = ("signature",)
    readonly_fields = ("params_key", "first_seen_at", "last_seen_at", "seen_count")
