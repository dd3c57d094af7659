"""Container healthchecks (docker/compose.yaml, docker/Dockerfile); exit status 0 = healthy, 1 = unhealthy.

    python docker/healthcheck.py web    # GET /healthz on this container's gunicorn, Host = first allowed host
    python docker/healthcheck.py beat   # beat saved its schedule file in the last 10 minutes

Standard library only, so it runs in a second even when Django is slow to import.
"""
import glob
import os
import sys
import time
import urllib.request


def web() -> bool:
    """True when ``/healthz`` answers 200 (sent with a Host header Django's ALLOWED_HOSTS accepts)."""
    first = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost").split(",")[0].strip().lstrip(".*")
    request = urllib.request.Request("http://127.0.0.1:8000/healthz", headers={"Host": first or "localhost"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status == 200


def beat(max_age_s: float = 600.0) -> bool:
    """True when the schedule file was written within ``max_age_s`` (beat syncs it every 3 minutes)."""
    files = glob.glob("/tmp/celerybeat-schedule*")
    return bool(files) and time.time() - max(map(os.path.getmtime, files)) < max_age_s


if __name__ == "__main__":
    checks = {"web": web, "beat": beat}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        sys.exit(f"usage: healthcheck.py {{{'|'.join(checks)}}}")
    try:
        sys.exit(0 if checks[sys.argv[1]]() else 1)
    except OSError as error:
        sys.exit(f"unhealthy: {error}")
