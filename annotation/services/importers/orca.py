"""ORCA annotation import: the seed-108 JSON files and the ORCA JSONL (the authors' release and our own export) as
questions' texts, candidate answers and human ratings (ORCA paper, section 3.2 and Appendix A)."""
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.codes import UNABLE_CODES, UnknownCodeError, normalize_codes
from annotation.models import LALM, Benchmark, CandidateAnswer, Question, QuestionVersion, Rating
from annotation.services.accounts import user_create_with_role
from annotation.services.importers.common import (
    _BULK_BATCH,
    _audit_import,
    _last_version_numbers,
    _make_current,
    _next_version,
)
from annotation.services.importers.reader import (
    ImportFormatError,
    _describe,
    _max_length,
    _read_json,
    _read_jsonl,
    _Record,
)
from annotation.services.versions import candidate_counts_refresh

#: ORCA annotation keys: ``<question id>_<LALM tag>``, the tag anonymous like ``M2_1``.
ORCA_KEY = re.compile(r"^(?P<question_id>.+)_(?P<tag>M\d+_\d+)$")

#: ORCA item field -> QuestionVersion field.
ORCA_TEXT_FIELDS = (
    ("question", "question_text"),
    ("reference", "reference_answer"),
    ("rationale", "rationale"),
    ("transcription", "transcript"),
)

#: Username of the imported annotator account for rating position ``n`` (1-based) of an ORCA item. Positions are
#: not identities: the ORCA files do not say which person gave which rating.
ORCA_ANNOTATOR_USERNAME = "orca-annotator-{position}"


@dataclass(frozen=True)
class _OrcaRating:
    position: int  # 1-based position in the item's ``ratings`` list
    score: int | None
    codes: str
    comment: str


@dataclass
class _OrcaItem:
    key: str
    where: str  # "key 'K'" (seed-108 JSON object) or "line N" (JSONL), for error messages
    question_id: str
    tag: str
    texts: dict[str, str]  # QuestionVersion field -> text
    candidate: str
    ratings: list[_OrcaRating]
    skipped: int  # null scores without U or E


@dataclass
class OrcaImportSummary:
    """Counts of one ORCA annotation import."""

    file: str
    questions_matched: int = 0
    questions_created: int = 0
    versions_created: int = 0
    candidates_created: int = 0
    candidates_existing: int = 0
    ratings_created: int = 0
    ratings_existing: int = 0
    skipped_unscored: int = 0  # null score whose codes hold neither U nor E: not a rating the database can hold

    def __str__(self) -> str:
        return (
            f"{self.file}: questions matched {self.questions_matched}, created {self.questions_created}; "
            f"question versions created {self.versions_created}; "
            f"candidates created {self.candidates_created}, already present {self.candidates_existing}; "
            f"ratings created {self.ratings_created}, already present {self.ratings_existing}; "
            f"skipped: unscored without U/E {self.skipped_unscored}"
        )


def _orca_score(record: _Record, index: int, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"score {value!r} is {_describe(value)}, expected an integer 1-5 or null"
        raise record.error(f"ratings[{index}]", problem)
    if not 1 <= value <= 5:
        raise record.error(f"ratings[{index}]", f"score {value} is outside 1-5")
    return value


def _orca_feedback(record: _Record, index: int, value) -> tuple[str, str]:
    """(canonical codes, comment) from one feedback entry: null, or a list of one-letter codes and free text."""
    if value is None:
        return "", ""
    if not isinstance(value, list):
        raise record.error(f"feedback[{index}]", f"expected null or a list, got {_describe(value)}")
    letters, lines = [], []
    for position, entry in enumerate(value):
        name = f"feedback[{index}][{position}]"
        if not isinstance(entry, str):
            raise record.error(name, f"expected a string, got {_describe(entry)}")
        if len(entry.strip()) == 1:
            try:
                letters.append(normalize_codes(entry.strip()))
            except UnknownCodeError as exc:
                raise record.error(name, str(exc)) from exc
        elif entry.strip():
            lines.append(entry)
    return normalize_codes("".join(letters)), "\n".join(lines)


def _orca_item(file: str, key: str, value) -> _OrcaItem:
    record = _Record(file=file, where=f"key {key!r}", data=value)
    match = ORCA_KEY.match(key)
    if match is None:
        raise record.error("", "key is not '<question id>_<LALM tag>' with a tag like M2_1")
    texts = {model_field: record.text(source) for source, model_field in ORCA_TEXT_FIELDS}
    return _orca_item_from(record, key=key, question_id=match["question_id"], tag=match["tag"], texts=texts,
                           feedback_required=True)


def _orca_item_from(
    record: _Record, *, key: str, question_id: str, tag: str, texts: dict[str, str], feedback_required: bool
) -> _OrcaItem:
    if len(question_id) > _max_length(Question, "external_id"):
        raise record.error("", f"question id longer than {_max_length(Question, 'external_id')} characters")
    candidate = record.text("candidate")
    scores = record.data.get("ratings")
    feedback = record.data.get("feedback")
    if "feedback" not in record.data and not feedback_required and isinstance(scores, list):
        feedback = [None] * len(scores)
    for name, values in (("ratings", scores), ("feedback", feedback)):
        if name not in record.data and (name == "ratings" or feedback_required):
            raise record.error(name, "missing")
        if not isinstance(values, list):
            raise record.error(name, f"expected a list, got {_describe(values)}")
    if len(feedback) != len(scores):
        raise record.error("feedback", f"has {len(feedback)} entries but ratings has {len(scores)}")
    ratings, skipped = [], 0
    for index, (raw_score, raw_feedback) in enumerate(zip(scores, feedback, strict=True)):
        score = _orca_score(record, index, raw_score)
        codes, comment = _orca_feedback(record, index, raw_feedback)
        if score is None and not UNABLE_CODES & set(codes):
            skipped += 1
            continue
        ratings.append(_OrcaRating(position=index + 1, score=score, codes=codes, comment=comment))
    return _OrcaItem(
        key=key,
        where=record.where,
        question_id=question_id,
        tag=tag,
        texts=texts,
        candidate=candidate,
        ratings=ratings,
        skipped=skipped,
    )


def _orca_jsonl_item(record: _Record, seen: dict[str, str]) -> _OrcaItem:
    """One line of the ORCA authors' JSONL (or of our ORCA JSONL export, which adds ``lalm``)."""
    item_id = record.text("id", max_length=_max_length(Question, "external_id") + _max_length(LALM, "name") + 1)
    if not item_id:
        raise record.error("id", "is empty")
    if item_id in seen:
        raise record.error("id", f"{item_id!r} repeats {seen[item_id]}")
    seen[item_id] = record.where
    lalm = record.data.get("lalm")
    if lalm is not None:
        lalm = record.text("lalm", max_length=_max_length(LALM, "name"))
        if not lalm or not item_id.endswith("_" + lalm) or len(item_id) == len(lalm) + 1:
            raise record.error("lalm", f"{lalm!r} is not the end of id {item_id!r} ('<question id>_<LALM>')")
        question_id = item_id[: -len(lalm) - 1]
    else:
        match = ORCA_KEY.match(item_id)
        if match is None:
            raise record.error("id", f"{item_id!r} is not '<question id>_<LALM tag>' with a tag like M2_1")
        question_id, lalm = match["question_id"], match["tag"]
    texts = {
        "question_text": record.text("question"),
        "reference_answer": record.text("reference"),
        "rationale": record.text("rationale", null_ok=True),
        "transcript": record.text("transcription", required=False, null_ok=True),
    }
    return _orca_item_from(record, key=item_id, question_id=question_id, tag=lalm, texts=texts,
                           feedback_required=False)


def _check_one_text_per_question(file: str, items: Iterable[_OrcaItem]) -> None:
    first: dict[str, _OrcaItem] = {}
    for item in items:
        seen = first.setdefault(item.question_id, item)
        for source, model_field in ORCA_TEXT_FIELDS:
            if item.texts[model_field] != seen.texts[model_field]:
                raise ImportFormatError(
                    file=file,
                    where=item.where,
                    field=source,
                    problem=f"differs from {seen.where} of the same question (a file holds one version of it)",
                )


def ratings_import_orca(*, path: Path, benchmark_name: str = "ORCA imported") -> OrcaImportSummary:
    """Import an ORCA annotation file: questions' texts, candidate answers and human ratings.

    Input (ORCA paper section 3.2, Appendix A; ``BUTSpeechFIT/ORCA`` ``data/seed_108``): a JSON object keyed
    ``<question id>_<LALM tag>`` (tag like ``M2_1``), each value {question, reference, rationale, transcription,
    candidate, ratings: list of 1–5 or null, feedback: parallel list of null or a list of one-letter codes
    a/e/r/u/q and free-text strings}.

    Questions are matched by ``external_id`` across all benchmarks (preferring ``benchmark_name`` when an id is in
    several); unmatched ones are created in the benchmark ``benchmark_name``. When an item's texts differ from
    its question's current version, a new version (source import, reason "ORCA annotations <file name>") becomes
    current; all items of a question share it. LALMs are created by tag (provider import). Each item becomes one
    candidate answer; each rating position ``n`` is the account ``orca-annotator-<n>`` (annotator group, unusable
    password). A non-null score becomes a rating with its codes (canonical, upper case) and the free texts joined
    by newlines as comment; a null score is kept only with code U or E and is otherwise skipped and counted.
    ``CandidateAnswer.valid_rating_count`` is refreshed. Re-importing the same file changes nothing.

    Raises:
        ImportFormatError: malformed JSON, a bad key, a missing or mistyped field, a score that is not an integer
            1–5 or null, an unknown code, items of one question with different texts, a candidate text that
            differs from the stored candidate answer, an id found in several benchmarks; nothing is written.
    """
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ImportFormatError(
            file=path.name, problem=f"expected a JSON object keyed '<question id>_<LALM tag>', got {_describe(data)}"
        )
    items = [_orca_item(path.name, key, value) for key, value in data.items()]
    _check_one_text_per_question(path.name, items)
    with transaction.atomic():
        summary = _orca_write(path=path, items=items, benchmark_name=benchmark_name)
        _audit_import(action="import.orca_ratings", path=path, obj=None, summary=summary)
        return summary


def ratings_import_orca_jsonl(*, path: Path, benchmark_name: str = "ORCA imported") -> OrcaImportSummary:
    """Import the ORCA authors' JSONL annotations (their released dataset, e.g. from Hugging Face; also our own
    ORCA JSONL export): one JSON object per line with ``id`` ("<question id>_<LALM tag>", or any LALM name when the
    line has ``lalm`` as our export writes), ``question``, ``reference``, ``rationale`` (string or null),
    ``candidate``, ``ratings`` (list of 1–5 or null), and optionally ``transcription`` and ``feedback`` (the parallel
    list of the seed-108 format; all null when absent). Other fields are ignored.

    Everything else is as :func:`ratings_import_orca` (questions matched by id, a new version when texts differ,
    LALMs by tag, rating position n → account ``orca-annotator-<n>``, re-import changes nothing), in one transaction.

    Raises:
        ImportFormatError: ``<file>: line N: field <name>: <problem>`` for malformed JSON, a missing or mistyped
            field, a bad or repeated id, a score that is not an integer 1–5 or null, an unknown code, lines of one
            question with different texts, or a candidate text that differs from the stored one; nothing is written.
    """
    path = Path(path)
    seen: dict[str, str] = {}
    items = [_orca_jsonl_item(record, seen) for record in _read_jsonl(path)]
    if not items:
        raise ImportFormatError(file=path.name, problem="no annotation lines")
    _check_one_text_per_question(path.name, items)
    with transaction.atomic():
        summary = _orca_write(path=path, items=items, benchmark_name=benchmark_name)
        _audit_import(action="import.orca_ratings", path=path, obj=None, summary=summary)
        return summary


def _orca_questions(
    *, path: Path, items: list[_OrcaItem], benchmark_name: str, summary: "OrcaImportSummary"
) -> dict[str, Question]:
    """external_id -> Question for every item, creating the missing ones in ``benchmark_name``."""
    first_key = {}
    for item in items:
        first_key.setdefault(item.question_id, item.where)
    found = defaultdict(list)
    for question in Question.objects.filter(external_id__in=list(first_key)).select_related(
        "benchmark", "current_version"
    ):
        found[question.external_id].append(question)
    questions, missing = {}, []
    for question_id, key in first_key.items():
        matches = found.get(question_id, [])
        if len(matches) > 1:
            matches = [q for q in matches if q.benchmark.name == benchmark_name] or matches
        if len(matches) > 1:
            names = ", ".join(sorted(q.benchmark.name for q in matches))
            raise ImportFormatError(
                file=path.name,
                where=key,
                problem=f"question id {question_id!r} is in several benchmarks ({names}); choose one with --benchmark",
            )
        if matches:
            questions[question_id] = matches[0]
        else:
            missing.append(question_id)
    summary.questions_matched = len(questions)
    if missing:
        benchmark, _ = Benchmark.objects.get_or_create(name=benchmark_name, defaults={"source": path.name})
        # ORCA files do not say the modality: left blank for an expert to set.
        created = [Question(benchmark=benchmark, external_id=qid, modality_detail="unknown (ORCA)") for qid in missing]
        Question.objects.bulk_create(created, batch_size=_BULK_BATCH)
        questions.update((q.external_id, q) for q in created)
        summary.questions_created = len(created)
    return questions


def _orca_write(*, path: Path, items: list[_OrcaItem], benchmark_name: str) -> OrcaImportSummary:
    """Write the checked items (inside the caller's transaction): questions and their versions, LALMs and
    candidate answers, then the annotators' accounts and ratings."""
    summary = OrcaImportSummary(file=path.name)
    questions = _orca_questions(path=path, items=items, benchmark_name=benchmark_name, summary=summary)
    _orca_write_versions(path=path, items=items, questions=questions, summary=summary)
    candidates = _orca_write_candidates(path=path, items=items, questions=questions, summary=summary)
    _orca_write_ratings(items=items, candidates=candidates, summary=summary)
    return summary


def _orca_write_versions(*, path: Path, items: list[_OrcaItem], questions: dict, summary: OrcaImportSummary) -> None:
    """One new version per question whose current texts differ from the file's."""
    last_number = _last_version_numbers([q.pk for q in questions.values()])
    texts = {item.question_id: item.texts for item in items}
    new_versions = []
    for question_id, question in questions.items():
        number = last_number.get(question.pk, 0) + 1
        reason = f"ORCA annotations {path.name}"
        version = _next_version(question, number=number, changes=texts[question_id], reason=reason)
        if version is not None:
            new_versions.append(version)
    QuestionVersion.objects.bulk_create(new_versions, batch_size=_BULK_BATCH)
    _make_current(new_versions)
    summary.versions_created = len(new_versions)


def _orca_write_candidates(*, path: Path, items: list[_OrcaItem], questions: dict,
                           summary: OrcaImportSummary) -> dict[str, CandidateAnswer]:
    """The LALMs and candidate answers of the items, ``{item key: candidate}``; a stored answer that differs is
    refused."""
    lalms = {
        tag: LALM.objects.get_or_create(name=tag, defaults={"provider": LALM.Provider.IMPORT})[0]
        for tag in sorted({item.tag for item in items})
    }
    version_ids = {q.current_version.pk for q in questions.values()}
    existing = {
        (c.question_version_id, c.lalm_id): c
        for c in CandidateAnswer.objects.filter(lalm__in=list(lalms.values()))
        if c.question_version_id in version_ids
    }
    candidates, new_candidates = {}, []
    for item in items:
        version, lalm = questions[item.question_id].current_version, lalms[item.tag]
        candidate = existing.get((version.pk, lalm.pk))
        if candidate is None:
            candidate = CandidateAnswer(question_version=version, lalm=lalm, text=item.candidate)
            new_candidates.append(candidate)
        elif candidate.text != item.candidate:
            raise ImportFormatError(
                file=path.name,
                where=item.where,
                field="candidate",
                problem=f"differs from the stored candidate answer of LALM {lalm.name!r} on question version "
                f"{version.number}",
            )
        else:
            summary.candidates_existing += 1
        candidates[item.key] = candidate
    CandidateAnswer.objects.bulk_create(new_candidates, batch_size=_BULK_BATCH)
    summary.candidates_created = len(new_candidates)
    return candidates


def _orca_write_ratings(*, items: list[_OrcaItem], candidates: dict[str, CandidateAnswer],
                        summary: OrcaImportSummary) -> None:
    """The imported annotators' accounts and their ratings (those not stored yet); the valid rating counts."""
    positions = sorted({rating.position for item in items for rating in item.ratings})
    usernames = {position: ORCA_ANNOTATOR_USERNAME.format(position=position) for position in positions}
    for username in usernames.values():
        user_create_with_role(username=username, role="annotator", password=None)
    users = {u.username: u for u in get_user_model().objects.filter(username__in=list(usernames.values()))}
    annotators = {position: users[username] for position, username in usernames.items()}
    candidate_ids = {c.pk for c in candidates.values()}
    rated = Rating.objects.filter(annotator__in=list(annotators.values())).values_list("candidate_id", "annotator_id")
    already_rated = {pair for pair in rated if pair[0] in candidate_ids}
    new_ratings = []
    for item in items:
        candidate = candidates[item.key]
        summary.skipped_unscored += item.skipped
        for rating in item.ratings:
            annotator = annotators[rating.position]
            if (candidate.pk, annotator.pk) in already_rated:
                summary.ratings_existing += 1
                continue
            new_ratings.append(Rating(candidate=candidate, question_version=candidate.question_version,
                                      annotator=annotator, score=rating.score, codes=rating.codes,
                                      comment=rating.comment, source=Rating.Source.IMPORT))
    Rating.objects.bulk_create(new_ratings, batch_size=_BULK_BATCH)
    summary.ratings_created = len(new_ratings)
    _refresh_valid_rating_counts(candidate_ids)


def _refresh_valid_rating_counts(candidate_ids: Iterable[int]) -> None:
    """Set ``valid_rating_count`` of these candidate answers to their number of valid ratings, in batches."""
    ids = sorted(candidate_ids)
    for start in range(0, len(ids), _BULK_BATCH):
        candidate_counts_refresh(candidates=CandidateAnswer.objects.filter(pk__in=ids[start : start + _BULK_BATCH]))
