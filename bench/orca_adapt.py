"""ORCA adapting to a new benchmark from its first ratings: a learning curve on AQEval val (issue 36, "Benchmark").

AQEval val (``../shared/data/aqeval_val/val.csv``: 1,968 answers of 4 LALMs to 496 Clotho-AQA / AudioCaps
questions, one aggregated human label 0 / 0.5 / 1 per answer, read as the rating 1 / 3 / 5) is split into 5 folds by
question (``filename`` + ``question``). For each fold and n ∈ {0, 250, 500, 1000, all}, n in-domain answers of the
other 4 folds (whole questions in a seeded random order, the last one cut to make n) plus seed-108 train fine-tune
the model trained on seed-108 train alone (the ``cpu-minilm`` preset; trained once and cached, reused across n and
folds) with the new benchmark's loss weighted up (``--weight``, group ``benchmark=AQEval``), and the held-out fold
is scored. n = 0 is that seed-108 model itself (the naive baseline: ORCA as a team gets it today). "scratch" trains
the base LM from scratch on seed-108 train and all in-domain answers of the 4 folds (same weight). Figures per n:
Spearman ρ, Kendall τ-b and MAE_μ of μ (unclamped) against the human label on the held-out fold, mean over folds,
and ``u_shaped``, the share of held-out answers given a U-shaped Beta (α < 1 and β < 1);
for a trained cell also ``seed108_dev`` (ρ, MAE_μ of the same model on seed-108 dev: what adapting costs there).
``--mu-weight W`` adds the mean loss (``TrainConfig.mu_weight``: soft-label cross-entropy of μ against the label) to
the adaptations and scratch models; the cached seed-108 model (n = 0) stays the preset's; ``--no-single-nll`` drops
the Beta NLL of items with one rating there (``TrainConfig.single_rating_nll``). ``--sizes scratch`` runs scratch
alone. ``--adapt-freeze N`` freezes the lowest N layers in the adaptations (6: the head only), ``--no-replay``
adapts on the in-domain answers alone, and ``--probes`` instead fits ridge probes on frozen features over the 5 folds
(:func:`probes`: what a linear read-out of the seed-108 ORCA, of sentence embeddings or of the answer's lexical
overlap with the reference gains).

``ppi_width_ratio_0.2``: the cross-fitted μ of the n = all models (each fold scored by the model that never saw it)
in the platform's PPI++ estimator (``modelling.leaderboard.stats.ppi_mean``) against its classical interval
(``classical_mean``) for each LALM's mean label, at a 20 % rating budget (uniform draws of answers, ``--ppi-draws``
repetitions): mean interval width PPI ÷ classical, averaged over the 4 LALMs; beside it the same with the n = 0
model's μ (the naive figure).

Prints one JSON object: {"curve": {"0": {"rho", "tau", "mae_mu", "folds"}, "250": ..., "all": ...}, "scratch":
{...}, "ppi_width_ratio_0.2", "ppi_width_ratio_0.2_n0", "ppi_lambda", "targets", "settings", "device", "wall_s",
"load_avg"}. ``--lexical``: the base and scratch models' heads also read the answer's lexical overlap with the
reference (``OrcaConfig.lexical``, :mod:`modelling.orca.features`). ``--quick``: one fold, n ∈ {0, 250}, 300
seed-108 items, 1 epoch (a smoke test, not the figures).
``--jobs J`` trains J folds at once (processes; on a GPU they share it). ``--recorded-check`` instead trains with
LoRA and compares the dev metrics a run records with ``evaluate`` of its saved folder (on the training device and
on the CPU, two batch sizes), and what the training loop's own last-epoch scoring gave.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = Path(os.environ.get("ORCA_BENCH_DATA", ROOT.parent / "shared" / "data"))
BENCHMARK = "AQEval"
SIZES = ("0", "250", "500", "1000", "all")
TARGETS = {"rho_all": 0.65, "rho_500": 0.60}


def aqeval_items(path: Path):
    """(items, lalms): AQEval answers as ORCA items (label 0 / 0.5 / 1 → rating 1 / 3 / 5; groups benchmark and
    answer type; question id ``filename|question``) and each answer's LALM."""
    from modelling.orca import OrcaItem

    items, lalms = [], []
    with path.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            label = float(row["final_annotation"])
            if label not in (0.0, 0.5, 1.0):
                raise ValueError(f"{path}: row {i + 2}: final_annotation {row['final_annotation']!r} is not 0/0.5/1")
            items.append(OrcaItem(id=f"aq{i}", question=row["question"], reference=row["reference"],
                                  candidate=row["response"] or " ", ratings=(int(1 + 4 * label),),
                                  groups=(("benchmark", BENCHMARK), ("type", row["type"])),
                                  question_id=f"{row['filename']}|{row['question']}"))
            lalms.append(row["model"])
    return items, lalms


def folds_of(items, k: int, seed: int = 0) -> list[int]:
    """Fold (0..k-1) of each item, by question: questions shuffled (seeded) and dealt round-robin."""
    questions = sorted({it.question_id for it in items})
    random.Random(seed).shuffle(questions)
    fold = {q: i % k for i, q in enumerate(questions)}
    return [fold[it.question_id] for it in items]


def in_domain_sample(pool, n: int | None, seed: int):
    """``n`` answers of ``pool`` (None: all): whole questions in a seeded random order, the last one cut."""
    if n is None:
        return list(pool)
    by_q: dict[str, list] = {}
    for it in pool:
        by_q.setdefault(it.question_id, []).append(it)
    order = sorted(by_q)
    random.Random(seed).shuffle(order)
    out = []
    for q in order:
        out.extend(by_q[q])
        if len(out) >= n:
            break
    return out[:n]


def settings_of(a) -> dict:
    from modelling.orca import preset

    values = preset("cpu-minilm") | {"device": a.device}
    if a.epochs:
        values["epochs"] = a.epochs
    if getattr(a, "max_length", 0):
        values["max_length"] = a.max_length
    if getattr(a, "lexical", False):
        values["lexical"] = True
    return values


def configs(a, **overrides):
    """(OrcaConfig, TrainConfig) of the preset with ``overrides`` (preset keys replace the preset's values)."""
    from modelling.orca import configs_from_settings

    values = settings_of(a)
    for key in [k for k in overrides if k in values]:
        values[key] = overrides.pop(key)
    return configs_from_settings(values, seed=0, threads=a.threads, **overrides)


def base_model(a, seed_train, seed_dev) -> Path:
    """The seed-108-only model (the cpu-minilm preset), trained once into the cache and reused."""
    import hashlib

    from modelling.orca import load_orca, train

    key = json.dumps({"settings": settings_of(a), "n": len(seed_train)}, sort_keys=True)
    folder = Path(a.cache) / f"seed108-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    record = folder / "bench_key.json"
    if record.exists() and record.read_text() == key:
        load_orca(folder)  # checks the files and tokenizer of the cached folder
        return folder
    train(seed_train, seed_dev, folder, *configs(a))
    record.write_text(key)
    return folder


def score(model, tok, items, device) -> dict:
    from modelling.orca import evaluate_predictions, item_targets, predict

    pred = predict(model, tok, items, device=device)
    hm, hv = item_targets(items)
    m = evaluate_predictions(pred["mu"], pred["var"], hm, hv)
    u_shaped = sum(1 for a_, b_ in zip(pred["alpha"], pred["beta"]) if a_ < 1 and b_ < 1) / max(1, len(items))
    return {"rho": m["rho"], "tau": m["tau"], "mae_mu": m["mae_mu"], "u_shaped": u_shaped, "mu": pred["mu"]}


def run_task(a, fold: int, size: str, base: str, seed_train, items, folds, seed_dev=()) -> dict:
    """One (fold, n) cell: train (n = 0: none; "scratch": from the base LM) and score the held-out fold (and, for a
    trained cell, ``seed_dev``). Returns {fold, size, rho, tau, mae_mu, mu (per held-out item), ids, n_in_domain,
    train_s, seed108_dev ({rho, tau, mae_mu}; trained cells with ``seed_dev`` only)}."""
    import torch

    from modelling.orca import load_orca, train

    if a.threads:
        torch.set_num_threads(a.threads)
    test = [it for it, f in zip(items, folds) if f == fold]
    pool = [it for it, f in zip(items, folds) if f != fold]
    weights = {f"benchmark={BENCHMARK}": a.weight}
    t0 = time.perf_counter()
    if size == "0":
        model, tok = load_orca(base, a.device)
        chosen = []
    else:
        chosen = in_domain_sample(pool, None if size in ("all", "scratch") else int(size), seed=fold)
        start = {} if size == "scratch" else {"init_from": base, "epochs": a.adapt_epochs or settings_of(a)["epochs"]}
        if size != "scratch" and getattr(a, "adapt_freeze", None) is not None:
            start["freeze_layers"] = a.adapt_freeze
        replay = list(seed_train) if size == "scratch" or not a.replay else list(seed_train)[: a.replay]
        if size != "scratch" and getattr(a, "no_replay", False):
            replay = []
        res = train(replay + chosen, None, None,
                    *configs(a, group_weights=weights, mu_weight=getattr(a, "mu_weight", 0.0),
                             single_rating_nll=not getattr(a, "no_single_nll", False), **start))
        model, tok = res["model"], res["tokenizer"]
    train_s = round(time.perf_counter() - t0, 1)
    out = score(model, tok, test, a.device) | {"fold": fold, "size": size, "ids": [it.id for it in test],
                                              "n_in_domain": len(chosen), "train_s": train_s}
    if chosen and seed_dev:
        out["seed108_dev"] = {k: v for k, v in score(model, tok, list(seed_dev), a.device).items() if k != "mu"}
    return out


def tasks_of(a) -> list[tuple[int, str]]:
    """(fold, size) cells, the figures the targets need first (0, all, 500, scratch, then the rest), so that a run
    cut short still holds whole rows."""
    first = [s for s in ("0", "all", "500") if s in a.sizes]
    rest = [s for s in a.sizes if s not in first and s != "scratch"]
    order = first + (["scratch"] if "scratch" in a.sizes or not a.no_scratch else []) + rest
    return [(f, s) for s in order for f in range(a.folds)]


def ppi_ratio(y, mu, lalms, budget: float, draws: int, seed: int = 0) -> dict:
    """Mean PPI++ ÷ classical interval width of each LALM's mean label at ``budget`` (share of its answers rated,
    uniform), with the platform's estimators; averaged over LALMs. Also the mean power-tuning λ."""
    import numpy as np

    from modelling.leaderboard.stats import classical_mean, ppi_mean

    rng = np.random.default_rng(seed)
    y, mu, lalms = np.asarray(y, float), np.asarray(mu, float), np.asarray(lalms)
    ratios, lambdas = {}, []
    for name in sorted(set(lalms.tolist())):
        idx = np.flatnonzero(lalms == name)
        n = max(3, round(budget * idx.size))
        w_ppi, w_cls = [], []
        for _ in range(draws):
            lab = rng.choice(idx, size=n, replace=False)
            p = ppi_mean(y=y[lab], yhat=mu[lab], yhat_all=mu[idx])
            c = classical_mean(y[lab])
            if p.ci and c.ci:
                w_ppi.append(p.ci[1] - p.ci[0])
                w_cls.append(c.ci[1] - c.ci[0])
            cov = np.cov(y[lab], mu[lab])
            lambdas.append(float(np.clip(cov[0, 1] / cov[1, 1], 0, 1)) if cov[1, 1] > 1e-12 else 0.0)
        ratios[name] = float(np.mean(w_ppi) / np.mean(w_cls))
    return {"ratio": float(np.mean(list(ratios.values()))), "per_lalm": ratios, "lambda": float(np.mean(lambdas))}


def summarise(results: list[dict], items, lalms, a) -> dict:
    """The JSON figures of the finished cells: per n the mean over the folds done (and each fold's), scratch, and
    the PPI width ratio once n = all and n = 0 cover every fold."""
    keys = ("rho", "tau", "mae_mu", "u_shaped")
    by_size: dict[str, list[dict]] = {}
    for r in sorted(results, key=lambda r: r["fold"]):
        by_size.setdefault(r["size"], []).append(r)

    def mean_of(rows):
        return {k: float(sum(r[k] for r in rows) / len(rows)) for k in keys} | {
            "n_folds": len(rows), "folds": [{k: round(r[k], 4) for k in keys} for r in rows],
            "n_in_domain": [r["n_in_domain"] for r in rows], "train_s": [r["train_s"] for r in rows]} | (
            {"seed108_dev": [{k: round(v, 4) for k, v in r["seed108_dev"].items()} for r in rows]}
            if all("seed108_dev" in r for r in rows) else {})

    out = {"curve": {s: mean_of(by_size[s]) for s in a.sizes if s in by_size and s != "scratch"}}
    if "scratch" in by_size:
        out["scratch"] = mean_of(by_size["scratch"])
    if all(len(by_size.get(s, [])) == 5 for s in ("all", "0")):
        y = {it.id: (it.ratings[0] - 1) / 4 for it in items}
        ids = [it.id for it in items]
        mu = {s: {i: m for r in by_size[s] for i, m in zip(r["ids"], r["mu"])} for s in ("all", "0")}
        adapted = ppi_ratio([y[i] for i in ids], [mu["all"][i] for i in ids], lalms, 0.2, a.ppi_draws)
        naive = ppi_ratio([y[i] for i in ids], [mu["0"][i] for i in ids], lalms, 0.2, a.ppi_draws)
        out |= {"ppi_width_ratio_0.2": adapted["ratio"], "ppi_width_ratio_0.2_per_lalm": adapted["per_lalm"],
                "ppi_lambda": adapted["lambda"], "ppi_width_ratio_0.2_n0": naive["ratio"]}
    return out


def _sentence_embeddings(model, tok, texts: list[str]):
    """(N, H) L2-normalised mean-pooled last hidden states of ``texts`` (each on its own, 128 tokens)."""
    import numpy as np
    import torch

    out = []
    with torch.no_grad():
        for s0 in range(0, len(texts), 64):
            batch = tok(texts[s0 : s0 + 64], padding=True, truncation=True, max_length=128, return_tensors="pt")
            h = model.backbone(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            out.append(torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1).numpy())
    return np.concatenate(out)


def probes(a, items, folds, base) -> dict:
    """Ridge probes on frozen features (``--probes``): for each feature set, Spearman ρ of a ridge regression
    (``sklearn.linear_model.RidgeCV``, α ∈ [0.01, 1000]) fitted on 4 folds' labels and scored on the 5th, per fold
    and mean. Feature sets: the seed-108 ORCA's μ (no fit), its head's input (mean-pooled last hidden state of
    the ORCA input), the base LM's same, and separate sentence embeddings of reference, answer and question
    (products, distances, cosine), alone and with the seed-108 μ and log answer length; the lexical overlap of
    answer and reference (:func:`modelling.orca.features.lexical_features`), alone, with μ and with everything above."""
    import numpy as np
    import torch
    from scipy.stats import spearmanr
    from sklearn.linear_model import RidgeCV

    from modelling.orca import OrcaConfig, build_orca, load_orca, predict
    from modelling.orca.features import lexical_features
    from modelling.orca.model import encode_items, lower_hidden

    if a.threads:
        torch.set_num_threads(a.threads)
    folds = np.asarray(folds)
    y = np.array([(it.ratings[0] - 1) / 4 for it in items])

    def pooled(model, tok):
        ids = encode_items(tok, items, model.config)
        hs = lower_hidden(model.backbone, ids, model.backbone.config.num_hidden_layers, tok.pad_token_id, 64, "cpu")
        return np.stack([h.mean(0).numpy() for h in hs])

    orca, otok = load_orca(base, "cpu")
    orca.eval()
    mu = np.array(predict(orca, otok, items)["mu"])
    lm, ltok = build_orca(OrcaConfig(pooling="auto"))
    lm.eval()
    er, ea, eq = (_sentence_embeddings(lm, ltok, [getattr(it, f) for it in items])
                  for f in ("reference", "candidate", "question"))
    cos = (er * ea).sum(1)
    pair = np.c_[er * ea, np.abs(er - ea), cos]
    lexical = np.array(lexical_features(items))
    everything = np.c_[pair, eq * ea, mu, np.log1p([len(it.candidate.split()) for it in items])]
    sets = {"orca_hidden": pooled(orca, otok), "base_lm_hidden": pooled(lm, ltok), "sentence_pair": pair,
            "sentence_pair+mu": np.c_[pair, mu], "sentence_pair+question+length+mu": everything,
            "lexical": lexical, "lexical+mu": np.c_[lexical, mu], "lexical+sentence_pair+question+length+mu":
            np.c_[lexical, everything]}
    out = {"mu_n0": [float(spearmanr(mu[folds == f], y[folds == f])[0]) for f in range(5)],
           "cosine_ref_answer": [float(spearmanr(cos[folds == f], y[folds == f])[0]) for f in range(5)]}
    for name, x in sets.items():
        out[name] = []
        for f in range(5):
            fit = RidgeCV(alphas=np.logspace(-2, 3, 12)).fit(x[folds != f], y[folds != f])
            out[name].append(float(spearmanr(fit.predict(x[folds == f]), y[folds == f])[0]))
    return {k: {"mean": round(float(np.mean(v)), 4), "folds": [round(r, 4) for r in v]} for k, v in out.items()}


def recorded_check(a, seed_train, seed_dev) -> dict:
    """Train with LoRA on the device; compare the recorded dev metrics with ``evaluate`` of the saved folder."""
    import tempfile

    from modelling.orca import evaluate_predictions, item_targets, load_orca, predict, train

    folder = Path(tempfile.mkdtemp()) / "lora"
    history = []
    res = train(seed_train, seed_dev, folder, *configs(a, lora_rank=8, freeze_layers=0, epochs=a.epochs or 2),
                callback=lambda e: history.append(e) if e["event"] == "epoch" else None)
    recorded = json.loads((folder / "config.json").read_text())["dev_metrics"]["unclamped"]
    hm, hv = item_targets(seed_dev)
    out = {"recorded": {k: recorded[k] for k in ("rho", "mae_mu")},
           "training_loop_last_epoch": {k: history[-1]["dev"][k] for k in ("rho", "mae_mu")}}
    for device in dict.fromkeys([a.device, "cpu"]):
        model, tok = load_orca(folder, device)
        for bs in (32, 64):
            pred = predict(model, tok, seed_dev, batch_size=bs, device=device)
            m = evaluate_predictions(pred["mu"], pred["var"], hm, hv)
            out[f"evaluate_{device}_bs{bs}"] = {"rho": m["rho"], "mae_mu": m["mae_mu"],
                                               "abs_diff_rho": abs(m["rho"] - recorded["rho"])}
    out["train_wall_s"] = round(res["train_wall_s"], 1)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1 fold, n in {0, 250}, 300 seed-108 items, 1 epoch")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--folds", type=int, default=5, help="folds evaluated (of 5)")
    p.add_argument("--sizes", default=",".join(SIZES), help="in-domain sizes, comma-separated (0, N, all)")
    p.add_argument("--weight", type=float, default=4.0, help="loss weight of the benchmark's answers")
    p.add_argument("--mu-weight", type=float, default=0.0,
                   help="mean-loss weight (TrainConfig.mu_weight) of adaptations and scratch (the base: the preset's)")
    p.add_argument("--no-single-nll", action="store_true",
                   help="adaptations and scratch: no rating NLL for items with one rating (the mean loss only)")
    p.add_argument("--epochs", type=int, default=0, help="epochs of the base and scratch models (0: the preset's)")
    p.add_argument("--adapt-epochs", type=int, default=0, help="epochs of an adaptation (0: as --epochs)")
    p.add_argument("--max-length", type=int, default=0,
                   help="input tokens of the base and scratch models (0: the preset's; an adaptation keeps its base's)")
    p.add_argument("--lexical", action="store_true",
                   help="base and scratch models read the answer's lexical overlap with the reference (OrcaConfig."
                        "lexical; an adaptation keeps its base's)")
    p.add_argument("--seed-items", type=int, default=0,
                   help="use only this many seed-108 train items, and dev in proportion (0: all; a smoke test)")
    p.add_argument("--replay", type=int, default=0,
                   help="seed-108 train items replayed in an adaptation (the first N; 0: all of them)")
    p.add_argument("--adapt-freeze", type=int, default=None,
                   help="lowest layers frozen in an adaptation (default: the preset's 2; 6 = the head only)")
    p.add_argument("--no-replay", action="store_true", help="adapt on the in-domain answers alone")
    p.add_argument("--probes", action="store_true",
                   help="instead: ridge probes of frozen features, 5 folds (what a linear read-out gains)")
    p.add_argument("--no-scratch", action="store_true")
    p.add_argument("--jobs", type=int, default=1, help="folds trained at once (processes)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads per process (0: default)")
    p.add_argument("--ppi-draws", type=int, default=300)
    p.add_argument("--cache", default=str(ROOT / "var" / "orca_adapt_cache"))
    p.add_argument("--out", help="also write the JSON here (after every fold: partial results survive)")
    p.add_argument("--recorded-check", action="store_true", help="the recorded-vs-evaluate check instead")
    a = p.parse_args(argv)
    if a.quick:
        a.folds, a.sizes, a.seed_items, a.epochs, a.ppi_draws = 1, "0,250", a.seed_items or 300, 1, 50
        a.no_scratch = True
    a.sizes = [s.strip() for s in a.sizes.split(",")]
    t0 = time.time()
    from modelling.orca import load_items

    seed_train = load_items(DATA / "orca_seed108" / "seed_108_train.json")
    seed_dev = load_items(DATA / "orca_seed108" / "seed_108_dev.json")
    if a.seed_items:  # a smoke test: fewer seed-108 items, dev cut in proportion (at least 40)
        seed_train = seed_train[: a.seed_items]
        seed_dev = seed_dev[: max(40, a.seed_items // 7)]
    head = {"device": a.device, "settings": {k: v for k, v in vars(a).items() if k not in ("out",)}}
    if a.recorded_check:
        out = head | {"recorded_check": recorded_check(a, seed_train, seed_dev)}
    elif a.probes:
        items, _ = aqeval_items(DATA / "aqeval_val" / "val.csv")
        out = head | {"probes": probes(a, items, folds_of(items, 5), base_model(a, seed_train, seed_dev))}
    else:
        items, lalms = aqeval_items(DATA / "aqeval_val" / "val.csv")
        folds = folds_of(items, 5)
        base = str(base_model(a, seed_train, seed_dev))
        results: list[dict] = []
        out = head
        tasks = tasks_of(a)
        if a.jobs > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor, as_completed

            with ProcessPoolExecutor(a.jobs, mp_context=mp.get_context("spawn")) as pool:
                futures = [pool.submit(run_task, a, f, s, base, seed_train, items, folds, seed_dev) for f, s in tasks]
                for fut in as_completed(futures):
                    results.append(fut.result())
                    out = _write(a, head | summarise(results, items, lalms, a), t0)
        else:
            for f, s in tasks:
                results.append(run_task(a, f, s, base, seed_train, items, folds, seed_dev))
                out = _write(a, head | summarise(results, items, lalms, a), t0)
        out["targets"] = TARGETS | {"rho_0_today": 0.53}
    out = _write(a, out, t0)
    print(json.dumps(out))
    return 0


def _write(a, out: dict, t0: float) -> dict:
    out = out | {"wall_s": round(time.time() - t0, 1), "load_avg": list(os.getloadavg())}
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1, default=float) + "\n")
    return out


if __name__ == "__main__":
    sys.exit(main())
