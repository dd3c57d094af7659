"""Packing short clips into one Whisper input, and splitting the words back (Stage 1a transcripts).

Whisper encodes a fixed 30 s window: a 2.5 s clip costs as much encoder time as 30 s of audio. A transcription
job therefore packs several short clips into one stream, with a silent gap between clips, transcribes the stream
once with word timestamps, and gives every word back to the clip whose time range it overlaps most. Each clip's
segments are rebased to the clip's own start, so what is stored per clip has the same shape as a clip transcribed
alone (text, language, segments in seconds from the clip's start).

* :func:`pack_plan` groups clips into packs (first-fit decreasing; a pack's stream, gaps included, is at most
  ``max_s`` seconds; a clip longer than that goes alone);
* :func:`pack_stream` builds a pack's stream and the time span of every clip in it;
* :func:`words_split` assigns words to clips; :func:`clip_segments` rebuilds a clip's segments from its words;
* :func:`word_errors` compares two transcripts word by word (packed against clip by clip, in the benchmark and
  tests).

Pure Python apart from :func:`pack_stream` (numpy, imported inside it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .base import Segment

SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class PackedWord:
    """A word Whisper found in a pack's stream: ``start``/``end`` in seconds from the stream's start, ``text`` as
    Whisper writes it (leading space included), ``segment`` the index of the Whisper segment it came from."""

    start: float
    end: float
    text: str
    segment: int


def pack_plan(durations: list[float], *, max_s: float, gap_s: float) -> list[list[int]]:
    """Group clips into packs whose stream (clips plus ``gap_s`` between neighbours) lasts at most ``max_s`` seconds.

    First-fit decreasing over the durations (longest clip first, into the first pack it fits). Clips keep their
    input order inside a pack, and packs are ordered by their first clip, so the plan is deterministic.

    Args:
        durations: clip durations in seconds (>= 0), one per clip.
        max_s: longest stream of a pack in seconds (Whisper's window is 30 s); ``max_s`` <= 0 turns packing off.
        gap_s: silence between two clips in seconds (>= 0).

    Returns:
        Lists of indexes into ``durations``, each clip in exactly one pack. A clip longer than ``max_s``, and every
        clip when packing is off, is a pack of its own.
    """
    if max_s <= 0:
        return [[index] for index in range(len(durations))]
    order = sorted(range(len(durations)), key=lambda index: (-durations[index], index))
    packs: list[list[int]] = []
    lengths: list[float] = []
    for index in order:
        duration = durations[index]
        for number, length in enumerate(lengths):
            if duration <= max_s and length + gap_s + duration <= max_s:
                packs[number].append(index)
                lengths[number] = length + gap_s + duration
                break
        else:
            packs.append([index])
            lengths.append(duration)
    return sorted((sorted(pack) for pack in packs), key=lambda pack: pack[0])


def pack_spans(lengths: list[int], *, gap_s: float, rate: int = SAMPLE_RATE) -> list[tuple[float, float]]:
    """(start, end) in seconds of each clip in a pack's stream, for clips of ``lengths`` samples at ``rate`` Hz
    separated by ``round(gap_s * rate)`` samples of silence."""
    gap = round(gap_s * rate)
    spans = []
    position = 0
    for length in lengths:
        spans.append((position / rate, (position + length) / rate))
        position += length + gap
    return spans


def pack_stream(clips: list, *, gap_s: float, rate: int = SAMPLE_RATE):
    """One float32 stream of ``clips`` (1-D sample arrays at ``rate`` Hz) with ``gap_s`` of silence between them.

    Returns:
        ``(stream, spans)``: the numpy array and each clip's (start, end) in seconds (see :func:`pack_spans`).
    """
    import numpy as np

    silence = np.zeros(round(gap_s * rate), dtype=np.float32)
    parts = []
    for number, clip in enumerate(clips):
        if number:
            parts.append(silence)
        parts.append(np.asarray(clip, dtype=np.float32))
    stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return stream, pack_spans([len(clip) for clip in clips], gap_s=gap_s, rate=rate)


def _overlap(word: PackedWord, span: tuple[float, float]) -> float:
    return min(word.end, span[1]) - max(word.start, span[0])


def _distance(word: PackedWord, span: tuple[float, float]) -> float:
    return max(span[0] - word.end, word.start - span[1], 0.0)


def words_split(words: list[PackedWord], spans: list[tuple[float, float]]) -> list[list[PackedWord]]:
    """Give each word to the clip whose span it overlaps most (a word straddling a gap goes where most of it lies).

    A word that overlaps no clip (Whisper's word timing put it inside a gap, or gave it zero length) goes with its
    neighbours in the same Whisper segment (the previous word's clip, else the next one's): Whisper often stretches
    a phrase's last word into the silence after it. A segment with no overlapping word goes to the nearest clip.
    Ties go to the earlier clip; word order is kept.

    Returns:
        One list of words per span.
    """
    per_clip: list[list[PackedWord]] = [[] for _ in spans]
    if not spans:
        return per_clip
    numbers = range(len(spans))
    owner: list[int | None] = []
    for word in words:
        best = max(numbers, key=lambda number: (_overlap(word, spans[number]), -number))
        owner.append(best if _overlap(word, spans[best]) > 0 else None)
    for index, word in enumerate(words):
        if owner[index] is None:
            owner[index] = _segment_neighbour_owner(words, owner, index)
        if owner[index] is None:
            owner[index] = min(numbers, key=lambda number: (_distance(word, spans[number]), number))
        per_clip[owner[index]].append(word)
    return per_clip


def _segment_neighbour_owner(words: list[PackedWord], owner: list[int | None], index: int) -> int | None:
    """The clip of the nearest earlier, else later, word of the same Whisper segment that has one."""
    segment = words[index].segment
    for step in (-1, 1):
        other = index + step
        while 0 <= other < len(words) and words[other].segment == segment:
            if owner[other] is not None:
                return owner[other]
            other += step
    return None


def clip_segments(words: list[PackedWord], *, offset_s: float, duration_s: float) -> list[Segment]:
    """A clip's segments from its words: consecutive words of one Whisper segment make one segment.

    Times are rebased to the clip's start (``offset_s`` in the stream) and clamped to ``[0, duration_s]``; the text
    is the words joined as Whisper wrote them, stripped. A segment with no text is left out.
    """
    segments: list[Segment] = []
    group: list[PackedWord] = []

    def close():
        text = "".join(word.text for word in group).strip()
        if text:
            start = min(max(group[0].start - offset_s, 0.0), duration_s)
            end = min(max(group[-1].end - offset_s, start), duration_s)
            segments.append(Segment(start=start, end=end, text=text))

    for word in words:
        if group and word.segment != group[-1].segment:
            close()
            group = []
        group.append(word)
    if group:
        close()
    return segments


def normalised_words(text: str) -> list[str]:
    """Lower-cased words without punctuation (apostrophes kept; hyphens dropped, so tree-top = treetop)."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", "")).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word edits, reference words) between two transcripts after :func:`normalised_words`.

    Edits are the Levenshtein distance over words (substitutions, insertions, deletions); summed edits over summed
    reference words is the word error rate (WER).
    """
    ref, hyp = normalised_words(reference), normalised_words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        diagonal, row[0] = row[0], i
        for j, hyp_word in enumerate(hyp, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ref_word != hyp_word))
    return row[-1], len(ref)
