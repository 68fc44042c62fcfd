from django.urls import path

from runs import views

urlpatterns = [
    path("", views.sweep_list, name="sweep-list"),
    path("sweeps/<int:sweep_id>/", views.sweep_detail, name="sweep-detail"),
]
