from django.urls import path

from runs import views

urlpatterns = [
    path("", views.sweep_list, name="sweep-list"),
    path("sweeps/new/", views.sweep_new, name="sweep-new"),
    path("imports/new/", views.import_new, name="import-new"),
    path("sweeps/plan-preview.json", views.sweep_plan_preview, name="sweep-plan-preview"),
    path("sweeps/<int:sweep_id>/", views.sweep_detail, name="sweep-detail"),
    path("sweeps/<int:sweep_id>/progress.json", views.sweep_progress, name="sweep-progress"),
    path("sweeps/<int:sweep_id>/launch", views.sweep_launch, name="sweep-launch"),
    path("sweeps/<int:sweep_id>/cancel", views.sweep_cancel, name="sweep-cancel"),
    path("sweeps/<int:sweep_id>/resume", views.sweep_resume, name="sweep-resume"),
    path("runs/<int:run_id>/drawer.json", views.run_drawer, name="run-drawer"),
    path("sweeps/<int:sweep_id>/charts.json", views.sweep_charts, name="sweep-charts"),
    path("sweeps/<int:sweep_id>/points-table.json", views.sweep_points_table, name="sweep-points-table"),
    path("charts/", views.run_selection_charts, name="run-selection-charts"),
    path("charts.json", views.run_selection_charts_data, name="run-selection-charts-data"),
    path("history/", views.history, name="history"),
    path("history.json", views.history_data, name="history-data"),
    path("history/export/<str:kind>", views.history_export, name="history-export"),
    path("sweeps/<int:sweep_id>/points.csv", views.sweep_points_csv, name="sweep-points-csv"),
    path("sweeps/<int:sweep_id>/points.json", views.sweep_points_json, name="sweep-points-json"),
    path("sweeps/<int:sweep_id>/requests.jsonl", views.sweep_requests_jsonl, name="sweep-requests-jsonl"),
    path("compare/", views.compare, name="compare"),
    path("export/<str:kind>", views.selection_export, name="selection-export"),
]
