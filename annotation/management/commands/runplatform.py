"""Run the whole platform in one terminal: web server, Celery worker and Celery beat.

The embedded default for ``make run``. Production runs these as separate services (``docker/compose.yaml``).
Ctrl-C stops all three.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from config.celery import broker_folders_ensure


def platform_env() -> dict[str, str]:
    """Environment of the three processes: this one's, with its settings module named explicitly (the Celery app
    alone would default to production settings)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE}


class Command(BaseCommand):
    help = "Start the web server, a Celery worker and Celery beat together (Ctrl-C stops all)."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes.")

    def handle(self, *args, addrport: str, concurrency: int, **options):
        var = Path(settings.VAR_DIR)
        (var / "logs").mkdir(parents=True, exist_ok=True)
        broker_folders_ensure()  # the embedded filesystem:// broker's folders (nothing for Redis or RabbitMQ)
        python = sys.executable
        commands = {
            "worker": [python, "-m", "celery", "-A", "config", "worker", "-Q", "default,gpu",
                       "--concurrency", str(concurrency), "--loglevel", "INFO"],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
                     "--schedule", str(var / "celerybeat-schedule")],
            "web": [python, "manage.py", "runserver", addrport, "--noreload"],
        }
        env = platform_env()
        processes = {name: subprocess.Popen(cmd, env=env) for name, cmd in commands.items()}
        self.stdout.write(self.style.SUCCESS(f"Platform running on http://{addrport}/ (Ctrl-C to stop)"))

        def stop(*_):
            for proc in processes.values():
                if proc.poll() is None:
                    proc.terminate()
            for proc in processes.values():
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()

        signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(0)))
        try:
            while all(proc.poll() is None for proc in processes.values()):
                time.sleep(1)
            dead = [name for name, proc in processes.items() if proc.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; shutting the platform down")
        except KeyboardInterrupt:
            pass
        finally:
            stop()
