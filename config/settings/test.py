"""Test settings: fast password hashing; PostgreSQL/Redis when DATABASE_URL/CELERY_BROKER_URL are set."""
from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Test clients log in without a request (Client.login); tests/security enables django-axes where it is tested.
AXES_ENABLED = False
# API throttles count per process across the whole session; tests/security sets real rates where it tests them.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": None, "user": None, "auth-token": None}}  # noqa: F405
STUDY_ENTRY_THROTTLE = None  # tests/security/test_study_entry.py sets a rate where it tests it
# Tasks run in the test process unless a test starts a real worker (tests/conftest.py: celery_worker_process).
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
MEDIA_ROOT = VAR_DIR / "test-media"  # noqa: F405
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Static files come from the finders (no collectstatic in tests).
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
# The fake model servers of tests/fakes and the llama.cpp judge test listen on 127.0.0.1; tests of the private-host
# rule set this to [] themselves.
PROVIDER_PRIVATE_NETWORKS = ["127.0.0.0/8", "::1/128"]
# ORCA's quality gates (modelling/services/orca_quality.py) off: tests of routing rules use tiny fake predictions
# without out-of-sample figures; tests/modelling/test_orca_quality.py sets the thresholds where it tests the gates.
ORCA_ROUTING_MIN_RHO = None
ORCA_RATER_MIN_RHO = None
