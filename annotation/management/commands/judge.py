"""``python manage.py judge --judge NAME --benchmark B [--questions ID ...] [--wait]``.

Starts an LLM-judge job (ORCA paper, section 5.6) through :func:`annotation.services.judging.judge_job_start`
and prints its id and page. The items run on the Celery workers; ``--wait`` follows the progress until the job
ends. Running it again only asks for candidate answers the judge has not scored yet.
"""
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from annotation.management.jobwatch import job_follow
from annotation.models import Benchmark, Judge
from annotation.services.judging import JudgeJobError, judge_job_start


class Command(BaseCommand):
    help = "Start an LLM-judge job over a benchmark (or some of its questions)."

    def add_arguments(self, parser):
        parser.add_argument("--judge", required=True, help="Judge name (see the judges page or the admin).")
        parser.add_argument("--benchmark", required=True, help="Benchmark name.")
        parser.add_argument("--questions", nargs="+", metavar="ID", help="Only these benchmark question ids.")
        parser.add_argument("--wait", action="store_true", help="Print progress until the job ends.")

    def handle(self, *args, **options):
        try:
            judge = Judge.objects.get(name=options["judge"])
        except Judge.DoesNotExist:
            known = ", ".join(Judge.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"--judge: no judge named {options['judge']!r} (known: {known})") from None
        try:
            benchmark = Benchmark.objects.get(name=options["benchmark"])
        except Benchmark.DoesNotExist:
            raise CommandError(f"--benchmark: no benchmark named {options['benchmark']!r}") from None
        try:
            job = judge_job_start(judge=judge, benchmark=benchmark, external_ids=options["questions"])
        except JudgeJobError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            f"job {job.pk}: judge {judge.name} on {job.total} questions queued "
            f"(page {reverse('annotation:job', args=[job.pk])})"
        )
        if not options["wait"]:
            return
        job_follow(job=job, stdout=self.stdout)
