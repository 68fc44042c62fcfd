from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from runs.api import api
from runs.views import login

urlpatterns = [
    path("login/", login.login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("runs.urls")),
]
