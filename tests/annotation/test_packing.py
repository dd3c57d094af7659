"""Packing short clips into one Whisper input and giving the words back to their clips (providers/packing.py)."""
import numpy as np

from annotation.providers.packing import PackedWord, clip_segments, pack_plan, pack_stream, word_errors, words_split

# Two clips in one stream: clip 0 spans 0–3 s, a 1 s gap, clip 1 spans 4–6 s.
SPANS = [(0.0, 3.0), (4.0, 6.0)]


def word(start: float, end: float, text: str, segment: int = 0) -> PackedWord:
    return PackedWord(start=start, end=end, text=f" {text}", segment=segment)


def texts(words: list[PackedWord]) -> list[str]:
    return [w.text.strip() for w in words]


def test_a_pack_may_fill_the_limit_exactly_but_not_exceed_it():
    assert pack_plan([10.0, 9.0, 7.0], max_s=28.0, gap_s=1.0) == [[0, 1, 2]]  # 10 + 1 + 9 + 1 + 7 = 28 s
    assert pack_plan([10.0, 9.0, 7.01], max_s=28.0, gap_s=1.0) == [[0, 1], [2]]


def test_longest_clips_are_placed_first_and_clips_keep_their_order_inside_a_pack():
    # 20 s opens pack A, 6 s joins it (27 s); 4 s and 3 s no longer fit A and share pack B.
    assert pack_plan([3.0, 20.0, 4.0, 6.0], max_s=28.0, gap_s=1.0) == [[0, 2], [1, 3]]


def test_a_clip_longer_than_the_limit_goes_alone_and_no_clip_joins_it():
    assert pack_plan([2.0, 45.0, 3.0], max_s=28.0, gap_s=1.0) == [[0, 2], [1]]
    assert pack_plan([45.0], max_s=28.0, gap_s=1.0) == [[0]]


def test_packing_off_gives_every_clip_its_own_pack():
    assert pack_plan([2.0, 3.0, 1.0], max_s=0.0, gap_s=1.0) == [[0], [1], [2]]


def test_every_clip_is_in_exactly_one_pack_and_no_pack_outgrows_the_limit():
    durations = list(np.random.default_rng(7).uniform(0.2, 12.0, 300))
    plan = pack_plan(durations, max_s=28.0, gap_s=1.0)

    assert sorted(index for pack in plan for index in pack) == list(range(300))
    for pack in plan:
        assert sum(durations[i] for i in pack) + 1.0 * (len(pack) - 1) <= 28.0 + 1e-9
    assert len(plan) < 300 / 3  # short clips really share packs


def test_the_stream_has_silence_between_clips_and_each_clip_span_in_seconds():
    first, second = np.full(16000, 0.5, dtype=np.float32), np.full(8000, -0.5, dtype=np.float32)

    stream, spans = pack_stream([first, second], gap_s=1.0)

    assert spans == [(0.0, 1.0), (2.0, 2.5)]
    assert len(stream) == 16000 + 16000 + 8000 and stream.dtype == np.float32
    assert np.all(stream[:16000] == 0.5) and np.all(stream[16000:32000] == 0.0) and np.all(stream[32000:] == -0.5)


def test_a_word_straddling_a_gap_goes_to_the_clip_where_most_of_it_lies():
    mostly_first = word(2.6, 4.3, "stretched")  # 0.4 s in clip 0, 0.3 s in clip 1
    mostly_second = word(2.9, 4.5, "early", segment=1)  # 0.1 s in clip 0, 0.5 s in clip 1

    first, second = words_split([mostly_first, mostly_second], SPANS)

    assert (texts(first), texts(second)) == (["stretched"], ["early"])


def test_a_word_timed_inside_a_gap_stays_with_its_whisper_segment():
    # Whisper put the phrase's last word in the gap, nearer clip 1 (seen with tiny.en: "lack of | beauty.").
    words = [word(2.0, 2.8, "lack"), word(2.8, 2.95, "of"), word(3.8, 3.8, "beauty."), word(4.1, 4.5, "The", 1)]

    first, second = words_split(words, SPANS)

    assert (texts(first), texts(second)) == (["lack", "of", "beauty."], ["The"])


def test_a_segment_timed_wholly_inside_a_gap_goes_to_the_nearest_clip():
    first, second = words_split([word(3.7, 3.9, "Hmm.", 5)], SPANS)
    assert (texts(first), texts(second)) == ([], ["Hmm."])


def test_a_whisper_segment_spanning_two_clips_gives_each_clip_its_own_segment_rebased_to_its_start():
    words = [word(1.0, 2.0, "over"), word(2.0, 2.9, "this."), word(4.2, 4.6, "It"), word(4.6, 5.0, "will")]

    first, second = words_split(words, SPANS)

    assert [s.as_dict() for s in clip_segments(first, offset_s=0.0, duration_s=3.0)] == [
        {"start": 1.0, "end": 2.9, "text": "over this."}
    ]
    assert [s.as_dict() for s in clip_segments(second, offset_s=4.0, duration_s=2.0)] == [
        {"start": 0.2, "end": 1.0, "text": "It will"}
    ]


def test_clip_segments_follow_whisper_segments_and_are_clamped_to_the_clip():
    words = [
        word(3.8, 4.5, "Yes,", 3), word(4.5, 5.2, "I did.", 3), word(5.3, 5.6, "Shall", 4), word(5.6, 6.4, "we?", 4)
    ]

    segments = clip_segments(words, offset_s=4.0, duration_s=2.0)

    assert [s.as_dict() for s in segments] == [
        {"start": 0.0, "end": 1.2, "text": "Yes, I did."},  # started in the gap before the clip: clamped to 0
        {"start": 1.3, "end": 2.0, "text": "Shall we?"},  # ran past the clip's end: clamped to its duration
    ]
    assert clip_segments([], offset_s=4.0, duration_s=2.0) == []


def test_word_errors_count_word_edits_after_dropping_case_and_punctuation():
    assert word_errors("The tree-top waved, gracefully.", "the treetop waved gracefully") == (0, 4)
    # one substitution (and -> in), one deletion (the), one insertion (now)
    assert word_errors("large and green in the window", "large in green in window now") == (3, 6)
