"""A small inline SVG of a training run's progress: training loss and dev Spearman ρ per epoch.

Hand-written SVG (no matplotlib): the run page polls every 2 s, so drawing must cost next to nothing.
"""
from __future__ import annotations

from collections.abc import Sequence

WIDTH, HEIGHT, PAD = 480, 170, 32


def _points(values: Sequence[float | None], low: float, high: float, n: int) -> str:
    span = (high - low) or 1.0
    step = (WIDTH - 2 * PAD) / max(1, n - 1)
    out = []
    for i, v in enumerate(values):
        if v is None:
            continue
        x = PAD + i * step
        y = HEIGHT - PAD - (v - low) / span * (HEIGHT - 2 * PAD)
        out.append(f"{x:.1f},{y:.1f}")
    return " ".join(out)


def training_progress_svg(*, progress: Sequence[dict]) -> str:
    """``<svg>`` with the loss (mean training NLL per rating; left axis, own scale) and dev ρ (right axis, 0–1)
    of each epoch entry ``{epoch, loss, dev_rho}``; an empty string before the first epoch ends."""
    if not progress:
        return ""
    losses = [p.get("loss") for p in progress]
    rhos = [p.get("dev_rho") for p in progress]
    finite = [v for v in losses if v is not None]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    n = len(progress)
    last = progress[-1]
    rho_text = "–" if last.get("dev_rho") is None else f"{last['dev_rho']:.3f}"
    loss_text = "–" if last.get("loss") is None else f"{last['loss']:.3f}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="Training loss and dev Spearman rho over {n} epochs">'
        f'<rect x="{PAD}" y="{PAD}" width="{WIDTH - 2 * PAD}" height="{HEIGHT - 2 * PAD}" fill="none" stroke="#ccc"/>'
        f'<polyline points="{_points(losses, low, high, n)}" fill="none" stroke="#b44" stroke-width="2"/>'
        f'<polyline points="{_points(rhos, 0.0, 1.0, n)}" fill="none" stroke="#27a" stroke-width="2"/>'
        f'<text x="{PAD}" y="20" font-size="12" fill="#b44">loss {loss_text} ({low:.3f}–{high:.3f})</text>'
        f'<text x="{WIDTH - PAD}" y="20" font-size="12" fill="#27a" text-anchor="end">dev ρ {rho_text} (0–1)</text>'
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle">epoch 1–{n}</text>'
        "</svg>"
    )
