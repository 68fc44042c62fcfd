from django.contrib import admin

from benchmarks.models import LLM, Engine, Host, Workload

# Hosts, engines (their argv templates are what a host executes) and models are edited by
# staff admins only: the roles (runs/migrations/0002_roles.py) give nobody else change
# permission on them, and the admin's default permission checks enforce it. Sweeps and
# known failures are curated with results, so their admins live in runs/admin.py (runs
# may import benchmarks, never the reverse).


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu_model", "gpu_count", "compute_capability", "last_heartbeat_at", "last_worker")
    list_filter = ("gpu_model", "compute_capability")
    search_fields = ("name", "gpu_model")
    readonly_fields = ("last_heartbeat_at", "last_worker", "created_at")


@admin.register(Engine)
class EngineAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "python", "readiness_timeout_s")
    list_filter = ("kind",)
    search_fields = ("name",)


class DraftModelFilter(admin.SimpleListFilter):
    title = "draft model"
    parameter_name = "draft"

    def lookups(self, request, model_admin):
        return [("yes", "With a draft model"), ("no", "Without")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(draft_model_path="")
        if self.value() == "no":
            return queryset.filter(draft_model_path="")
        return queryset


@admin.register(LLM)
class LLMAdmin(admin.ModelAdmin):
    list_display = ("name", "path", "context_length", "draft_model_path")
    list_filter = ("context_length", DraftModelFilter)
    search_fields = ("name", "path", "draft_model_path")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "imported", "description")
    list_filter = ("kind", "imported")
    search_fields = ("name",)
