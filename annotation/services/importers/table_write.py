"""Phase 3 of the table importer: the checked plan written in the caller's transaction — the benchmark, LALMs,
import-only rater accounts, audio clips, questions with their versions (and their wait for audio), candidate
answers with their metadata, imported ratings and a toolkit judge's scores (PostgreSQL ``COPY`` for the many rows).

Changed question texts make a new question version (compared with the question's last imported version, so an
expert's later correction is not undone); a changed candidate answer replaces the stored one while nobody rated
it, and is refused once someone did; changed metadata, imported ratings and judge scores are updated.
"""
from __future__ import annotations

from collections import defaultdict

import orjson
from django.db.models import Count, F
from django.utils import timezone

from annotation.models import (
    LALM,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    ImportAccount,
    JudgeRating,
    Question,
    QuestionVersion,
    Rating,
)
from annotation.services.accounts import import_accounts_get_or_create
from annotation.services.audio import audio_clip_from_path
from annotation.services.importers.common import (
    _BULK_BATCH,
    _last_import_versions,
    _last_version_numbers,
    _make_current,
    _reimport_version,
    _rows_insert,
)
from annotation.services.importers.table_audio import AudioFound
from annotation.services.importers.table_mapping import (
    VERSION_FIELDS,
    ImportProblem,
    TableImportError,
    TableMapping,
    shown,
)
from annotation.services.importers.table_plan import Plan, PlannedCandidate
from annotation.services.importers.table_summary import TableImportSummary
from annotation.services.judge_comparison import IMPORTED_VARIANT as IMPORTED_JUDGE_VARIANT
from annotation.services.target_ratings import benchmark_target_ratings

#: Reason prefix of the question versions this importer makes.
TABLE_IMPORT_REASON = "Table import"


def write_plan(*, plan: Plan, mapping: TableMapping, benchmark_name: str, file_name: str, audio: AudioFound,
               dry_run: bool, summary: TableImportSummary, stored: list[str]) -> Benchmark:
    """Write the plan (call inside a transaction); appends the storage names of audio files it copied to
    ``stored``.

    Raises:
        TableImportError: a changed candidate answer that was already rated.
    """
    benchmark, summary.benchmark_created = Benchmark.objects.get_or_create(
        name=benchmark_name, defaults={"source": file_name})
    lalms = _write_lalms(plan, summary)
    accounts = _write_accounts(plan, mapping, benchmark, summary)
    clips: dict[str, AudioClip] = {}
    summary.audio_files = len(audio.located)
    if not dry_run:
        newest = AudioClip.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        for key, found in audio.located.items():
            clip = audio_clip_from_path(path=found.path, stored_name=found.stored_name, original_name=found.name)
            if clip.pk > newest and not found.stored_name:
                stored.append(clip.file.name)
            clips[key] = clip
    questions = _write_questions(plan=plan, benchmark=benchmark, reason=f"{TABLE_IMPORT_REASON} {file_name}",
                                 clips=clips, missing=audio.missing, summary=summary)
    writer = _CandidateWriter(plan=plan, benchmark=benchmark, mapping=mapping, questions=questions, lalms=lalms,
                              accounts=accounts, summary=summary)
    writer.write()
    if plan.judge_name:
        _write_judge_scores(plan, writer, summary)
    _queue_counts(plan, mapping, questions, summary)
    return benchmark


def _write_lalms(plan: Plan, summary: TableImportSummary) -> dict[str, LALM]:
    lalms = {}
    for name in sorted({c.lalm for c in plan.candidates.values()}):
        lalms[name], created = LALM.objects.get_or_create(name=name, defaults={"provider": LALM.Provider.IMPORT})
        if created:
            summary.lalms_created.append(name)
    summary.lalms = list(lalms)
    return lalms


def _write_accounts(plan: Plan, mapping: TableMapping, benchmark: Benchmark, summary: TableImportSummary) -> dict:
    raters = sorted({rating.rater for c in plan.candidates.values() for rating in c.ratings})
    if not raters:
        return {}
    known = ImportAccount.objects.count()
    accounts = import_accounts_get_or_create(namespace=mapping.rater_namespace or benchmark.name, rater_ids=raters)
    summary.raters = len(accounts)
    summary.rater_accounts_created = ImportAccount.objects.count() - known
    return accounts


def _question_meta(values: dict, clips: dict, missing: dict) -> dict:
    """Question fields (not versioned) from a planned question's values: only the mapped ones; a question whose
    audio was not found (``missing``) waits for it."""
    meta = {}
    if "modality" in values:
        meta["modality"], meta["modality_detail"] = values["modality"]
    for f in ("category", "sub_category", "choices"):
        if f in values:
            meta[f] = values[f]
    if "audio" in values:
        meta["audio_ref"] = values["audio"]
        if values["audio"] in clips:
            meta["audio"] = clips[values["audio"]]
        elif values["audio"] in missing:
            meta["status"] = Question.Status.AUDIO_MISSING
    return meta


def _apply_meta(question: Question, meta: dict, summary: TableImportSummary) -> bool:
    """Set an existing question's changed fields; its status only moves between active and waiting for audio
    (a retired question stays retired). True when something changed."""
    changed = False
    for attr, value in meta.items():
        if attr == "status":
            if question.status != Question.Status.ACTIVE or question.audio_id is not None:
                continue
        elif attr == "audio":
            if question.audio_id == value.pk:
                continue
            summary.audio_linked += 1
            if question.status == Question.Status.AUDIO_MISSING:
                question.status = Question.Status.ACTIVE
                summary.audio_attached += 1
        elif getattr(question, attr) == value:
            continue
        setattr(question, attr, value)
        changed = True
    return changed


def _write_questions(*, plan: Plan, benchmark: Benchmark, reason: str, clips: dict, missing: dict,
                     summary: TableImportSummary) -> dict[str, Question]:
    """Create the new questions (version 1 current) and update the changed ones; ``{key: question}``."""
    existing = {q.external_id: q for q in Question.objects.filter(benchmark=benchmark).select_related(
        "current_version").defer("extra", "current_version__transcript_segments")}
    # Only questions whose texts differ from their current version can need a new one (see _reimport_version):
    # their last import versions and version numbers are read, the others' never (a re-import of 100,000 rows).
    differing = [existing[key].pk for key, planned in plan.questions.items() if key in existing and any(
        getattr(existing[key].current_version, VERSION_FIELDS[f], None) != v
        for f, v in planned.values.items() if f in VERSION_FIELDS)]
    last_imported = _last_import_versions(differing) if differing else {}
    last_number = _last_version_numbers(differing) if differing else {}
    new_questions, new_versions, changed = [], [], []
    defaults = {"modality": "", "modality_detail": "unknown (table import)"}
    for key, planned in plan.questions.items():
        meta = _question_meta(planned.values, clips, missing)
        texts = {VERSION_FIELDS[f]: v for f, v in planned.values.items() if f in VERSION_FIELDS}
        question = existing.get(key)
        if question is None:
            question = Question(benchmark=benchmark, external_id=key, **{**defaults, **meta})
            new_questions.append(question)
            new_versions.append(QuestionVersion(
                question=question, number=1, source=QuestionVersion.Source.IMPORT, reason=reason,
                **{"question_text": "", "reference_answer": "", **texts}))
            summary.audio_linked += "audio" in meta
            continue
        is_changed = _apply_meta(question, meta, summary)
        version = _reimport_version(question, texts=texts, last_imported=last_imported, last_number=last_number,
                                    reason=reason)
        if version is not None:
            new_versions.append(version)
            is_changed = True
        if is_changed:
            changed.append(question)
            summary.questions_updated += 1
        else:
            summary.questions_unchanged += 1
    Question.objects.bulk_create(new_questions, batch_size=_BULK_BATCH)
    QuestionVersion.objects.bulk_create(new_versions, batch_size=_BULK_BATCH)
    Question.objects.bulk_update(changed, ["audio", "audio_ref", "modality", "modality_detail", "category",
                                           "sub_category", "choices", "status"], batch_size=_BULK_BATCH)
    _make_current(new_versions)
    summary.questions_created = len(new_questions)
    summary.versions_created = len(new_versions)
    existing.update((q.external_id, q) for q in new_questions)
    return existing


def _current_candidates(benchmark: Benchmark, lalm_ids: list[int], *, full: bool) -> dict[tuple[int, int], tuple]:
    """``{(question version pk, LALM pk): (pk, text, valid_rating_count, target_ratings, metadata)}`` of the
    benchmark's candidate answers on current versions; with ``full=False`` only ``(pk,)`` (less memory)."""
    fields = ("pk", "text", "valid_rating_count", "target_ratings", "metadata") if full else ("pk",)
    rows = CandidateAnswer.objects.filter(
        question_version__question__benchmark=benchmark, lalm_id__in=lalm_ids,
        question_version=F("question_version__question__current_version"),
    ).values_list("question_version_id", "lalm_id", *fields)
    return {(v, lalm): rest for v, lalm, *rest in rows.iterator(chunk_size=5000)}


class _CandidateWriter:
    """Creates or updates the candidate answers and their imported ratings, with their rating counts and, for
    rated answers, their own k (``imported_ratings``: ``complete`` = the ratings they have; ``need_k`` = their
    imported ratings + the benchmark's k). New rows go in by ``COPY`` straight from the plan (no list of 100,000
    tuples)."""

    def __init__(self, *, plan: Plan, benchmark: Benchmark, mapping: TableMapping, questions: dict[str, Question],
                 lalms: dict[str, LALM], accounts: dict, summary: TableImportSummary):
        self.plan, self.benchmark, self.questions, self.lalms = plan, benchmark, questions, lalms
        self.accounts, self.summary = accounts, summary
        self.k = benchmark_target_ratings(benchmark)
        self.need_k = mapping.imported_ratings == "need_k"
        self.lalm_ids = [lalm.pk for lalm in lalms.values()]
        self.existing = {} if summary.benchmark_created else _current_candidates(benchmark, self.lalm_ids, full=True)
        self.created: dict[tuple[int, int], tuple] = {}

    def where(self, planned: PlannedCandidate) -> tuple[int, int]:
        """(question version pk, LALM pk) of a planned answer."""
        return self.questions[planned.question].current_version_id, self.lalms[planned.lalm].pk

    def pk(self, planned: PlannedCandidate) -> int:
        key = self.where(planned)
        return (self.existing.get(key) or self.created[key])[0]

    def write(self) -> None:
        updates = self._update_existing()
        if self.summary.candidates_created:
            _rows_insert(CandidateAnswer, ["question_version_id", "lalm_id", "text", "source_job_id",
                                           "target_ratings", "priority", "valid_rating_count", "random_key",
                                           "metadata"], self._new_candidate_rows(), now_fields=["created_at"])
            self.created = _current_candidates(self.benchmark, self.lalm_ids, full=False)
        _rows_insert(Rating, ["candidate_id", "question_version_id", "annotator_id", "score", "codes", "comment",
                              "seconds_on_task", "audio_seconds_played", "source", "is_valid", "invalid_reason"],
                     self._new_rating_rows(updates["new_ratings"]), now_fields=["created_at", "updated_at"])
        for n, pks in updates["increments"].items():
            for start in range(0, len(pks), _BULK_BATCH):
                CandidateAnswer.objects.filter(pk__in=pks[start:start + _BULK_BATCH]).update(
                    valid_rating_count=F("valid_rating_count") + n)
        if updates["targets"]:
            CandidateAnswer.objects.bulk_update(
                [CandidateAnswer(pk=pk, target_ratings=t) for pk, t in updates["targets"].items()],
                ["target_ratings"], batch_size=_BULK_BATCH)
        Rating.objects.bulk_update(updates["updated_ratings"], ["score", "codes", "comment", "updated_at"],
                                   batch_size=_BULK_BATCH)
        self.summary.ratings_updated = len(updates["updated_ratings"])

    def _old_ratings(self) -> tuple[dict[tuple[int, int], tuple], dict[int, int]]:
        """The stored ratings of this import's accounts ``{(candidate, account): (pk, score, codes, comment)}``
        and, for ``need_k``, each candidate's number of valid imported ratings."""
        old, imported = {}, {}
        ratings = Rating.objects.filter(candidate__question_version__question__benchmark=self.benchmark,
                                        candidate__lalm_id__in=self.lalm_ids)
        if self.accounts:
            for pk, cid, aid, score, codes, comment in ratings.filter(
                    annotator_id__in=[user.pk for user in self.accounts.values()]).values_list(
                    "pk", "candidate_id", "annotator_id", "score", "codes", "comment").iterator(chunk_size=5000):
                old[(cid, aid)] = (pk, score, codes, comment)
        if self.need_k:
            imported = dict(ratings.filter(source=Rating.Source.IMPORT, is_valid=True).values(
                "candidate_id").annotate(n=Count("pk")).values_list("candidate_id", "n"))
        return old, imported

    def _update_existing(self) -> dict:
        """Compare the plan with the stored answers: count new ones, update changed texts and metadata, and
        collect the ratings to add, update and the counts and k to change."""
        old_ratings, imported_counts = self._old_ratings() if self.existing else ({}, {})
        out = {"new_ratings": [], "updated_ratings": [], "increments": defaultdict(list), "targets": {}}
        text_changes, changed = {}, {}
        for planned in self.plan.candidates.values():
            found = self.existing.get(self.where(planned))
            if found is None:
                self.summary.candidates_created += 1
                self.summary.ratings_created += len(planned.ratings)
                continue
            pk, text, valid_count, target, metadata = found
            merged = {**metadata, **(planned.metadata or {})}
            if text != planned.text:
                text_changes[pk] = planned
            if text != planned.text or merged != metadata:
                changed[pk] = CandidateAnswer(pk=pk, text=planned.text, metadata=merged)
            else:
                self.summary.candidates_unchanged += 1
            fresh = self._ratings_of(pk, planned, old_ratings, out)
            if fresh:
                out["increments"][fresh].append(pk)
            if planned.ratings:
                wanted = imported_counts.get(pk, 0) + fresh + self.k if self.need_k else valid_count + fresh
                if wanted != target:
                    out["targets"][pk] = wanted
        _refuse_rated_changes(text_changes, self.summary.file)
        CandidateAnswer.objects.bulk_update(list(changed.values()), ["text", "metadata"], batch_size=_BULK_BATCH)
        self.summary.candidates_updated = len(changed)
        return out

    def _ratings_of(self, pk: int, planned: PlannedCandidate, old_ratings: dict, out: dict) -> int:
        """Sort the planned ratings of a stored answer into new, updated and unchanged; returns how many are
        new."""
        fresh = 0
        for rating in planned.ratings:
            account = self.accounts[rating.rater].pk
            old = old_ratings.get((pk, account))
            if old is None:
                out["new_ratings"].append((pk, self.where(planned)[0], account, rating))
                fresh += 1
            elif old[1:] != (rating.score, rating.codes, rating.comment):
                out["updated_ratings"].append(Rating(pk=old[0], score=rating.score, codes=rating.codes,
                                                     comment=rating.comment, updated_at=timezone.now()))
            else:
                self.summary.ratings_unchanged += 1
        self.summary.ratings_created += fresh
        return fresh

    def _new_candidate_rows(self):
        for planned in self.plan.candidates.values():
            version_id, lalm_id = self.where(planned)
            if (version_id, lalm_id) not in self.existing:
                n = len(planned.ratings)
                target = (n + self.k if self.need_k else n) if n else None
                key = self.questions[planned.question].random_key  # the question's: every answer shares it
                yield (version_id, lalm_id, planned.text, None, target, 0, n, key,
                       orjson.dumps(planned.metadata or {}).decode())

    def _new_rating_rows(self, new_ratings: list):
        for cid, vid, aid, r in new_ratings:
            yield cid, vid, aid, r.score, r.codes, r.comment, None, None, Rating.Source.IMPORT, True, ""
        for planned in self.plan.candidates.values():
            key = self.where(planned)
            if planned.ratings and key not in self.existing:
                for r in planned.ratings:
                    yield (self.created[key][0], key[0], self.accounts[r.rater].pk, r.score, r.codes, r.comment,
                           None, None, Rating.Source.IMPORT, True, "")


def _refuse_rated_changes(text_changes: dict[int, PlannedCandidate], file: str) -> None:
    """Raise :class:`TableImportError` for every changed answer (``{candidate pk: planned}``) someone rated."""
    if not text_changes:
        return
    rated = set(Rating.objects.filter(candidate_id__in=list(text_changes)).values_list("candidate_id", flat=True))
    conflicts = [
        ImportProblem(row=planned.row, column=planned.column, value=shown(planned.text),
                      reason=f"differs from the stored candidate answer of LALM {planned.lalm!r}, which was rated "
                             "already (it is not overwritten)")
        for pk, planned in text_changes.items() if pk in rated
    ]
    if conflicts:
        raise TableImportError(file=file, problems=conflicts)


def _write_judge_scores(plan: Plan, writer: _CandidateWriter, summary: TableImportSummary) -> None:
    """The toolkit judge's scores as ``JudgeRating`` rows (no judge row: ``judge_name`` = ``plan.judge_name``,
    ``prompt_variant`` ``imported``); a failed parse is stored as a failure (no score). Re-imports update."""
    summary.judge, summary.judge_scale = plan.judge_name, plan.judge_scale.document()
    summary.judge_scale_guessed = plan.judge_scale_guessed
    scores = {writer.pk(c): c.judge for c in plan.candidates.values() if c.judge is not None}
    stored = {}
    for start in range(0, len(ids := list(scores)), 5000):
        stored.update((cid, (pk, score, explanation)) for cid, pk, score, explanation in JudgeRating.objects.filter(
            candidate_id__in=ids[start:start + 5000], judge_name=plan.judge_name,
            prompt_variant=IMPORTED_JUDGE_VARIANT).values_list("candidate_id", "pk", "score", "explanation"))
    changed = [JudgeRating(pk=stored[cid][0], score=j.score, explanation=j.explanation, raw_output=j.raw)
               for cid, j in scores.items() if cid in stored and stored[cid][1:] != (j.score, j.explanation)]
    new = [(cid, None, plan.judge_name, IMPORTED_JUDGE_VARIANT, JudgeRating._meta.get_field("mode").default,
            j.score, None, None, j.explanation, j.raw, None) for cid, j in scores.items() if cid not in stored]
    _rows_insert(JudgeRating, ["candidate_id", "judge_id", "judge_name", "prompt_variant", "mode", "score",
                               "expected_score", "distribution", "explanation", "raw_output", "job_id"], new,
                 now_fields=["created_at"])
    JudgeRating.objects.bulk_update(changed, ["score", "explanation", "raw_output"], batch_size=_BULK_BATCH)
    summary.judge_scores_created, summary.judge_scores_updated = len(new), len(changed)
    summary.judge_scores_unchanged = len(scores) - len(new) - len(changed)
    summary.judge_failures = sum(1 for j in scores.values() if j.score is None)


def _queue_counts(plan: Plan, mapping: TableMapping, questions: dict[str, Question],
                  summary: TableImportSummary) -> None:
    """How this import's answers stand in the annotators' queue: complete with their imported ratings, offered to
    annotators, or waiting for their question's audio."""
    waiting = {key for key, q in questions.items() if q.status == Question.Status.AUDIO_MISSING}
    summary.questions_waiting_audio = sum(1 for key in plan.questions if key in waiting)
    for planned in plan.candidates.values():
        if planned.ratings and mapping.imported_ratings == "complete":
            summary.answers_complete += 1
        elif planned.question in waiting:
            summary.answers_waiting_audio += 1
        else:
            summary.answers_open += 1
