"""Rater reliability benchmark: can the quality signals find injected bad raters in real multi-rater data?

On two real data sets,

* ``codec_mushra`` — a MUSHRA listening test (``../shared/data/codec_mushra/ratings_formated.csv``: every
  listener as recorded, 21 real ``participant_ids``, 144 stimuli). MUSHRA 0–100 is mapped to 1–5 in the fixed
  bins of the MUSHRA scale's own labels: [0, 20) bad = 1, [20, 40) poor = 2, [40, 60) fair = 3, [60, 80) good = 4,
  [80, 100] excellent = 5.
* ``seed108`` — the ORCA seed-108 train + dev ratings as the importer stores them: rating position n of an item
  is the account ``orca-annotator-n`` (the data carries no annotator ids); a null rating is U/E (no score).

it injects synthetic bad raters — ``--per-type`` (default 1) of each type: uniform random, always the same
score (the data's most frequent score, the hardest constant to spot), reversed scale (6 − a real rating of the
item) and half random (a real rating of the item, or with probability ½ a uniform random one) — each rating as
many items as the median real rater, on items drawn at random. It then computes the signals of
``modelling.reliability.signals`` (with the default policy's ``min_ratings`` and, as the crowd's cut-off for the random
share, its ``pause_score``) and reports, per data set, the ROC AUC of each signal (oriented so that higher means
"injected") and of the combined risk for separating injected from real raters; Krippendorff's alpha
(ordinal) clean / with the injected raters / after excluding every rater the default thresholds pause
(``QualityPolicy`` defaults: combined risk >= ``pause_score`` with >= ``min_ratings`` scored ratings); and how
many real and injected raters were paused. The injection is repeated ``--repeats`` times (seeds ``seed`` ..
``seed + repeats - 1``, new items and random draws each time): AUCs and alphas are the means over repeats, with
the worst AUC in ``auc_min``; ``real_paused``/``injected_paused`` are the largest / smallest count of a repeat.

    .venv/bin/python bench/quality.py [--per-type 1] [--repeats 5] [--seed 0]

Prints one JSON object: ``{"datasets": {"codec_mushra": {...}, "seed108": {...}}, "wall_s": ...}``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO))

#: Signals whose AUC is reported, with the sign that makes "higher = more likely injected".
SIGNALS = {"loo_rho": -1, "loo_mae": 1, "ds_accuracy": -1, "straightline": 1, "abs_leniency": 1, "random_share": 1}


def mushra_to_score(value: float) -> int:
    """MUSHRA 0–100 to 1–5 in the scale's labelled bands (bad/poor/fair/good/excellent, 20 points each)."""
    return int(min(5, max(1, 1 + int(value // 20))))


def load_codec_mushra() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item ids, rater ids, scores 1–5) of the MUSHRA test, one entry per rating."""
    items, raters, scores = [], [], []
    with open(DATA / "codec_mushra" / "ratings_formated.csv", newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh)):
            for value, pid in zip(json.loads(row["ratings"]), json.loads(row["participant_ids"]), strict=True):
                items.append(n)
                raters.append(int(pid))
                scores.append(mushra_to_score(float(value)))
    return np.array(items), np.array(raters), np.array(scores, dtype=float)


def load_seed108() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item ids, rater ids = rating position 1.., scores 1–5 or NaN) of seed-108 train + dev, as imported."""
    items, raters, scores = [], [], []
    n = 0
    for split in ("train", "dev"):
        data = json.loads((DATA / "orca_seed108" / f"seed_108_{split}.json").read_text())
        for key in sorted(data):
            for position, value in enumerate(data[key]["ratings"], start=1):
                items.append(n)
                raters.append(position)
                scores.append(np.nan if value is None else float(value))
            n += 1
    return np.array(items), np.array(raters), np.array(scores, dtype=float)


def inject(items, raters, scores, *, per_type: int, rng: np.random.Generator):
    """Append ``per_type`` raters of each bad type (module docstring); returns the arrays and the injected ids."""
    scored = ~np.isnan(scores)
    counts = np.bincount(np.unique(raters[scored], return_inverse=True)[1])
    n_items = int(np.median(counts))
    unique_items = np.unique(items[scored])
    by_item: dict[int, np.ndarray] = {}
    order = np.argsort(items[scored], kind="stable")
    s_items, s_scores = items[scored][order], scores[scored][order]
    starts = np.searchsorted(s_items, unique_items)
    ends = np.searchsorted(s_items, unique_items, side="right")
    for item, a, b in zip(unique_items, starts, ends):
        by_item[int(item)] = s_scores[a:b]
    mode = int(np.bincount(scores[scored].astype(int)).argmax())
    next_id = int(raters.max()) + 1000
    new_items, new_raters, new_scores, injected = [], [], [], {}
    for kind in ("uniform", "constant", "reversed", "half_random"):
        for _ in range(per_type):
            rater = next_id
            next_id += 1
            injected[rater] = kind
            chosen = rng.choice(unique_items, size=min(n_items, unique_items.size), replace=False)
            for item in chosen:
                real = float(rng.choice(by_item[int(item)]))
                if kind == "uniform":
                    value = rng.integers(1, 6)
                elif kind == "constant":
                    value = mode
                elif kind == "reversed":
                    value = 6 - real
                else:
                    value = rng.integers(1, 6) if rng.random() < 0.5 else real
                new_items.append(int(item))
                new_raters.append(rater)
                new_scores.append(float(value))
    return (np.concatenate([items, new_items]), np.concatenate([raters, new_raters]),
            np.concatenate([scores, new_scores]), injected)


def alpha(items, scores) -> float | None:
    from annotation.agreement import krippendorff_alpha, value_counts_matrix

    keep = ~np.isnan(scores)
    counts = value_counts_matrix(candidate_ids=items[keep], scores=scores[keep].astype(np.int64))
    return krippendorff_alpha(value_counts=counts, level="ordinal")


def auc(positive: list[float], negative: list[float]) -> float | None:
    """P(score of a random positive > a random negative), ties ½ (the Mann–Whitney form of ROC AUC)."""
    if not positive or not negative:
        return None
    pos, neg = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def evaluate_once(items, raters, scores, *, per_type: int, seed: int) -> dict:
    from annotation.crowd.models import QualityPolicy
    from modelling.reliability.signals import combined_risk, rater_signals_compute

    policy = QualityPolicy()  # the defaults, unsaved
    rng = np.random.default_rng(seed)
    clean_alpha = alpha(items, scores)
    all_items, all_raters, all_scores, injected = inject(items, raters, scores, per_type=per_type, rng=rng)
    signals = rater_signals_compute(item_ids=all_items, annotator_ids=all_raters, scores=all_scores,
                                    min_items=policy.min_ratings, reference_risk=policy.pause_score)
    combined_risk(signals, min_items=policy.min_ratings, max_attention_failures=policy.max_attention_failures)

    def value(sig, key):
        if key == "abs_leniency":
            return None if sig.leniency is None else abs(sig.leniency)
        return getattr(sig, key)

    aucs = {}
    for key, sign in SIGNALS.items():
        # A missing value (e.g. ρ of a constant rater) counts as the worst.
        pos = [sign * v if (v := value(signals[r], key)) is not None else np.inf for r in injected]
        neg = [sign * v if (v := value(signals[r], key)) is not None else np.inf for r in signals if r not in injected]
        aucs[key] = auc(pos, neg)
    aucs["combined"] = auc([signals[r].combined for r in injected],
                           [signals[r].combined for r in signals if r not in injected])
    paused = {r for r, s in signals.items()
              if s.n_scored >= policy.min_ratings and s.combined is not None and s.combined >= policy.pause_score}
    keep = ~np.isin(all_raters, list(paused))
    real_raters = [r for r in signals if r not in injected]
    return {
        "raters": {"real": len(real_raters), "injected": len(injected),
                   "items_per_injected_rater": int(signals[next(iter(injected))].n_ratings)},
        "paused_real_ids": sorted(int(r) for r in paused if r not in injected),
        "auc": aucs,
        "alpha": {"clean": clean_alpha, "with_injected": alpha(all_items, all_scores),
                  "after_exclusion": alpha(all_items[keep], all_scores[keep])},
        "real_paused": len([r for r in paused if r not in injected]),
        "injected_paused": len([r for r in paused if r in injected]),
        "injected_not_paused": sorted({injected[r] for r in injected if r not in paused}),
        "combined_risk": {
            "real_max": max(signals[r].combined or 0 for r in real_raters),
            "injected_min": min(signals[r].combined or 0 for r in injected),
        },
    }


def evaluate(items, raters, scores, *, per_type: int, seed: int, repeats: int) -> dict:
    """:func:`evaluate_once` for ``repeats`` seeds, aggregated (module docstring)."""
    runs = [evaluate_once(items, raters, scores, per_type=per_type, seed=seed + k) for k in range(repeats)]

    def mean(values):
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    return {
        "raters": runs[0]["raters"],
        "auc": {key: mean(r["auc"][key] for r in runs) for key in runs[0]["auc"]},
        "auc_min": {key: min(r["auc"][key] for r in runs if r["auc"][key] is not None) for key in runs[0]["auc"]},
        "alpha": {key: mean(r["alpha"][key] for r in runs) for key in ("clean", "with_injected", "after_exclusion")},
        "alpha_gap_max": max(abs(r["alpha"]["after_exclusion"] - r["alpha"]["clean"]) for r in runs),
        "real_paused": max(r["real_paused"] for r in runs),
        "injected_paused": min(r["injected_paused"] for r in runs),
        "paused_real_ids": sorted({i for r in runs for i in r["paused_real_ids"]}),
        "injected_not_paused": sorted({kind for r in runs for kind in r["injected_not_paused"]}),
        "combined_risk": {"real_max": max(r["combined_risk"]["real_max"] for r in runs),
                          "injected_min": min(r["combined_risk"]["injected_min"] for r in runs)},
        "repeats": repeats,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-type", type=int, default=1, help="injected raters of each bad type")
    parser.add_argument("--repeats", type=int, default=5, help="injections with different seeds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        raise SystemExit(f"{DATA} is absent: the benchmark needs ../shared/data (codec_mushra, orca_seed108)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
    import django

    django.setup()
    started = time.perf_counter()
    out = {"datasets": {}, "per_type": args.per_type, "seed": args.seed, "repeats": args.repeats,
           "mushra_bins": "[0,20)=1 [20,40)=2 [40,60)=3 [60,80)=4 [80,100]=5"}
    for name, loader in (("codec_mushra", load_codec_mushra), ("seed108", load_seed108)):
        out["datasets"][name] = evaluate(*loader(), per_type=args.per_type, seed=args.seed, repeats=args.repeats)
    out["wall_s"] = round(time.perf_counter() - started, 2)
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
