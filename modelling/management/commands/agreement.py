"""``manage.py agreement``: Krippendorff's alpha of the valid ratings, with a bootstrap 95 % CI."""
import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Benchmark
from modelling.selectors import valid_ratings_load
from modelling.services.agreement import DEFAULT_SEED, LEVELS, agreement_compute


class Command(BaseCommand):
    help = (
        "Print Krippendorff's alpha (ordinal by default) of the valid ratings, its bootstrap 95 % CI over "
        "candidate answers, n_items and n_ratings. --json prints one object: alpha, ci [low, high], n_items, "
        "n_ratings, level."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="Only ratings of this benchmark (its name, e.g. MMAR).")
        parser.add_argument("--level", choices=LEVELS, default="ordinal", help="Level of measurement.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object instead of a table."
        )
        parser.add_argument(
            "--resamples",
            type=int,
            default=None,
            help="Bootstrap replicates (default: MODELLING_BOOTSTRAP_RESAMPLES, 1000).",
        )
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="Bootstrap seed.")

    def handle(self, *args, benchmark, level, as_json: bool, resamples, seed, **options):
        if benchmark is not None and not Benchmark.objects.filter(name=benchmark).exists():
            known = ", ".join(Benchmark.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"--benchmark: no benchmark named {benchmark!r} (known: {known})")
        if resamples is None:
            resamples = settings.MODELLING_BOOTSTRAP_RESAMPLES
        if resamples < 0:
            raise CommandError("--resamples must be 0 or more")
        result = agreement_compute(
            ratings=valid_ratings_load(benchmark=benchmark),
            level=level,
            scope=f"benchmark:{benchmark}" if benchmark else "all",
            resamples=resamples,
            seed=seed,
        )
        if as_json:
            self.stdout.write(json.dumps(result.as_json()))
            return
        fmt = lambda v: "undefined" if v is None else f"{v:.4f}"  # noqa: E731
        rows = [
            ("scope", result.scope),
            ("level", result.level),
            ("alpha", fmt(result.alpha)),
            ("95% CI", f"[{fmt(result.ci_low)}, {fmt(result.ci_high)}]  ({resamples} resamples, seed {seed})"),
            ("n_items", str(result.n_items)),
            ("n_pairable_items", str(result.n_pairable_items)),
            ("n_ratings", str(result.n_ratings)),
            ("n_annotators", str(result.n_annotators)),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            self.stdout.write(f"{key:<{width}}  {value}")
