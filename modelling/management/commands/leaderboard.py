"""``manage.py leaderboard``: the LALM leaderboard (human means with CIs, judges, ORCA, PPI) as text."""
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Benchmark
from modelling.leaderboard.services import (
    BY_CHOICES,
    leaderboard_compute,
    leaderboard_render,
)


class Command(BaseCommand):
    help = (
        "Print the LALM leaderboard: per LALM answers, rated answers, valid ratings, mean rating ± sd (1-5), mean "
        "correctness (normalised) with a 95 % cluster-bootstrap CI over questions, answer length, judges' means, "
        "ORCA's mean mu and sigma^2 and the prediction-powered estimate. --json prints {benchmark, model_version, "
        "rows}; --by adds a breakdown."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="Only this benchmark (its name); default: all benchmarks.")
        parser.add_argument("--by", choices=BY_CHOICES, help="Also break the table down by modality or category.")
        parser.add_argument("--resamples", type=int, default=None,
                            help="Bootstrap resamples (default: MODELLING_BOOTSTRAP_RESAMPLES).")
        parser.add_argument("--seed", type=int, default=0, help="Bootstrap seed.")
        fmt = parser.add_mutually_exclusive_group()
        for name in ("json", "csv", "markdown", "latex"):
            fmt.add_argument(f"--{name}", dest="fmt", action="store_const", const=name, help=f"Print {name}.")

    def handle(self, *args, benchmark, by, resamples, seed, fmt, **options):
        if benchmark is not None and not Benchmark.objects.filter(name=benchmark).exists():
            known = ", ".join(Benchmark.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"--benchmark: no benchmark named {benchmark!r} (known: {known})")
        if resamples is not None and resamples < 1:
            raise CommandError("--resamples must be at least 1")
        board = leaderboard_compute(benchmark=benchmark, by=by, resamples=resamples, seed=seed)
        self.stdout.write(leaderboard_render(board, fmt=fmt or "markdown"))
