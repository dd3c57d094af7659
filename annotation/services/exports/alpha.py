"""Krippendorff's alpha of an export's ratings, accumulated while the export streams."""
from __future__ import annotations


class _AlphaAccumulator:
    """Krippendorff's alpha (interval and ordinal) over 1–5 scores, accumulated item by item.

    Keeps only the 5×5 coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"), so it
    runs in constant memory during a streaming export. Items with fewer than two scores are not pairable and are
    ignored, as in the ``krippendorff`` package.
    """

    def __init__(self) -> None:
        self.coincidence = [[0.0] * 5 for _ in range(5)]

    def add(self, scores: list[int | None]) -> None:
        values = [s for s in scores if s is not None]
        m = len(values)
        if m < 2:
            return
        counts = [0] * 5
        for value in values:
            counts[value - 1] += 1
        present = [(c, n) for c, n in enumerate(counts) if n]  # only the values used: 1-3 of 5 for most items
        for c, n_c in present:
            row = self.coincidence[c]
            for k, n_k in present:
                pairs = n_c * (n_k - 1 if c == k else n_k)
                if pairs:
                    row[k] += pairs / (m - 1)

    def alpha(self, level: str) -> float | None:
        """Alpha at ``level`` ("interval" or "ordinal"); None when there is no pairable value or no variation."""
        o = self.coincidence
        n_c = [sum(row) for row in o]
        n = sum(n_c)
        if n <= 1:
            return None

        def delta2(c: int, k: int) -> float:
            if level == "interval":
                return float((c - k) ** 2)
            low, high = min(c, k), max(c, k)
            return (sum(n_c[low : high + 1]) - (n_c[c] + n_c[k]) / 2) ** 2

        observed = sum(o[c][k] * delta2(c, k) for c in range(5) for k in range(5))
        expected = sum(n_c[c] * n_c[k] * delta2(c, k) for c in range(5) for k in range(5))
        if expected == 0:
            return None
        return 1.0 - (n - 1) * observed / expected
