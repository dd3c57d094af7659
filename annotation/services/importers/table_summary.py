"""What a table import created and changed, as counts and as the lines the import page and the command print."""
from __future__ import annotations

from dataclasses import dataclass, field


def count(n: int, noun: str, plural: str = "") -> str:
    """``"1 question"``, ``"2 questions"`` (thousands separated)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


@dataclass
class TableImportSummary:
    """What a table import created and changed (a dry run: what it would have).

    Queue: ``answers_complete`` rated answers that need no more ratings (``imported_ratings`` ``complete``),
    ``answers_open`` answers offered to annotators, ``answers_waiting_audio`` answers whose question waits for its
    audio (``missing_audio`` ``allow``: not served until it is attached). ``skipped``: rows left out
    (``unmatched`` ``skip``), as ``{row, column, value, reason}``.
    """

    file: str
    benchmark: str
    dry_run: bool = False
    rows: int = 0
    benchmark_created: bool = False
    questions_created: int = 0
    questions_updated: int = 0
    questions_unchanged: int = 0
    versions_created: int = 0
    candidates_created: int = 0
    candidates_updated: int = 0
    candidates_unchanged: int = 0
    ratings_created: int = 0
    ratings_updated: int = 0
    ratings_unchanged: int = 0
    raters: int = 0
    rater_accounts_created: int = 0
    audio_files: int = 0
    audio_linked: int = 0
    audio_attached: int = 0
    audio_missing_files: int = 0
    questions_waiting_audio: int = 0
    answers_complete: int = 0
    answers_open: int = 0
    answers_waiting_audio: int = 0
    judge: str = ""
    judge_scale: dict = field(default_factory=dict)
    judge_scale_guessed: bool = False
    judge_scores_created: int = 0
    judge_scores_updated: int = 0
    judge_scores_unchanged: int = 0
    judge_failures: int = 0
    candidate_metadata: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    lalms: list[str] = field(default_factory=list)
    lalms_created: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"{self.file} -> benchmark {self.benchmark!r}" + (" (new)" if self.benchmark_created else "")
        if self.dry_run:
            head += ": dry run, nothing written; the counts say what an import would do"
        lines = [
            head,
            f"rows read: {self.rows}",
            f"questions: {self.questions_created} created, {self.questions_updated} updated, "
            f"{self.questions_unchanged} unchanged; question versions created: {self.versions_created}",
            f"candidate answers: {self.candidates_created} created, {self.candidates_updated} updated, "
            f"{self.candidates_unchanged} unchanged"
            + (f"; metadata kept: {', '.join(self.candidate_metadata)}" if self.candidate_metadata else ""),
            f"LALMs: {len(self.lalms)} ({', '.join(self.lalms)}); new: {', '.join(self.lalms_created) or 'none'}",
            f"ratings: {self.ratings_created} created, {self.ratings_updated} updated, {self.ratings_unchanged} "
            f"unchanged, from {count(self.raters, 'rater')} ({self.rater_accounts_created} new import-only "
            f"account{'s' if self.rater_accounts_created != 1 else ''})",
            self._audio_line(),
        ]
        if self.judge:
            lines.append(self._judge_line())
        if self.skipped:
            lines.append(f"rows left out (their question is not in the benchmark): {len(self.skipped)}: "
                         + "; ".join(f"row {s['row']} {s['value']}" for s in self.skipped[:10])
                         + (" …" if len(self.skipped) > 10 else ""))
        lines.append(self._queue_line())
        return lines

    def _audio_line(self) -> str:
        line = f"audio: {count(self.audio_files, 'file')}, newly linked to {count(self.audio_linked, 'question')}"
        if self.audio_attached:
            line += f" ({self.audio_attached} of them waited for it and are rateable now)"
        if self.questions_waiting_audio:
            line += (f"; {count(self.questions_waiting_audio, 'question')} without their audio "
                     f"({count(self.audio_missing_files, 'file')} not found) wait for it: not served to raters "
                     "until it is attached (Attach audio, or import again with the audio); their imported ratings "
                     "count")
        return line

    def _judge_line(self) -> str:
        scale = self.judge_scale
        shown = (f"{scale['min']:g}–{scale['max']:g} → 1–5" if set(scale) == {"min", "max"} else
                 ", ".join(f"{k}→{v}" for k, v in scale.items()))
        guessed = " (read from the file)" if self.judge_scale_guessed else ""
        return (f"judge scores of {self.judge}: {self.judge_scores_created} created, {self.judge_scores_updated} "
                f"updated, {self.judge_scores_unchanged} unchanged ({self.judge_failures} not parsed by the "
                f"toolkit, stored as failures); scale {shown}{guessed}")

    def _queue_line(self) -> str:
        total = self.answers_complete + self.answers_open + self.answers_waiting_audio
        if total and self.answers_complete == total:
            return (f"queue: all {count(total, 'candidate answer')} are complete with their imported ratings "
                    "(Imported ratings: count as complete), so this import adds nothing to any annotator's queue; "
                    "to have them rated here too, import again with “Still need k ratings” (imported_ratings "
                    "need_k)")
        parts = [f"{count(self.answers_open, 'candidate answer')} offered to annotators"]
        if self.answers_complete:
            parts.append(f"{self.answers_complete:,} complete with their imported ratings (not offered)")
        if self.answers_waiting_audio:
            parts.append(f"{self.answers_waiting_audio:,} waiting for their question's audio")
        return "queue: " + ", ".join(parts)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict:
        return dict(vars(self))
