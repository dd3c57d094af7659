"""Likelihoods and moments of the ORCA output heads (ORCA paper, Section 4; upstream BUTSpeechFIT/ORCA).

Two heads share the same interface: the network emits a raw tensor ``out`` of shape (B, K) per item and
every individual rating of that item is scored under the distribution it defines.

* ``beta``: K = 2, ``out = (log α, log β)`` (Eq. 1); ratings y = (r−1)/4 ∈ [0, 1] are scored with the Beta
  density (Eq. 2). Because log Beta(0; α, β) is infinite, y is clamped to [eps, 1−eps] first
  (upstream uses eps = 0.01). μ = α/(α+β) (Eq. 3), σ² = αβ/((α+β)²(α+β+1)) (Eq. 4).
* ``multinomial``: K = 5 logits over the Likert points, normalised positions v = (0, .25, .5, .75, 1);
  ratings are scored with the categorical log-probability; μ = Σ p_k v_k, σ² = Σ p_k (v_k − μ)².

Shapes: B items, R the padded number of ratings per item; ``ratings`` holds Likert integers 1..5 and 0
for padding; ``mask`` is ``ratings > 0``.
"""

from __future__ import annotations

import torch

from .data import N_POINTS

HEADS = ("beta", "multinomial")
#: Heads that can be scored (imported checkpoints of the ORCA authors may also be ``bernoulli``; not trained here).
SCORED_HEADS = HEADS + ("bernoulli",)

#: Normalised positions of the five Likert points, y = (r−1)/4.
POINTS = torch.linspace(0.0, 1.0, N_POINTS)


def head_size(head: str) -> int:
    """Number of raw outputs of a head: 2 for ``beta`` (log α, log β), 5 for ``multinomial`` (logits), 2 for
    ``bernoulli`` (logits of "correct", "incorrect"; imported checkpoints only).

    Raises:
        ValueError: unknown head name.
    """
    if head == "beta":
        return 2
    if head == "multinomial":
        return N_POINTS
    if head == "bernoulli":
        return 2
    raise ValueError(f"unknown head {head!r}; choose one of {SCORED_HEADS}")


def soft_limit(x: torch.Tensor, limit: float) -> torch.Tensor:
    """``limit · tanh(x / limit)``: identity near 0, bounded to (−limit, limit). Keeps log α, log β finite."""
    if limit <= 0:
        return x
    return limit * torch.tanh(x / limit)


def beta_log_prob(log_alpha: torch.Tensor, log_beta: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log Beta(y; α, β) = (α−1) log y + (β−1) log(1−y) − log B(α, β) (ORCA paper, Eq. 2).

    Args:
        log_alpha, log_beta: shape (B,) or broadcastable to ``y``; natural-log concentrations.
        y: values strictly inside (0, 1), any shape broadcastable with the parameters.

    Returns:
        Log-density (nats), broadcast shape of the inputs. Computed in float32 or wider.
    """
    a = log_alpha.float().exp()
    b = log_beta.float().exp()
    y = y.float()
    log_b = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
    return (a - 1) * torch.log(y) + (b - 1) * torch.log1p(-y) - log_b


def rating_nll(out: torch.Tensor, ratings: torch.Tensor, head: str, eps: float = 0.01) -> torch.Tensor:
    """Negative log-likelihood of every individual rating (ORCA paper, Eq. 5, negated; per rating).

    Args:
        out: (B, K) raw head outputs (see module docstring).
        ratings: (B, R) Likert integers 1..5, 0 = padding.
        head: ``"beta"`` or ``"multinomial"``.
        eps: Beta only; normalised ratings are clamped to [eps, 1−eps] (0 < eps < 0.5).

    Returns:
        (B, R) NLL in nats, 0 at padded positions.

    Raises:
        ValueError: unknown head, or ``out`` has the wrong width.
    """
    if out.shape[-1] != head_size(head):
        raise ValueError(f"head {head!r} expects {head_size(head)} outputs, got {out.shape[-1]}")
    if head not in HEADS:
        raise ValueError(f"head {head!r} is scored but not trained here; choose one of {HEADS}")
    mask = ratings > 0
    if head == "beta":
        y = ((ratings.float() - 1.0) / (N_POINTS - 1)).clamp(eps, 1.0 - eps)
        lp = beta_log_prob(out[:, :1], out[:, 1:2], y)
    else:
        logp = torch.log_softmax(out.float(), dim=-1)
        idx = (ratings - 1).clamp(min=0).long()
        lp = torch.gather(logp, 1, idx)
    return torch.where(mask, -lp, torch.zeros_like(lp))


def reduce_nll(nll: torch.Tensor, ratings: torch.Tensor, reduction: str = "rating",
               weights: torch.Tensor | None = None) -> torch.Tensor:
    """Reduce a (B, R) per-rating NLL to a scalar.

    ``"rating"``: mean over all ratings in the batch (each rating weighs the same, as Eq. 5 does).
    ``"item"``: mean over items of each item's mean rating NLL (each item weighs the same).
    ``"sum"``: plain Σ_i Σ_j (Eq. 5 negated).

    ``weights`` (B,) > 0, optional: item i's terms count ``weights[i]`` times (a weighted mean: Σ w_i·NLL / Σ w_i·n_i
    for ``rating``, Σ w_i·mean_i / Σ w_i for ``item``, Σ w_i·NLL for ``sum``); None = all 1 (the formulas above).

    Raises:
        ValueError: unknown reduction.
    """
    mask = (ratings > 0).float()
    w = torch.ones(nll.shape[0], dtype=nll.dtype, device=nll.device) if weights is None else weights.to(nll.dtype)
    if reduction == "rating":
        return (nll.sum(dim=1) * w).sum() / (mask.sum(dim=1) * w).sum().clamp(min=1e-12)
    if reduction == "item":
        per_item = nll.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return (per_item * w).sum() / w.sum().clamp(min=1e-12)
    if reduction == "sum":
        return (nll.sum(dim=1) * w).sum()
    raise ValueError(f"unknown reduction {reduction!r}; choose rating, item or sum")


def mean_bce(mu: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None,
             eps: float = 1e-6) -> torch.Tensor:
    """Soft-label cross-entropy of predicted means against mean ratings, a weighted mean over items:
    Σ_i w_i·(−[ȳ_i log μ_i + (1−ȳ_i) log(1−μ_i)]) / Σ_i w_i.

    The fractional-response (Bernoulli quasi-likelihood) loss of Papke & Wooldridge (1996, J. Applied Econometrics
    11(6)) for a mean ȳ in [0, 1]: it is minimised over μ at μ = ȳ (its minimum is the binary entropy H(ȳ), not 0),
    so it is proper for the mean whatever the spread of the ratings, and its gradient in μ, (μ − ȳ)/(μ(1 − μ)),
    does not vanish for a single rating at 0 or 1 (where the Beta NLL of one clamped rating can be lowered by a
    U-shaped Beta instead of a better μ).

    Args:
        mu: (B,) predicted means in (0, 1) (``predict_moments(out, head)["mu"]``); clamped to [eps, 1−eps].
        target: (B,) mean normalised ratings ȳ = mean((r−1)/4) in [0, 1].
        weights: (B,) item weights > 0 (None: all 1).

    Returns:
        Scalar, nats per item.
    """
    mu = mu.float().clamp(eps, 1.0 - eps)
    target = target.to(mu.dtype)
    bce = -(target * torch.log(mu) + (1.0 - target) * torch.log1p(-mu))
    w = torch.ones_like(bce) if weights is None else weights.to(bce.dtype)
    return (bce * w).sum() / w.sum().clamp(min=1e-12)


def beta_moments(alpha: torch.Tensor, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean μ = α/(α+β) (Eq. 3) and variance σ² = αβ/((α+β)²(α+β+1)) (Eq. 4) of Beta(α, β).

    Args:
        alpha, beta: positive tensors of equal shape.

    Returns:
        (mu, var): mu in (0, 1), var in (0, 0.25); same shape as the inputs.
    """
    s = alpha + beta
    return alpha / s, alpha * beta / (s * s * (s + 1.0))


def categorical_moments(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of a categorical over the normalised Likert points (0, .25, .5, .75, 1).

    Args:
        probs: (B, 5) probabilities summing to 1 along the last axis.

    Returns:
        (mu, var), each (B,): mu in [0, 1], var in [0, 0.25] (population variance of the distribution).
    """
    v = POINTS.to(device=probs.device, dtype=probs.dtype)
    mu = (probs * v).sum(-1)
    var = (probs * (v - mu.unsqueeze(-1)) ** 2).sum(-1)
    return mu, var


def moment_matched_beta(mu: torch.Tensor, var: torch.Tensor, floor: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Beta(α, β) with the given mean and variance: α = μ ν, β = (1−μ) ν with ν = μ(1−μ)/σ² − 1.

    Used to report α, β for the multinomial head. ν is floored at ``floor`` (a distribution on {0, 1} has
    σ² = μ(1−μ) and no Beta match), so α, β > 0 always.
    """
    mu_c = mu.clamp(1e-6, 1 - 1e-6)
    nu = (mu_c * (1 - mu_c) / var.clamp(min=1e-12) - 1.0).clamp(min=floor)
    return mu_c * nu, (1 - mu_c) * nu


def predict_moments(out: torch.Tensor, head: str) -> dict[str, torch.Tensor]:
    """Turn raw head outputs (B, K) into per-item predictions.

    Returns:
        dict of (B,) float tensors: ``mu`` (expected correctness, [0, 1]), ``var`` (predicted disagreement,
        variance on the normalised scale, [0, 0.25]), ``alpha``, ``beta`` (> 0; moment-matched for the
        multinomial and bernoulli heads) and, for the multinomial head, ``probs`` (B, 5). Beta: ORCA paper Eqs. 1,
        3, 4; multinomial: mean and variance of the categorical over y = (k−1)/4; bernoulli: the ORCA authors'
        μ = softmax(out)[0] and σ² = 0.

    Raises:
        ValueError: unknown head.
    """
    out = out.float()
    if head == "beta":
        alpha, beta = out[:, 0].exp(), out[:, 1].exp()
        mu, var = beta_moments(alpha, beta)
        return {"mu": mu, "var": var, "alpha": alpha, "beta": beta}
    if head == "multinomial":
        probs = torch.softmax(out, dim=-1)
        mu, var = categorical_moments(probs)
        alpha, beta = moment_matched_beta(mu, var)
        return {"mu": mu, "var": var, "alpha": alpha, "beta": beta, "probs": probs}
    if head == "bernoulli":
        # The ORCA authors' definition: μ = softmax(logits)[0], σ² = 0 (their head predicts no disagreement).
        mu = torch.softmax(out, dim=-1)[:, 0]
        var = torch.zeros_like(mu)
        alpha, beta = moment_matched_beta(mu, var)
        return {"mu": mu, "var": var, "alpha": alpha, "beta": beta}
    raise ValueError(f"unknown head {head!r}; choose one of {SCORED_HEADS}")
