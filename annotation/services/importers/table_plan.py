"""Phase 1 of the table importer: every row checked against the mapping and grouped into a plan of questions,
candidate answers (with their metadata and a toolkit judge's score) and ratings; every problem collected with its
row, column and value (README, "Your own benchmark").

Identity, so that importing the same table again updates instead of duplicating: a question is its benchmark's
``question_id`` (``Question.external_id``); or the values of its ``question_key`` columns (``"a | b"``, or
``k-<20 hex digits>`` of them when long); or the hash of its audio and question text (``q-<20 hex digits>``)
when neither is mapped; or the n-th question of the benchmark in import order (``position``); or, with
``"match": "question_text"``, the benchmark's question with that text (:mod:`.table_match`). A candidate answer
is (question, LALM): every row of one pair must agree on its text, metadata and judge score.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import annotation.services.importers.table_cells as cells
from annotation.codes import UnknownCodeError, normalize_codes
from annotation.models import LALM, Question
from annotation.services.importers.reader import _max_length
from annotation.services.importers.table_guess import judge_guess
from annotation.services.importers.table_locate import AudioLocator, is_missing
from annotation.services.importers.table_mapping import ImportProblem, RatingScale, TableMapping, shown
from annotation.services.importers.table_match import QuestionIndex
from annotation.services.importers.table_sources import Table

#: At most this many problems are listed (the count says how many there were).
MAX_PROBLEMS = 1000
#: ``progress(phase, done, total)`` is called every this many rows.
PROGRESS_EVERY = 5000
#: Rows read into Python objects at a time: the plan keeps what it needs, the rest of a chunk is freed (100,000
#: rows' cells at once cost about 170 MB).
CHUNK_ROWS = 10_000

Progress = Callable[[str, int, int], None]


@dataclass(slots=True)
class PlannedQuestion:
    key: str
    row: int
    values: dict  # field -> value read (only mapped fields); "audio" holds the audio key
    audio_value: object = None


@dataclass(slots=True)
class PlannedRating:
    rater: str
    score: int
    codes: str
    comment: str
    row: int


@dataclass(slots=True)
class PlannedJudgeScore:
    score: float | None  # 1–5; None: the judge's reply was not parsed (a failure)
    raw: str
    explanation: str
    row: int


@dataclass(slots=True)
class PlannedCandidate:
    question: str
    lalm: str
    text: str
    row: int
    column: str
    ratings: list[PlannedRating] = field(default_factory=list)  # a list, not a dict: 100,000 answers hold one each
    metadata: dict | None = None
    judge: PlannedJudgeScore | None = None


@dataclass
class Plan:
    """What the table holds, checked: questions by key, candidate answers by (question key, LALM), the problems
    (at most ``MAX_PROBLEMS`` listed, ``n_problems`` counted), the rows left out (``"unmatched": "skip"``), and
    the toolkit judge's name and scale when a judge score column is mapped."""

    rows: int = 0
    questions: dict[str, PlannedQuestion] = field(default_factory=dict)
    candidates: dict[tuple[str, str], PlannedCandidate] = field(default_factory=dict)
    problems: list[ImportProblem] = field(default_factory=list)
    n_problems: int = 0
    skipped: list[ImportProblem] = field(default_factory=list)
    judge_name: str = ""
    judge_scale: RatingScale | None = None
    judge_scale_guessed: bool = False

    def problem(self, reason: str, *, row: int | None = None, column: str = "", value=None, key: str = "") -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(ImportProblem(reason=reason, row=row, column=column,
                                               value=None if value is None else shown(value), key=key))


@dataclass
class Context:
    """What the planner needs to know of the store: the benchmark's questions, in import order, and (to match
    rows by question text) their texts."""

    exists: bool = False
    positions: list[str] = field(default_factory=list)
    external_ids: set[str] = field(default_factory=set)
    index: QuestionIndex | None = None


def _rows_in_chunks(table: Table, columns: dict, lalm_columns: dict[str, dict[str, str]]):
    """``(row index, index in chunk, {key: chunk values}, {LALM: {"candidate"/"rating": chunk values}})`` for
    every row, reading ``CHUNK_ROWS`` rows of the mapped columns at a time."""
    for start in range(0, table.n_rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, table.n_rows)
        values = {f: table.column(c, start, stop) for f, c in columns.items()}
        wide = {name: {k: table.column(c, start, stop) for k, c in spec.items()}
                for name, spec in lalm_columns.items()}
        for i in range(stop - start):
            yield start + i, i, values, wide


def composite_key(parts: list[str]) -> str:
    """The question id of a ``question_key``: its values joined by `` | `` (readable), or ``k-`` and 20 hex
    digits of their SHA-256 when that would be over 200 characters or a value holds ``|``."""
    joined = " | ".join(parts)
    if len(joined) <= 200 and not any("|" in p for p in parts):
        return joined
    return "k-" + hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()[:20]


class RowReader:
    """Reads one row at a time into the plan (see :func:`plan_table`); problems go to the plan, named by row,
    column and value. ``columns`` maps what is read (a field, ``("key", i)`` or ``("meta", name)``) to its
    column."""

    def __init__(self, *, plan: Plan, mapping: TableMapping, context: Context, columns: dict,
                 lalm_columns: dict[str, dict[str, str]], locator: AudioLocator | None):
        self.plan, self.mapping, self.context, self.locator = plan, mapping, context, locator
        self.columns, self.lalm_columns = columns, lalm_columns
        self.key_reads = [k for k in columns if isinstance(k, tuple) and k[0] == "key"]
        # Rows naming existing questions (by text, or by position with their text to check): their question texts
        # identify, they are not written.
        self.by_text = bool(mapping.match) or ("position" in columns and "question" in columns)
        self.meta_reads = [k for k in columns if isinstance(k, tuple) and k[0] == "meta"]
        self.constant: dict = {}  # question fields every row gets from the mapping's defaults
        if "modality" not in columns and mapping.defaults.get("modality"):
            self.constant["modality"] = (mapping.defaults["modality"], mapping.defaults["modality"])
        if "category" not in columns and mapping.defaults.get("category"):
            self.constant["category"] = mapping.defaults["category"]
        self.id_length = _max_length(Question, "external_id")
        self.audio_length = _max_length(Question, "audio_ref")
        self.lalm_length = _max_length(LALM, "name")

    def bad(self, row: int, f, reason: str, value=None) -> None:
        self.plan.problem(reason, row=row, column=self.columns.get(f, f if isinstance(f, str) else ""), value=value)

    def row(self, row: int, values: dict, i: int, wide: dict) -> None:
        """Read data row ``row`` (1-based): cell ``values[key][i]``, the wide layout's ``wide[LALM][...][i]``."""
        key = self._question(row, values, i)
        if key is None:
            return
        if self.mapping.layout == "long":
            lalm = self.mapping.defaults.get("lalm", "")
            if "lalm" in values:
                lalm = cells.required(values["lalm"][i], max_length=self.lalm_length, what="its LALM",
                                      complain=lambda reason, value: self.bad(row, "lalm", reason, value))
                if lalm is None:
                    return
            answers = [(lalm, values["candidate"][i], self.columns["candidate"],
                        values["rating"][i] if "rating" in values else None, self.columns.get("rating", ""))]
        else:
            answers = [(name, c["candidate"][i], self.lalm_columns[name]["candidate"],
                        c["rating"][i] if "rating" in c else None, self.lalm_columns[name].get("rating", ""))
                       for name, c in wide.items() if not is_missing(c["candidate"][i])]
        extras = self._answer_extras(row, values, i)
        if extras is None:
            return
        for lalm, value, column, rating_value, rating_column in answers:
            candidate = self._candidate(row, key, lalm, value, column, *extras)
            if candidate is not None and not is_missing(rating_value):
                self._rating(row, values, i, candidate, rating_value, rating_column)

    def _question_values(self, row: int, values: dict, i: int) -> dict | None:
        """The question fields of the row (and its audio key), or None after a problem."""
        question_values: dict = dict(self.constant)
        ok = True
        for f, read in cells.QUESTION_READERS.items():
            if f in values and not is_missing(value := values[f][i]):
                try:
                    question_values[f] = read(value)
                except cells.Bad as exc:
                    self.bad(row, f, str(exc), value)
                    ok = False
        audio_value = values["audio"][i] if "audio" in values else None
        if not is_missing(audio_value) and self.locator is not None:
            try:
                question_values["audio"] = self.locator.key(audio_value)
                if len(question_values["audio"]) > self.audio_length:
                    raise cells.Bad(f"longer than {self.audio_length} characters")
            except ValueError as exc:
                self.bad(row, "audio", str(exc), audio_value)
                ok = False
        return question_values if ok else None

    def _question(self, row: int, values: dict, i: int) -> str | None:
        """The key of the row's question, planned or checked against its earlier rows; None after a problem or
        for a row left out."""
        question_values = self._question_values(row, values, i)
        key = self._key(row, values, i, question_values) if question_values is not None else None
        if key is None:
            return None
        if self.by_text:  # the row named an existing question; its texts were only for finding it
            self.plan.questions.setdefault(key, PlannedQuestion(key=key, row=row, values={}))
            return key
        question = self.plan.questions.get(key)
        if question is None:
            if key not in self.context.external_ids and not self._new_question_ok(row, values, i, key,
                                                                                   question_values):
                return None
            audio_value = values["audio"][i] if "audio" in values else None
            self.plan.questions[key] = PlannedQuestion(key=key, row=row, values=question_values,
                                                       audio_value=audio_value)
            return key
        for f, value in question_values.items():
            if question.values.get(f, value) != value:
                self.bad(row, f, f"differs from row {question.row} of the same question "
                                 f"({shown(question.values[f])})", values[f][i] if f in values else value)
        if question.values.keys() - question_values.keys():
            missing = sorted(question.values.keys() - question_values.keys())
            self.bad(row, missing[0], f"missing, but row {question.row} of the same question has it")
        return key

    def _new_question_ok(self, row: int, values: dict, i: int, key: str, question_values: dict) -> bool:
        ok = True
        for f in ("question", "reference"):
            if not question_values.get(f, "").strip():
                self.bad(row, f, f"no question {key!r} in the benchmark yet, and its {f} is "
                                 f"{'empty' if f in values else 'not mapped'}", values[f][i] if f in values else None)
                ok = False
        return ok

    def _key(self, row: int, values: dict, i: int, question_values: dict) -> str | None:
        """What identifies the row's question: its id, its key columns, the question with its text, the id at its
        position, or the hash of its audio and text."""
        if "question_id" in values:
            return cells.required(values["question_id"][i], max_length=self.id_length, what="its question's id",
                                  complain=lambda reason, value: self.bad(row, "question_id", reason, value))
        if self.key_reads:
            parts = []
            for read in self.key_reads:
                part = cells.required(values[read][i], max_length=self.id_length, what="its question_key columns",
                                      complain=lambda reason, value, r=read: self.bad(row, r, reason, value))
                if part is None:
                    return None
                parts.append(part)
            return composite_key(parts)
        if self.mapping.match:
            return self._matched(row, values, i, question_values)
        if "position" in values:
            key = self._at_position(row, values["position"][i])
            return key if key is None or not self.by_text else self._verified(row, values, i, key, question_values)
        text = question_values.get("question", "")
        if not text.strip():
            self.bad(row, "question", "empty: without question_id the question text identifies the question",
                     values["question"][i])
            return None
        identity = f"{question_values.get('audio', '')}\x00{text}"
        return "q-" + hashlib.sha256(identity.encode()).hexdigest()[:20]

    def _verified(self, row: int, values: dict, i: int, key: str, question_values: dict) -> str | None:
        """``key`` (the question at the row's position) when the row's question text is that question's; a row
        whose text is another question's is a problem (or a reported skip): never matched by position alone."""
        text = question_values.get("question", "")
        if not text.strip() or self.context.index.agrees(key, text):
            return key
        return self._unmatched(row, values, i, f"the question at this position is {key!r}, whose text differs")

    def _unmatched(self, row: int, values: dict, i: int, reason: str) -> None:
        """Report a row whose question is not the benchmark's: a problem, or with ``"unmatched": "skip"`` a row
        left out."""
        problem = ImportProblem(reason=reason + (": left out" if self.mapping.unmatched == "skip" else ""),
                                row=row, column=self.columns["question"], value=shown(values["question"][i]))
        if self.mapping.unmatched == "skip":
            self.plan.skipped.append(problem)
        else:
            self.plan.problem(reason + " (left out with --skip-unmatched)", row=row, column=problem.column,
                              value=values["question"][i])

    def _at_position(self, row: int, value) -> str | None:
        positions = self.context.positions
        try:
            n = cells.position(value)
            if not 0 <= n < len(positions):
                raise cells.Bad(f"no question at this position: the benchmark has {len(positions)} "
                                "(positions count from 0)")
        except cells.Bad as exc:
            self.bad(row, "position", str(exc), value)
            return None
        return positions[n]

    def _matched(self, row: int, values: dict, i: int, question_values: dict) -> str | None:
        """The benchmark's question with the row's text (:mod:`.table_match`); a row that fits none is a problem,
        or with ``"unmatched": "skip"`` a row left out and reported."""
        text = question_values.get("question", "")
        found = self.context.index.match(text, reference=question_values.get("reference", ""))
        if found.external_id is not None:
            return found.external_id
        return self._unmatched(row, values, i, found.reason)

    def _answer_extras(self, row: int, values: dict, i: int) -> tuple[dict | None, PlannedJudgeScore | None] | None:
        """The row's candidate metadata and judge score (None after a problem)."""
        metadata = {}
        for read in self.meta_reads:
            if not is_missing(value := values[read][i]):
                try:
                    metadata[read[1]] = cells.metadata_value(value)
                except cells.Bad as exc:
                    self.bad(row, read, str(exc), value)
                    return None
        judge = None
        if "judge_score" in values and not is_missing(values["judge_score"][i]):
            judge = self._judge_score(row, values, i)
            if judge is None:
                return None
        return (metadata if self.meta_reads else None), judge

    def _judge_score(self, row: int, values: dict, i: int) -> PlannedJudgeScore | None:
        """The row's judge score on 1–5 (None: the judge's reply was not parsed), raw value and explanation."""
        cell = {f: values[f][i] for f in ("judge_score", "judge_success", "judge_explanation") if f in values}
        try:
            ok = True if is_missing(cell.get("judge_success")) else cells.success(cell["judge_success"])
        except cells.Bad as exc:
            self.bad(row, "judge_success", str(exc), cell["judge_success"])
            return None
        try:
            explanation = "" if is_missing(cell.get("judge_explanation")) else cells.text(cell["judge_explanation"])
        except cells.Bad as exc:
            self.bad(row, "judge_explanation", str(exc), cell["judge_explanation"])
            return None
        try:
            raw = cells.text(cell["judge_score"], strip=True)
            score = self.plan.judge_scale.continuous(cell["judge_score"]) if ok else None
        except ValueError as exc:  # cells.Bad is a ValueError too
            self.bad(row, "judge_score", str(exc), cell["judge_score"])
            return None
        return PlannedJudgeScore(score=score, raw=raw, explanation=explanation, row=row)

    def _candidate(self, row: int, key: str, lalm: str, value, column: str, metadata: dict | None,
                   judge: PlannedJudgeScore | None) -> PlannedCandidate | None:
        """The planned candidate answer of ``lalm`` to question ``key`` (one per pair; every row must agree)."""
        if is_missing(value) and not isinstance(value, str):
            self.plan.problem("missing: every row needs its candidate answer", row=row, column=column)
            return None
        try:
            text = cells.text(value)
        except cells.Bad as exc:
            self.plan.problem(str(exc), row=row, column=column, value=value)
            return None
        candidate = self.plan.candidates.get((key, lalm))
        if candidate is None:
            candidate = self.plan.candidates[(key, lalm)] = PlannedCandidate(
                question=key, lalm=lalm, text=text, row=row, column=column, metadata=metadata, judge=judge)
            return candidate
        if candidate.text != text:
            self.plan.problem(f"differs from the candidate answer of LALM {lalm!r} to the same question in row "
                              f"{candidate.row}", row=row, column=column, value=value)
            return None
        if metadata is not None and candidate.metadata != metadata:
            self.plan.problem(f"the answer's metadata {metadata} differs from row {candidate.row} of the same "
                              f"answer ({candidate.metadata})", row=row, column=column, value=value)
            return None
        if judge is not None and candidate.judge is not None and candidate.judge.raw != judge.raw:
            self.bad(row, "judge_score", f"a second judge score of LALM {lalm!r}'s answer (first in row "
                                         f"{candidate.judge.row})", judge.raw)
            return None
        candidate.judge = candidate.judge or judge
        return candidate

    def _rating(self, row: int, values: dict, i: int, candidate: PlannedCandidate, value, column: str) -> None:
        """Add the row's rating of ``candidate`` (its score on 1–5, rater, codes and comment)."""
        try:
            score = self.mapping.rating_scale.score(value)
        except ValueError as exc:
            self.plan.problem(str(exc), row=row, column=column, value=value)
            return
        read = {f: values[f][i] for f in ("rater", "codes", "comment") if f in values}
        try:
            rater = cells.text(read["rater"], strip=True) if not is_missing(read.get("rater")) else ""
            if "rater" in read and not rater:
                raise cells.Bad("empty: a rating needs its rater when the rater column is mapped")
        except cells.Bad as exc:
            self.bad(row, "rater", str(exc), read.get("rater"))
            return
        texts = {}
        for f in ("codes", "comment"):
            try:
                texts[f] = cells.text(read[f], strip=True) if not is_missing(read.get(f)) else ""
                if f == "codes":
                    texts[f] = normalize_codes(texts[f])
            except (cells.Bad, UnknownCodeError) as exc:
                self.bad(row, f, str(exc), read.get(f))
                return
        earlier = next((r for r in candidate.ratings if r.rater == rater), None)
        if earlier is not None:
            who = f"rater {rater!r}" if rater else "the file (no rater column: one import account)"
            self.plan.problem(f"a second rating of LALM {candidate.lalm!r}'s answer by {who} (first in row "
                              f"{earlier.row})", row=row, column=column, value=value)
            return
        candidate.ratings.append(PlannedRating(rater=rater, score=score, codes=texts["codes"],
                                               comment=texts["comment"], row=row))


def _mapping_problems(plan: Plan, table: Table, mapping: TableMapping, context: Context,
                      columns: dict) -> bool:
    """Problems of the mapping against this table and benchmark (missing required fields, position or text
    matching without questions, an unnamed judge); fills the judge's name and scale. True when there are any."""
    cols = mapping.columns
    if not ({"question", "reference"} <= set(cols)) and not context.exists and "position" not in cols:
        missing = " and ".join(k for k in ("question", "reference") if k not in cols)
        plan.problem(f"unmapped required field: {missing} (the benchmark is new, so its questions are created "
                     "from the table)", key=f"columns.{'question' if 'question' not in cols else 'reference'}")
        return True
    if ("position" in cols or mapping.match) and not context.exists:
        what = "position" if "position" in cols else "their text"
        plan.problem(f"questions by {what} need an existing benchmark: import the benchmark first",
                     key="columns.position" if "position" in cols else "match")
        return True
    if "judge_score" in columns:
        name, scale = judge_guess(table, columns["judge_score"])
        plan.judge_name = mapping.judge_name or name
        plan.judge_scale = mapping.judge_scale or (RatingScale(scale) if scale else None)
        plan.judge_scale_guessed = mapping.judge_scale is None
        if not plan.judge_name:
            plan.problem("name the judge whose scores these are, e.g. audiobench:llama3-70b (the file does not "
                         "say)", key="judge.name")
        if plan.judge_scale is None:
            plan.problem('give the judge\'s scale, e.g. {"min": 0, "max": 5}: its scores are not numbers',
                         key="judge.scale")
    return plan.n_problems > 0


def plan_table(table: Table, mapping: TableMapping, context: Context, locator: AudioLocator | None,
               progress: Progress | None = None) -> Plan:
    """Check every row of ``table`` against ``mapping`` and group them into questions, candidate answers and
    ratings; every problem is collected in the plan (nothing raises)."""
    plan = Plan(rows=table.n_rows)
    columns, lalm_columns, problems = mapping.resolve(table.names)
    key_columns, metadata_columns, extra_problems = mapping.resolve_extra(table.names)
    for problem in problems + extra_problems:
        plan.problem(problem.reason, key=problem.key)
    if problems or extra_problems or _mapping_problems(plan, table, mapping, context, columns):
        return plan
    reads: dict = dict(columns)
    reads.update({("key", n): c for n, c in enumerate(key_columns)})
    reads.update({("meta", name): c for name, c in metadata_columns.items()})
    reader = RowReader(plan=plan, mapping=mapping, context=context, columns=reads, lalm_columns=lalm_columns,
                       locator=locator)
    for index, i, values, wide in _rows_in_chunks(table, reads, lalm_columns):
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress("checking rows", index, table.n_rows)
        reader.row(index + 1, values, i, wide)
    return plan
