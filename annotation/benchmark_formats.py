"""The benchmark file formats the platform reads and writes: MMAU (a JSON list) and MMAR (JSONL).

One field mapping per format, used both by the benchmark importer (``annotation.services.importers``) and by the
corrected-benchmark export (``annotation.services.exports.corrected_benchmark``), so a corrected benchmark is
written with exactly the field names it was read from.

Sources: MMAU test-mini (Sakshi113/MMAU, ``mmau-test-mini.json``: {id, audio_id, question, choices, answer, task,
category, sub-category, ...}); MMAR (ddlBoJack/MMAR, ``MMAR-meta.jsonl``: {id, audio_path, question, choices,
answer, modality, category, sub-category, thinking, ...}). No Django import.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchmarkFileFormat:
    """Field names of one benchmark format (the keys of a source record) and how its file is laid out.

    Attributes:
        name: ``--format`` value, ``mmau`` or ``mmar``.
        default_name: name of the benchmark an import creates when none is given.
        jsonl: True when the file holds one JSON object per line, False for one JSON list.
        audio: key of the audio reference (``Question.audio_ref``).
        modality: key of the modality label (``Question.modality_detail``; normalised to ``Question.modality``).
        rationale: key the corrected export writes the rationale under.
        rationale_imported: whether the importer reads ``rationale`` as the initial rationale (MMAR's
            ``thinking``); when False the key, if present, is kept in ``Question.extra`` like any unmapped field.
    """

    name: str
    default_name: str
    jsonl: bool
    audio: str
    modality: str
    rationale: str
    rationale_imported: bool

    @property
    def imported_fields(self) -> frozenset[str]:
        """The keys the importer maps to question fields; every other key goes to ``Question.extra``."""
        mapped = {"id", self.audio, "question", "choices", "answer", self.modality, "category", "sub-category"}
        return frozenset(mapped | ({self.rationale} if self.rationale_imported else set()))


MMAU = BenchmarkFileFormat(name="mmau", default_name="MMAU test-mini", jsonl=False, audio="audio_id", modality="task",
                           rationale="rationale", rationale_imported=False)
MMAR = BenchmarkFileFormat(name="mmar", default_name="MMAR", jsonl=True, audio="audio_path", modality="modality",
                           rationale="thinking", rationale_imported=True)

#: Format name -> its field mapping.
BENCHMARK_FILE_FORMATS = {fmt.name: fmt for fmt in (MMAU, MMAR)}


def benchmark_record(
    fmt: BenchmarkFileFormat,
    *,
    external_id: str,
    audio_ref: str,
    question_text: str,
    choices: list,
    reference_answer: str,
    modality: str,
    category: str,
    sub_category: str,
    rationale: str,
) -> dict:
    """One source record in ``fmt``'s field names, in the order the benchmark's own files use (the inverse of the
    importer's mapping)."""
    return {
        "id": external_id,
        fmt.audio: audio_ref,
        "question": question_text,
        "choices": choices,
        "answer": reference_answer,
        fmt.modality: modality,
        "category": category,
        "sub-category": sub_category,
        fmt.rationale: rationale,
    }
