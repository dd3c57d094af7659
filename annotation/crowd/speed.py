"""Participants of a crowd study who rate unusually fast, flagged on the study report.

A rating needs the question, the reference answer and the candidate answer read (and, with audio, the clip heard):
a median of 0.7 s per rating is clicking, not rating, and the hourly pay it implies (740 GBP/hour at 0.144 GBP an
item) is no fair-pay figure. The report flags a participant whose median server time per rating
(``StudyRow.median_seconds``, measured by the server from handing an item out to storing its rating) is below
:data:`FAST_SECONDS`, or below :data:`FAST_SHARE` of the study's typical participant (the median of the
participants' medians, once :data:`FAST_MIN_PARTICIPANTS` have one): the "speeder" rule of survey research, which
flags completion times far below the median. A flag is a prompt to look (gold accuracy, attention checks, the
ratings), not a verdict: the admin pauses or invalidates on the Annotator reliability page.
"""
from __future__ import annotations

import statistics

#: Seconds per rating below which nobody can have read the item's texts (tens of words at reading speed).
FAST_SECONDS = 5.0
#: Share of the study's median participant below which a participant counts as a speeder.
FAST_SHARE = 1 / 3
#: Participants with a median time needed before the relative rule applies.
FAST_MIN_PARTICIPANTS = 3


def study_fast_participants(*, rows) -> dict[str, str]:
    """``{participant_id: why}`` for the unusually fast among ``rows`` (``StudyRow`` of
    ``annotation.crowd.studies.study_report``; rows without a median time are never flagged).

    ``why`` names the participant's median and the threshold it is under, e.g. "median 0.7 s per rating, under
    5 s (too short to read the item)" or "median 4.0 s per rating, under a third of the study's median (21.0 s)".
    """
    medians = [row.median_seconds for row in rows if row.median_seconds is not None]
    typical = statistics.median(medians) if len(medians) >= FAST_MIN_PARTICIPANTS else None
    flagged = {}
    for row in rows:
        seconds = row.median_seconds
        if seconds is None:
            continue
        if seconds < FAST_SECONDS:
            flagged[row.participant_id] = (f"median {seconds:.1f} s per rating, under {FAST_SECONDS:g} s (too short "
                                           "to read the item)")
        elif typical is not None and seconds < FAST_SHARE * typical:
            flagged[row.participant_id] = (f"median {seconds:.1f} s per rating, under a third of the study's median "
                                           f"({typical:.1f} s)")
    return flagged
