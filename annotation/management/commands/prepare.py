"""``python manage.py prepare {transcribe,rationale,candidates} --benchmark B [--lalm L] [--questions ...]``.

Starts a Stage 1 job (ORCA paper, section 3.1) through :func:`annotation.services.jobs.job_start` and prints its
id and page. The items run on the Celery workers; ``--wait`` follows the progress until the job ends.
"""
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from annotation.management.jobwatch import job_follow
from annotation.models import LALM, Benchmark, Job
from annotation.services.jobs import JobStartError, job_start
from annotation.services.preparation import PREPARATION_KINDS


class Command(BaseCommand):
    help = "Start a Stage 1 job: Whisper transcripts, rationales or LALM candidate answers for a benchmark."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=PREPARATION_KINDS)
        parser.add_argument("--benchmark", required=True, help="Benchmark name.")
        parser.add_argument("--lalm", help="LALM name (candidates).")
        parser.add_argument("--questions", nargs="+", metavar="ID", help="Only these benchmark question ids.")
        parser.add_argument("--all-modalities", action="store_true", help="Transcribe non-speech questions too.")
        parser.add_argument("--overwrite", action="store_true", help="Redo transcripts/rationales that exist.")
        parser.add_argument("--backend", default="", help="Transcriber backend (faster-whisper, openai-whisper).")
        parser.add_argument("--model", default="", help="Whisper model (tiny.en, base, large-v3, a path).")
        parser.add_argument("--provider", default="", help="Rationale provider (gemini, openai).")
        parser.add_argument("--wait", action="store_true", help="Print progress until the job ends.")

    def handle(self, *args, **options):
        try:
            benchmark = Benchmark.objects.get(name=options["benchmark"])
        except Benchmark.DoesNotExist:
            raise CommandError(f"--benchmark: no benchmark named {options['benchmark']!r}") from None
        lalm = None
        if options["lalm"]:
            try:
                lalm = LALM.objects.get(name=options["lalm"])
            except LALM.DoesNotExist:
                raise CommandError(f"--lalm: no LALM named {options['lalm']!r}") from None
        elif options["kind"] == Job.Kind.CANDIDATES:
            raise CommandError("--lalm is required for candidates")
        try:
            job = job_start(
                kind=options["kind"],
                benchmark=benchmark,
                lalm=lalm,
                external_ids=options["questions"],
                all_modalities=options["all_modalities"],
                overwrite=options["overwrite"],
                backend=options["backend"],
                model=options["model"],
                provider=options["provider"],
            )
        except JobStartError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            f"job {job.pk}: {job.get_kind_display()} of {job.total} items queued "
            f"(page {reverse('annotation:job', args=[job.pk])})"
        )
        if not options["wait"]:
            return
        job_follow(job=job, stdout=self.stdout)
