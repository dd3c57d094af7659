"""The REST API of the annotation app (DRF + drf-spectacular), mounted under ``/api/`` by ``config/urls.py``."""
