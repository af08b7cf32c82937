"""Two routes: the charge endpoint and the health check the harness waits for."""

from django.urls import path

from charges_site import views

urlpatterns = [
    path("charges", views.charges),
    path("health", views.health),
]
