"""Which settings a process runs when nobody names them: the Celery app defaults to production (DEBUG off, a real
secret required), like ``config.wsgi``; the embedded platform (``make run``) names its settings for the worker and
beat it starts."""
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = (
    "from config.celery import app; from django.conf import settings; "
    "print(settings.SETTINGS_MODULE, settings.DEBUG)"
)


def _bare_env(**values: str) -> dict[str, str]:
    """This process's environment without any Django settings module or DJANGO_* variable."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    env.update(DATABASE_URL="postgres://orca@127.0.0.1:5432/orca", CELERY_BROKER_URL="redis://127.0.0.1:6379/0")
    env.update(values)
    return env


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", REPORT], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_celery_app_started_without_a_settings_module_runs_production_settings():
    result = _run(_bare_env(DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="localhost"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["config.settings.production", "False"]


def test_a_bare_celery_app_without_a_secret_refuses_to_start():
    result = _run(_bare_env(DJANGO_ALLOWED_HOSTS="localhost"))
    assert result.returncode != 0
    assert "Set the DJANGO_SETTINGS_MODULE" not in result.stderr
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_a_named_settings_module_still_wins():
    result = _run(_bare_env(DJANGO_SETTINGS_MODULE="config.settings.local"))
    assert result.stdout.split() == ["config.settings.local", "True"], result.stderr[-2000:]


def test_make_run_names_its_settings_module_for_the_worker_and_beat(settings):
    from annotation.management.commands.runplatform import platform_env

    assert platform_env()["DJANGO_SETTINGS_MODULE"] == settings.SETTINGS_MODULE


def test_the_sample_envs_empty_secret_key_leaves_make_run_on_the_local_development_key():
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    env = _bare_env(DJANGO_SETTINGS_MODULE="config.settings.local", DJANGO_SECRET_KEY="")
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "django-insecure-local-development-only"
