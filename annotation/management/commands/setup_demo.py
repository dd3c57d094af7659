"""Create the demo accounts and import the demo benchmark, or the real data with ``--data``.

Used by ``make run``; safe to run repeatedly (accounts are kept, imports are idempotent). The demo accounts share a
published password (``admin`` / ``orca-demo``), so they are created only with ``DEBUG`` on (the local settings of
``make run``) or with ``--i-know-this-is-not-production``; ``--no-accounts`` imports data under any settings.
"""
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from annotation import demo
from annotation.demo.synth import write_demo_clips
from annotation.services.accounts import DEMO_PASSWORD, demo_accounts_create

#: The flag that creates the demo accounts with DEBUG off.
UNSAFE_FLAG = "--i-know-this-is-not-production"

#: The real data files ``--data DIR`` imports, relative to DIR (see ../shared/data/README.md).
REAL_DATA = {
    "mmau": "mmau/mmau-test-mini.json",
    "mmar": "mmar/MMAR-meta.jsonl",
    "mmar_audio": "af_demo_audio",
    "qwen3omni": "mmar_preds_qwen3omni/v9_predictions.jsonl",
    "taltech": "mmar_taltech_agent/taltech_agent_mmar_reasoning.jsonl",
    "orca_train": "orca_seed108/seed_108_train.json",
    "orca_dev": "orca_seed108/seed_108_dev.json",
}


class Command(BaseCommand):
    help = "Create demo accounts and import the bundled demo benchmark (or the real data with --data DIR)."

    def add_arguments(self, parser):
        parser.add_argument("--data", type=Path, help="Folder laid out like ../shared/data: import real data.")
        parser.add_argument("--no-accounts", action="store_true", help="Do not create the demo accounts.")
        parser.add_argument(
            UNSAFE_FLAG, action="store_true", dest="not_production",
            help="Create the demo accounts (published password) although DEBUG is off.",
        )

    def handle(self, *args, data: Path | None, no_accounts: bool, not_production: bool, **options):
        if not no_accounts and not (settings.DEBUG or not_production):
            raise CommandError(
                f"refusing to create the demo accounts (admin / {DEMO_PASSWORD}, a published password) with DEBUG "
                f"off, as under production settings. Import data without them (--no-accounts), create real "
                f"accounts (manage.py createsuperuser), or pass {UNSAFE_FLAG} on a machine no one else can reach."
            )
        if not no_accounts:
            self.stdout.write(f"Demo accounts (password for all: {DEMO_PASSWORD}):")
            for account in demo_accounts_create():
                state = "created" if account.created else "exists"
                self.stdout.write(f"  {account.username:<12} {account.role:<10} ({state})")
        if data is None:
            self._import_demo()
        else:
            self._import_real(data)

    def _import_demo(self) -> None:
        audio_dir = Path(settings.VAR_DIR) / "demo-audio"
        write_demo_clips(audio_dir)
        self._call(
            "import_benchmark",
            "--format", "mmar", "--name", demo.BENCHMARK_NAME, "--audio-dir", str(audio_dir),
            str(demo.BENCHMARK_FILE),
        )
        for lalm, path in demo.CANDIDATE_FILES.items():
            self._call("import_candidates", "--lalm", lalm, "--benchmark", demo.BENCHMARK_NAME, str(path))

    def _import_real(self, data: Path) -> None:
        paths = {key: data / rel for key, rel in REAL_DATA.items()}
        missing = [str(p) for p in paths.values() if not p.exists()]
        if missing:
            raise CommandError(f"--data {data}: missing {', '.join(missing)}")
        self._call("import_benchmark", "--format", "mmau", str(paths["mmau"]))
        self._call("import_benchmark", "--format", "mmar", "--audio-dir", str(paths["mmar_audio"]), str(paths["mmar"]))
        # The ORCA annotations first: they make the rated version (Gemini rationale, Whisper transcript) current,
        # so the MMAR candidate answers imported next are attached to the version annotators see.
        self._call("import_annotations", "--format", "orca", str(paths["orca_train"]))
        self._call("import_annotations", "--format", "orca", str(paths["orca_dev"]))
        self._call("import_candidates", "--lalm", "Qwen3-Omni-30B (thinking)", "--benchmark", "MMAR",
                   str(paths["qwen3omni"]))
        self._call("import_candidates", "--lalm", "TalTech audio reasoning agent", "--benchmark", "MMAR",
                   str(paths["taltech"]))

    def _call(self, name: str, *args: str) -> None:
        self.stdout.write(f"$ manage.py {name} {' '.join(args)}")
        call_command(name, *args, stdout=self.stdout, stderr=self.stderr)
