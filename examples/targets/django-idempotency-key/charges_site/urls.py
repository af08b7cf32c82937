"""The charge endpoint, the health check the harness waits for, and its store-size hook."""

from django.urls import path

from charges_site import views

urlpatterns = [
    path("charges", views.charges),
    path("health", views.health),
    path("test/keys", views.stored_keys),
]
