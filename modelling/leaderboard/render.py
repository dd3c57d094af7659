"""Renderings of a leaderboard: the flat table's columns and cells, Markdown, CSV, LaTeX and JSON downloads (the
``leaderboard`` command's formats), the datasheet section and the forest plot (inline SVG).

Numbers are rounded once, where they are written: the rows keep full precision (``LeaderboardRow``) and every
cell here formats the unrounded value, so a row's estimate and its human-only figure agree to the digit when they
are the same number. Text that came from users (LALM, benchmark and group names) is escaped for each format:
``|`` in Markdown, formula starts in CSV (the platform's CSV writer), LaTeX specials and line breaks in LaTeX
(a name cannot leave a comment line or run a command), and ``$`` in matplotlib (no mathtext is parsed).
"""
from __future__ import annotations

import io

import numpy as np

from modelling.leaderboard import services, stats
from modelling.leaderboard.services import Leaderboard, LeaderboardRow, pair_title

#: Download formats of the page and the ``leaderboard`` command.
FORMATS = ("json", "csv", "markdown", "latex")


def _fmt(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(ci) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def row_label(row: LeaderboardRow) -> str:
    """The LALM's name as the tables show it: "(ORCA only)" when ORCA predicted it and nobody rated it, "(not
    rated)" when neither."""
    if row.rated_answers:
        return row.lalm
    return row.lalm + (" (ORCA only)" if row.orca_only else " (not rated)")


def table_columns(board: Leaderboard) -> list[str]:
    """Column headers of the flat table (Markdown, CSV, LaTeX, the datasheet)."""
    return (["LALM", "answers", "rated answers", "% rated", "labels used", "ratings", "mean rating (1–5)", "sd",
             "estimate", "95% CI", "estimator", "CI method", "human-only", "human-only 95% CI",
             "words (mean answer length)"] + [f"judge: {j}" for j in board.judges]
            + ["ORCA μ", "ORCA σ²", "notes"])


def table_cells(board: Leaderboard, row: LeaderboardRow) -> list[str]:
    human = row.human
    return ([row_label(row), str(row.answers), str(row.rated_answers), f"{100 * row.rated_share:.0f}",
             str(row.labels), str(row.ratings), _fmt(row.mean_rating, 2), _fmt(row.sd_rating, 2),
             _fmt(row.estimate), _ci(row.ci), row.estimator or "–", row.ci_method or "–",
             _fmt(None if human is None else human.estimate), _ci(None if human is None else human.ci),
             _fmt(row.answer_words, 1)]
            + [_fmt(row.judges.get(j)) for j in board.judges]
            + [_fmt((row.orca or {}).get("mu")), _fmt((row.orca or {}).get("var"), 4), "; ".join(row.notes)])


def _sections(board: Leaderboard) -> list[tuple[str | None, list[LeaderboardRow]]]:
    return [(None, board.rows)] + [(f"{board.by}: {name}", rows) for name, rows in board.groups]


def _md(text: str) -> str:
    """A Markdown table cell: ``|`` escaped, line breaks written as spaces (a cell is one line)."""
    return " ".join(text.splitlines()).replace("|", "\\|")


def leaderboard_markdown(board: Leaderboard, *, heading_level: int = 2) -> str:
    """The table(s) as Markdown, with the scope, the model version, the sampling, the interval methods and the
    decided verdicts."""
    h = "#" * heading_level
    lines = [f"{h} Leaderboard: {board.benchmark or 'all benchmarks'}", "",
             f"ORCA model version: {board.model_version or 'none'} ({board.prediction_source}). "
             "Means on the normalised scale (r − 1)/4 unless marked 1–5; the estimand is each LALM's mean expected "
             "rating over its answers.", "", board.sampling_note, ""]
    if board.ppi_note:
        lines += [board.ppi_note, ""]
    lines += ["Interval methods: " + "; ".join(f"{k} = {v}" for k, v in stats.CI_METHODS.items()) + ".", ""]
    for title, rows in _sections(board):
        if title:
            lines += [f"{h}# {title}", ""]
        cols = table_columns(board)
        lines.append("| " + " | ".join(_md(c) for c in cols) + " |")
        lines.append("|" + "---|" * len(cols))
        lines += ["| " + " | ".join(_md(c) for c in table_cells(board, r)) + " |" for r in rows]
        lines.append("")
    decided = [p for p in board.pairwise if p.verdict != "undecided"]
    lines += [f"Verdicts ({board.verdict_method}): "
              + ("; ".join(f"{p.a if p.verdict == 'a>b' else p.b} > {p.b if p.verdict == 'a>b' else p.a} "
                           f"({p.n_questions} questions{pair_title(p, 1 if p.verdict == 'a>b' else -1)})"
                           for p in decided) or "none"), ""]
    return "\n".join(lines)


def leaderboard_csv(board: Leaderboard) -> str:
    """The table(s) as CSV through the platform's CSV writer (spreadsheet formulas escaped); a ``group`` column
    holds the breakdown value ('' for the overall rows)."""
    from annotation.services.exports import csv_text

    return csv_text(header=["group", *table_columns(board)],
                    rows=[[title or "", *table_cells(board, r)] for title, rows in _sections(board) for r in rows])


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{",
        "}": r"\}", "–": "--", "−": "--", "μ": r"$\mu$", "σ": r"$\sigma$", "²": r"$^2$", "π": r"$\pi$",
        "∝": r"$\propto$", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(text: str) -> str:
    """``text`` as LaTeX that typesets as itself: specials escaped, and line breaks and other control characters
    (a name may hold any) written as a space, so text can neither leave a ``%`` comment line nor end a row."""
    return "".join(" " if ch.isspace() or ord(ch) < 32 or ord(ch) == 127 else _TEX.get(ch, ch) for ch in text)


def leaderboard_latex(board: Leaderboard) -> str:
    """The table(s) as LaTeX ``tabular`` environments (booktabs rules); the notes column is left out (it is prose:
    the Markdown and CSV carry it)."""
    parts = []
    for title, rows in _sections(board):
        cols = table_columns(board)[:-1]
        body = [r"\begin{tabular}{l" + "r" * (len(cols) - 1) + "}", r"\toprule",
                " & ".join(_tex(c) for c in cols) + r" \\", r"\midrule"]
        body += [" & ".join(_tex(c) for c in table_cells(board, r)[:-1]) + r" \\" for r in rows]
        body += [r"\bottomrule", r"\end{tabular}"]
        caption = "% " + _tex(title or f"Leaderboard: {board.benchmark or 'all benchmarks'}; ORCA "
                                       f"{board.model_version or 'none'}")
        parts.append("\n".join([caption] + body))
    return "\n\n".join(parts) + "\n"


def leaderboard_datasheet_section(benchmark) -> str:
    """The datasheet's leaderboard section for a dataset export of ``benchmark`` (a ``Benchmark`` or None)."""
    board = services.leaderboard_compute(benchmark=benchmark.name if benchmark is not None else None)
    return leaderboard_markdown(board, heading_level=2)


def leaderboard_render(board: Leaderboard, *, fmt: str) -> str:
    """``board`` in one of :data:`FORMATS`."""
    import json

    if fmt == "json":
        return json.dumps(board.as_json())
    return {"csv": leaderboard_csv, "markdown": leaderboard_markdown, "latex": leaderboard_latex}[fmt](board)


#: Matplotlib settings of the forest plot: text is SVG text (selectable, the page's font), and no text is parsed as
#: mathtext — an LALM named ``$\\foo$`` is drawn as typed instead of failing the page (``text.parse_math``).
FOREST_RC = {"svg.fonttype": "none", "svg.hashsalt": "orca-leaderboard", "font.size": 9, "text.parse_math": False}
#: Height of the forest plot in inches: per LALM row, and for the x label and the legend below the axes.
FOREST_ROW_IN, FOREST_FRAME_IN = 0.32, 1.5


def _forest_marker(ax, estimate: stats.Estimate | None, y: float, marker: str, colour: str, label: str) -> bool:
    """One estimate on ``ax`` at height ``y``: filled with its interval, hollow without one. True if drawn."""
    if estimate is None:
        return False
    x = estimate.estimate
    lo, hi = estimate.ci or (x, x)
    ax.errorbar(x, y, xerr=[[max(0.0, x - lo)], [max(0.0, hi - x)]], fmt=marker, color=colour, capsize=3,
                markersize=4, mfc=colour if estimate.ci else "white", label=label)
    return True


def forest_plot_figure(board: Leaderboard):
    """The forest plot of the overall rows as a matplotlib ``Figure`` (Agg, no pyplot state): per LALM the
    human-only estimate (circle, above) and the ORCA-assisted one (square, below), each with the interval named on
    its row (hollow: too few questions for an interval), and ORCA's mean μ (cross). Rows run top to bottom in the
    table's order; every row, the last included, lies inside the axes (y limits half a row beyond the outer rows)
    and the legend sits below the axes, outside them, at any number of LALMs. Call inside
    ``matplotlib.rc_context(FOREST_RC)``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = board.rows
    fig = Figure(figsize=(7, FOREST_ROW_IN * max(len(rows), 3) + FOREST_FRAME_IN), layout="constrained")
    ax = fig.subplots()
    ys = np.arange(len(rows))[::-1]
    handles = {}
    for y, r in zip(ys, rows):
        for estimate, dy, marker, colour, label in (
                (r.human, 0.18, "o", "tab:blue", "human only (classical / active without ORCA)"),
                (r.with_orca, -0.18, "s", "tab:green", "with ORCA (PPI++ / active)")):
            if _forest_marker(ax, estimate, y + dy, marker, colour, label) and label not in handles:
                handles[label] = ax.containers[-1]
        if r.orca is not None:
            (line,) = ax.plot(r.orca["mu"], y, marker="x", color="tab:orange", linestyle="none")
            handles.setdefault("ORCA mean μ", line)
    ax.set_yticks(ys, [row_label(r) for r in rows])
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean correctness (normalised, (r − 1)/4); 95 % CI; hollow: too few questions for an interval")
    ax.grid(True, axis="x", alpha=0.3)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=3, fontsize=7,
                   frameon=False)
    if not rows:
        ax.text(0.5, 0.5, "no candidate answers yet", ha="center", va="center", transform=ax.transAxes)
    return fig


def forest_plot_svg(board: Leaderboard) -> str:
    """:func:`forest_plot_figure` as an inline ``<svg …>`` string (no XML prolog)."""
    import matplotlib

    with matplotlib.rc_context(FOREST_RC):
        fig = forest_plot_figure(board)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


def leaderboard_cached(
    *, benchmark: str | None = None, by: str | None = None,
) -> tuple[Leaderboard, str]:
    """(leaderboard, forest plot SVG) of ``benchmark`` and ``by`` as
    :func:`~modelling.leaderboard.services.leaderboard_compute` and :func:`forest_plot_svg` give them, computed
    once per change of the data they read (:func:`~modelling.leaderboard.services.leaderboard_data_state`) and
    kept in the cache, so the page, the downloads and the API do not test and draw on every request."""
    from modelling.services.agreement_cache import cached_by_data

    def compute():
        data = services.leaderboard_data_load(benchmark=benchmark)
        board = services.leaderboard_compute(benchmark=benchmark, by=by, data=data)
        return board, forest_plot_svg(board)

    return cached_by_data(name="leaderboard-board-svg",
                          state=services.leaderboard_data_state(benchmark=benchmark, by=by), compute=compute)
