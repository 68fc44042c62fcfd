from django.urls import path

from runs.views import builder, compare, history, imports, run_charts, sweep_detail, sweep_list

urlpatterns = [
    path("", sweep_list.sweep_list, name="sweep-list"),
    path("sweeps/new/", builder.sweep_new, name="sweep-new"),
    path("imports/new/", imports.import_new, name="import-new"),
    path("sweeps/plan-preview.json", builder.sweep_plan_preview, name="sweep-plan-preview"),
    path("sweeps/new/preview", builder.builder_preview, name="sweep-builder-preview"),
    path("sweeps/new/edit", builder.builder_edit, name="sweep-builder-edit"),
    path("sweeps/<int:sweep_id>/", sweep_detail.sweep_detail, name="sweep-detail"),
    path("sweeps/<int:sweep_id>/progress.json", sweep_detail.sweep_progress, name="sweep-progress"),
    path("sweeps/<int:sweep_id>/launch", sweep_detail.sweep_launch, name="sweep-launch"),
    path("sweeps/<int:sweep_id>/cancel", sweep_detail.sweep_cancel, name="sweep-cancel"),
    path("sweeps/<int:sweep_id>/resume", sweep_detail.sweep_resume, name="sweep-resume"),
    path("runs/<int:run_id>/drawer.json", sweep_detail.run_drawer, name="run-drawer"),
    path("sweeps/<int:sweep_id>/charts.json", sweep_detail.sweep_charts, name="sweep-charts"),
    path("sweeps/<int:sweep_id>/load-charts.json", sweep_detail.sweep_load_charts, name="sweep-load-charts"),
    path("sweeps/<int:sweep_id>/points-table.json", sweep_detail.sweep_points_table, name="sweep-points-table"),
    # Partials of the sweep page that htmx swaps in (templates/runs/partials/).
    path("sweeps/<int:sweep_id>/partials/live", sweep_detail.sweep_live_partial, name="sweep-live-partial"),
    path("sweeps/<int:sweep_id>/partials/points-table", sweep_detail.sweep_points_table_partial,
         name="sweep-points-table-partial"),
    path("runs/<int:run_id>/partials/drawer", sweep_detail.run_drawer_partial, name="run-drawer-partial"),
    path("charts/", run_charts.run_selection_charts, name="run-selection-charts"),
    path("charts.json", run_charts.run_selection_charts_data, name="run-selection-charts-data"),
    path("history/", history.history, name="history"),
    path("history.json", history.history_data, name="history-data"),
    path("history/export/<str:kind>", history.history_export, name="history-export"),
    path("sweeps/<int:sweep_id>/points.csv", sweep_detail.sweep_points_csv, name="sweep-points-csv"),
    path("sweeps/<int:sweep_id>/points.json", sweep_detail.sweep_points_json, name="sweep-points-json"),
    path("sweeps/<int:sweep_id>/requests.jsonl", sweep_detail.sweep_requests_jsonl, name="sweep-requests-jsonl"),
    path("compare/", compare.compare, name="compare"),
    path("export/<str:kind>", compare.selection_export, name="selection-export"),
]
