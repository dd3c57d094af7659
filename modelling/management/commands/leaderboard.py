"""``manage.py leaderboard``: the LALM leaderboard (estimates named with their estimator and interval method,
verdicts, judges, ORCA) as text."""
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Benchmark
from modelling.leaderboard.render import FORMATS, leaderboard_render
from modelling.leaderboard.selectors import leaderboard_by_check
from modelling.leaderboard.services import leaderboard_compute


class Command(BaseCommand):
    help = (
        "Print the LALM leaderboard: per LALM answers, % rated, valid ratings, mean rating ± sd (1-5), the "
        "estimate of mean correctness (normalised) with its 95 % CI, the estimator (classical, ppi++, active) and "
        "the interval method, the human-only estimate, answer length, judges' means, ORCA's mean mu and sigma^2 "
        "and notes. --json prints {benchmark, model_version, prediction_source, sampling_note, verdict_method, "
        "rows, pairwise (anytime-valid betting test of equal means, Holm over all pairs: confidence sequence, "
        "e-value, anytime p)}; "
        "--by adds a breakdown."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="Only this benchmark (its name); default: all benchmarks.")
        parser.add_argument("--by", help="Also break the table down by modality, category or a candidate metadata "
                                         "name of the benchmark's imports (e.g. type).")
        parser.add_argument("--seed", type=int, default=0,
                            help="Seed of the budget planner's simulations (verdicts are deterministic).")
        fmt = parser.add_mutually_exclusive_group()
        for name in FORMATS:
            fmt.add_argument(f"--{name}", dest="fmt", action="store_const", const=name, help=f"Print {name}.")

    def handle(self, *args, benchmark, by, seed, fmt, **options):
        if benchmark is not None and not Benchmark.objects.filter(name=benchmark).exists():
            known = ", ".join(Benchmark.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"--benchmark: no benchmark named {benchmark!r} (known: {known})")
        try:
            leaderboard_by_check(by=by, benchmark=benchmark)
        except ValueError as exc:
            raise CommandError(f"--by: {exc}") from exc
        board = leaderboard_compute(benchmark=benchmark, by=by, seed=seed)
        self.stdout.write(leaderboard_render(board, fmt=fmt or "markdown"))
