"""The deployment files stay true to the code: compose services wire up, every variable is documented."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())


def test_compose_has_the_production_services_and_their_dependencies_exist():
    services = _compose()["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    assert "gunicorn" in (ROOT / "docker" / "Dockerfile").read_text()


def test_every_setting_read_from_the_environment_is_in_env_example():
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    read = set()
    for path in (ROOT / "config" / "settings").glob("*.py"):
        read |= set(re.findall(r"env(?:\.\w+)?\(\s*\"([A-Z][A-Z0-9_]+)\"", path.read_text()))
    assert read, "no environment variables found: the pattern no longer matches settings"
    assert read - documented == set(), f"undocumented variables: {sorted(read - documented)}"
