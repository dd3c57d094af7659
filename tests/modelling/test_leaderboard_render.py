"""The leaderboard's renderings (modelling.leaderboard.render): numbers rounded once (a row's estimate and its
human-only figure agree when they are the same number), names from users escaped for every format (mathtext ``$``
in the forest plot and the charts, LaTeX specials and line breaks in the .tex download), and a forest plot whose
every row lies inside the axes with the legend outside them, at 4 and at 20 LALMs."""
import matplotlib
import pytest
from django.urls import reverse
from matplotlib.backends.backend_agg import FigureCanvasAgg

from modelling.leaderboard import stats
from modelling.leaderboard.render import (
    FOREST_RC,
    forest_plot_figure,
    forest_plot_svg,
    leaderboard_csv,
    leaderboard_latex,
    table_cells,
)
from modelling.leaderboard.services import Leaderboard, LeaderboardRow, leaderboard_compute
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)


def _estimate(x: float, ci=None, estimator=stats.CLASSICAL) -> stats.Estimate:
    return stats.Estimate(x, ci, 40, stats.T_ADJUSTED if ci else "none", estimator)


def _row(name: str, x: float, ci=None, *, with_orca: stats.Estimate | None = None) -> LeaderboardRow:
    return LeaderboardRow(lalm=name, answers=50, rated_answers=40, labels=40, ratings=120, mean_rating=1 + 4 * x,
                          sd_rating=0.9, human=_estimate(x, ci), with_orca=with_orca, sampling="uniform", notes=[],
                          answer_words=7.0, judges={}, orca={"mu": x, "var": 0.02, "n": 50})


def _board(rows: list[LeaderboardRow], *, by=None, groups=()) -> Leaderboard:
    return Leaderboard(benchmark="B", model_version=None, prediction_source="none", ppi_note="", rows=rows,
                       pairwise=[], agreement={}, judges=[], by=by, groups=list(groups))


def test_a_rows_estimate_and_its_human_only_figure_are_rounded_once_and_agree():
    # 0.59349 rounded to 4 digits first (0.5935) and then to 3 gave 0.594 beside the human-only 0.593
    row = _row("audio_flamingo", 0.59349, (0.55912, 0.79249))
    cells = dict(zip(["LALM", "answers", "rated", "%", "labels", "ratings", "mean", "sd", "estimate", "ci",
                      "estimator", "method", "human", "human ci"], table_cells(_board([row]), row)))
    assert cells["estimate"] == cells["human"] == "0.593"
    assert cells["ci"] == cells["human ci"] == "[0.559, 0.792]"
    assert row.as_json()["estimate"] == 0.5935 and row.as_json()["ci"] == [0.5591, 0.7925]  # JSON: once, 4 digits
    assert "0.593," in leaderboard_csv(_board([row]))


@pytest.mark.parametrize("n", [4, 20])
def test_every_row_of_the_forest_plot_lies_inside_the_axes_and_the_legend_outside(n):
    rows = [_row(f"lalm-{i:02d}", 0.9 - 0.3 * i / n, (0.85 - 0.3 * i / n, 0.95 - 0.3 * i / n),
                 with_orca=_estimate(0.9 - 0.3 * i / n, (0.87 - 0.3 * i / n, 0.93 - 0.3 * i / n), stats.PPI))
            for i in range(n)]
    rows[-1] = _row("audio_flamingo", 0.594, (0.559, 0.627), with_orca=_estimate(0.594, (0.57, 0.61), stats.PPI))
    with matplotlib.rc_context(FOREST_RC):
        fig = forest_plot_figure(_board(rows))
        FigureCanvasAgg(fig).draw()
    (ax,) = fig.axes
    box = ax.get_window_extent()
    drawn = [artist for container in ax.containers for artist in container.get_children()]
    assert len(ax.containers) == 2 * n  # every row's two estimates are drawn
    for artist in drawn + ax.get_lines():
        extent = artist.get_window_extent()
        assert box.x0 - 0.5 <= extent.x0 and extent.x1 <= box.x1 + 0.5, artist
        assert box.y0 + 1 < extent.y0 and extent.y1 < box.y1 - 1, artist  # off the spines, not on them
    (legend,) = fig.legends
    assert not legend.get_window_extent().overlaps(box)  # the legend hides no row
    assert legend.get_window_extent().y1 <= box.y0


@pytest.mark.django_db
def test_names_with_dollar_signs_and_line_breaks_leave_every_page_and_download_intact(client):
    """An LALM named ``$\\foo$`` made the leaderboard page and every download answer 500 (matplotlib mathtext); a
    category with a line break let a LaTeX command out of the .tex download's ``%`` comment line."""
    bench = BenchmarkFactory(name="B1")
    questions = [QuestionFactory(benchmark=bench, category="Count\n\\input{/etc/passwd}") for _ in range(3)]
    for name in ("$\\foo$", "plain"):
        lalm = LALMFactory(name=name)
        for q in questions:
            RatingFactory(candidate=CandidateAnswerFactory(question_version=q.current_version, lalm=lalm), score=4)
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    page = client.get(reverse("modelling:leaderboard"), {"benchmark": "B1"})
    assert page.status_code == 200 and "$\\foo$" in page.content.decode()
    for fmt in ("csv", "markdown", "latex"):
        response = client.get(reverse("modelling:leaderboard_download"), {"format": fmt, "benchmark": "B1",
                                                                          "by": "category"})
        assert response.status_code == 200, fmt
    assert "$\\foo$" in forest_plot_svg(leaderboard_compute(benchmark="B1"))
    tex = leaderboard_latex(leaderboard_compute(benchmark="B1", by="category"))
    assert "\\input" not in tex  # the backslash is typeset (\textbackslash{}), never run
    assert all(line.startswith("%") for line in tex.splitlines() if "passwd" in line)
    assert r"\$\textbackslash{}foo\$" in tex
