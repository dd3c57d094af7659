"""Candidate-answer import: an LALM's answers (JSONL) as candidate answers on the questions' current versions."""
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.db.models import Count

from annotation.models import LALM, Benchmark, CandidateAnswer, Question
from annotation.services.importers.common import _BULK_BATCH, _audit_import
from annotation.services.importers.reader import ImportFormatError, _max_length, _read_jsonl, _Record


@dataclass
class CandidateImportSummary:
    """Counts of one candidate-answer import: created, updated (text changed, no ratings yet), unchanged."""

    lalm: LALM
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def __str__(self) -> str:
        return (
            f"{self.lalm.name}: {self.created} candidate answers created, {self.updated} updated, "
            f"{self.unchanged} unchanged"
        )


def candidate_answers_import(
    *, path: Path, lalm_name: str, benchmark_name: str, field: str = "answer_prediction"
) -> CandidateImportSummary:
    """Import an LALM's answers (JSONL: ``id`` and the answer at ``field``) as candidate answers.

    Each line's ``id`` is a question's ``external_id`` in the benchmark named ``benchmark_name``; the candidate
    answer is attached to that question's current version. The LALM is created by name (provider "import") when
    absent. Re-importing the same file changes nothing; a changed answer replaces the stored text only while that
    candidate answer has no ratings.

    Raises:
        ImportFormatError: malformed line, missing or non-string field, duplicate id, unknown benchmark, unknown
            question id, or a changed answer for a candidate that already has ratings; nothing is written.
    """
    path = Path(path)
    records = _read_jsonl(path)
    answers: list[tuple[_Record, str, str]] = []
    first: dict[str, str] = {}
    for record in records:
        external_id = record.text("id")
        text = record.text(field)
        if external_id in first:
            raise record.error("id", f"duplicate id {external_id!r} (first at {first[external_id]})")
        first[external_id] = record.where
        answers.append((record, external_id, text))
    if len(lalm_name) > _max_length(LALM, "name") or not lalm_name.strip():
        raise ImportFormatError(file=path.name, problem=f"LALM name {lalm_name!r} is empty or too long")
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    if benchmark is None:
        raise ImportFormatError(
            file=path.name, problem=f"benchmark {benchmark_name!r} does not exist (import it with import_benchmark)"
        )
    version_ids = dict(Question.objects.filter(benchmark=benchmark).values_list("external_id", "current_version_id"))
    for record, external_id, _ in answers:
        if external_id not in version_ids:
            raise record.error("id", f"no question {external_id!r} in benchmark {benchmark.name!r}")
        if version_ids[external_id] is None:
            raise record.error("id", f"question {external_id!r} has no current version")

    with transaction.atomic():
        lalm, _ = LALM.objects.get_or_create(name=lalm_name, defaults={"provider": LALM.Provider.IMPORT})
        summary = CandidateImportSummary(lalm=lalm)
        existing = {
            candidate.question_version_id: candidate
            for candidate in CandidateAnswer.objects.filter(
                lalm=lalm, question_version__question__benchmark=benchmark
            ).annotate(n_ratings=Count("ratings"))
        }
        new, changed = [], []
        for record, external_id, text in answers:
            candidate = existing.get(version_ids[external_id])
            if candidate is None:
                new.append(CandidateAnswer(question_version_id=version_ids[external_id], lalm=lalm, text=text))
            elif candidate.text == text:
                summary.unchanged += 1
            elif candidate.n_ratings:
                raise record.error(
                    field,
                    f"differs from the stored candidate answer of LALM {lalm.name!r}, which has ratings "
                    "(not overwritten)",
                )
            else:
                candidate.text = text
                changed.append(candidate)
        CandidateAnswer.objects.bulk_create(new, batch_size=_BULK_BATCH)
        CandidateAnswer.objects.bulk_update(changed, ["text"], batch_size=_BULK_BATCH)
        summary.created, summary.updated = len(new), len(changed)
        _audit_import(action="import.candidates", path=path, obj=lalm, summary=summary)
    return summary
