"""The mean loss (``TrainConfig.mu_weight``, issue 36): a soft-label cross-entropy of μ against each item's mean
normalised rating, added to the Beta / categorical NLL and the σ² penalty with the items' weights. Checked against
hand computations (scipy for the Beta NLL) on a stand-in model with fixed outputs, so no base model is needed."""

import importlib
import math
from types import SimpleNamespace

import pytest
import torch
from scipy import stats

from modelling.orca.cli import parse_args, train_configs
from modelling.orca.config import OrcaConfig
from modelling.orca.data import OrcaItem
from modelling.orca.losses import mean_bce, predict_moments
from modelling.orca.train import TrainConfig, _batch_loss, _prepare, _Run, train

train_module = importlib.import_module("modelling.orca.train")  # the module (the package exports a function train)


def test_mean_bce_hand_value_weighted_and_minimised_at_the_mean():
    mu, target, w = torch.tensor([0.8, 0.3]), torch.tensor([1.0, 0.5]), torch.tensor([1.0, 3.0])
    hand = (-math.log(0.8) + 3 * -(0.5 * math.log(0.3) + 0.5 * math.log(0.7))) / 4
    assert float(mean_bce(mu, target, w)) == pytest.approx(hand, rel=1e-6)
    assert float(mean_bce(mu, target)) == pytest.approx((-math.log(0.8) - 0.5 * math.log(0.21)) / 2, rel=1e-6)
    # proper for the mean: over a grid of μ the smallest loss is at μ = ȳ, and its value is the entropy H(ȳ)
    grid = torch.linspace(0.01, 0.99, 99)
    losses = torch.stack([mean_bce(m.view(1), torch.tensor([0.25])) for m in grid])
    assert float(grid[int(losses.argmin())]) == pytest.approx(0.25, abs=1e-6)
    assert float(losses.min()) == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), rel=1e-5)


class _FixedOutputs(torch.nn.Module):
    """Stands in for an ORCA model: item k (token id k + 1) gets the raw head outputs ``table[k]``."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(torch.tensor(table, dtype=torch.float32))

    def forward(self, inp, mask):
        return self.table[inp[:, 0] - 1]


# one rating at 5 (y = 1), one at 1 (y = 0; weight 3 through its group), two ratings 4 and 2 (ȳ = 0.5, s² = 0.125)
ITEMS = [OrcaItem(id="a", question="q", reference="r", candidate="c", ratings=(5,)),
         OrcaItem(id="b", question="q", reference="r", candidate="c", ratings=(1,), groups=(("benchmark", "AQ"),)),
         OrcaItem(id="c", question="q", reference="r", candidate="c", ratings=(4, 2))]
BETA_OUT = [[0.3, -0.2], [-0.5, 0.4], [1.0, 0.7]]  # log α, log β
MULTI_OUT = [[0.1, -0.3, 0.2, 0.5, 1.0], [1.2, 0.1, -0.4, 0.0, -1.0], [0.0, 0.3, 0.6, 0.2, -0.2]]


def _loss(monkeypatch, head, table, **tc_kw) -> float:
    monkeypatch.setattr(train_module, "encode_items", lambda tok, items, mc: [[k + 1] for k in range(len(items))])
    tc = TrainConfig(freeze_layers=0, group_weights={"benchmark=AQ": 3.0}, **tc_kw)
    run = _Run(mc=OrcaConfig(head=head), tc=tc, model=_FixedOutputs(table), tok=SimpleNamespace(pad_token_id=0),
               train_items=ITEMS, dev_items=[], emit=lambda e: None)
    _prepare(run)
    return float(_batch_loss(run, [0, 1, 2])[0].detach())


def _hand(head, table, var_weight, mu_weight, single_rating_nll=True) -> float:
    out = torch.tensor(table)
    w, ybar = [1.0, 3.0, 1.0], [1.0, 0.0, 0.5]
    w_nll = w if single_rating_nll else [0.0, 0.0, 1.0]
    if head == "beta":
        a, b = out[:, 0].exp().tolist(), out[:, 1].exp().tolist()
        lp = [[stats.beta.logpdf(min(max((r - 1) / 4, 0.01), 0.99), a[i], b[i]) for r in it.ratings]
              for i, it in enumerate(ITEMS)]
    else:
        logp = torch.log_softmax(out, -1).tolist()
        lp = [[logp[i][r - 1] for r in it.ratings] for i, it in enumerate(ITEMS)]
    nll = -sum(wi * sum(x) for wi, x in zip(w_nll, lp)) / sum(wi * len(it.ratings) for wi, it in zip(w_nll, ITEMS))
    moments = predict_moments(out, head)
    mu, var = moments["mu"].tolist(), moments["var"].tolist()
    var_term = abs(var[2] - 0.125)  # the only item with ≥ 2 ratings (its weight 1 / 1)
    bce = sum(wi * -(y * math.log(m) + (1 - y) * math.log(1 - m)) for wi, y, m in zip(w, ybar, mu)) / sum(w)
    return nll + var_weight * var_term + mu_weight * bce


@pytest.mark.parametrize("head, table", [("beta", BETA_OUT), ("multinomial", MULTI_OUT)])
def test_batch_loss_is_nll_plus_variance_penalty_plus_weighted_mean_loss(monkeypatch, head, table):
    for var_weight, mu_weight in ((5.0, 0.0), (5.0, 2.0), (0.0, 0.7)):
        got = _loss(monkeypatch, head, table, var_weight=var_weight, mu_weight=mu_weight)
        assert got == pytest.approx(_hand(head, table, var_weight, mu_weight), rel=1e-5)
    # the mean term is what changes the loss, and mu_weight 0 leaves the paper loss + σ² penalty as they were
    off, on = _loss(monkeypatch, head, table, mu_weight=0.0), _loss(monkeypatch, head, table, mu_weight=1.0)
    assert on - off == pytest.approx(_hand(head, table, 0.0, 1.0) - _hand(head, table, 0.0, 0.0), rel=1e-5)
    assert on - off > 0.1
    # the variant: items with one rating bring only the mean term (and keep their weight there)
    got = _loss(monkeypatch, head, table, mu_weight=2.0, single_rating_nll=False)
    assert got == pytest.approx(_hand(head, table, 5.0, 2.0, single_rating_nll=False), rel=1e-5)
    assert got != pytest.approx(_hand(head, table, 5.0, 2.0), rel=1e-3)


def test_mean_loss_moves_mu_of_a_single_rating_towards_it(monkeypatch):
    """One rating at 5 (y = 1): the gradient of the mean term in (log α, log β) raises α and lowers β, i.e. μ."""
    monkeypatch.setattr(train_module, "encode_items", lambda tok, items, mc: [[k + 1] for k in range(len(items))])
    model = _FixedOutputs(BETA_OUT)
    run = _Run(mc=OrcaConfig(head="beta"), tc=TrainConfig(freeze_layers=0, var_weight=0.0, mu_weight=1.0),
               model=model, tok=SimpleNamespace(pad_token_id=0), train_items=ITEMS, dev_items=[], emit=lambda e: None)
    _prepare(run)
    loss, nll, r = _batch_loss(run, [0])
    (loss - nll.sum()).backward()  # the mean term alone (one item, one rating: the NLL part is nll.sum())
    g = model.table.grad[0]
    assert g[0] < 0 < g[1]


def test_cli_mu_weight_option_and_bad_values():
    a = parse_args(["train", "--train", "t.jsonl", "--out", "m"])
    assert train_configs(a)[1].mu_weight == 0.0
    a = parse_args(["train", "--train", "t.jsonl", "--out", "m", "--mu-weight", "1.5"])
    assert train_configs(a)[1].mu_weight == 1.5
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="mu_weight"):
            train(ITEMS, None, None, None, TrainConfig(mu_weight=bad))
