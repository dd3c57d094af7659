"""The hedged betting capital process for the mean of bounded observations (Waudby-Smith & Ramdas, "Estimating
means of bounded random variables by betting", *JRSS-B* 86(1), 2024, arXiv:2010.09686: the hedged capital process
with their aGRAPA bets), shared by the human-only verdicts (:mod:`modelling.leaderboard.verdicts`, whose docstring
states the process), the prediction-powered ones (:mod:`modelling.leaderboard.verdicts_ppi`) and the planner.
Django-free (numpy only).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Truncation c of the bets (Waudby-Smith & Ramdas 2024 use 1/2 or 3/4; 3/4 decided a 0.10 difference of
#: low-spread values from 200 questions with power 1.00 where 1/2 had 0.87, and cost 0.37 -> 0.33 on bimodal ones).
BET_CAP = 0.75


def betting_process(x: Sequence[float], m: Sequence[float] | float, *, cap: float = BET_CAP) -> np.ndarray:
    """log K_t(m), t = 1..n, of the hedged aGRAPA capital process (module docstring) for each candidate mean.

    Args:
        x: (n,) observations in [0, 1], in the order they arrived.
        m: candidate means in (0, 1): a float or (g,) array.
        cap: the truncation c of the bets, in (0, 1).

    Returns:
        (n, g) array of log capital (n rows, one per look; (n, 1) for a float ``m``). Raises ValueError for
        observations outside [0, 1] or means outside (0, 1).
    """
    x = np.asarray(x, dtype=np.float64)
    grid = np.atleast_1d(np.asarray(m, dtype=np.float64))
    if x.size and (x.min() < 0 or x.max() > 1):
        raise ValueError("betting observations must lie in [0, 1]")
    if (grid <= 0).any() or (grid >= 1).any():
        raise ValueError("candidate means must lie in (0, 1)")
    n = x.size
    t = np.arange(1, n + 1, dtype=np.float64)
    mu_after = (0.5 + np.cumsum(x)) / (t + 1)
    var_after = (0.25 + np.cumsum((x - mu_after) ** 2)) / (t + 1)
    mu_prev = np.concatenate([[0.5], mu_after[:-1]])[:, None]
    var_prev = np.concatenate([[0.25], var_after[:-1]])[:, None]
    delta = mu_prev - grid[None, :]
    lam = delta / (var_prev + delta * delta)
    lam_up = np.clip(lam, 0.0, cap / grid)
    lam_down = np.clip(-lam, 0.0, cap / (1.0 - grid))
    step = x[:, None] - grid[None, :]
    log_up = np.cumsum(np.log1p(lam_up * step), axis=0)
    log_down = np.cumsum(np.log1p(-lam_down * step), axis=0)
    return np.logaddexp(log_up, log_down) - math.log(2.0)
