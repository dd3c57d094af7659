"""LLM judge benchmark: each mode of the packaged local judge model against the mean human rating on seed-108 dev.

Usage (from the repository root)::

    .venv/bin/python bench/judges.py [--data-dir ../shared/data/orca_seed108] [--model smollm2]
        [--generate-limit 30] [--threads 2] [--batch-size 8] [--variant full] [--no-server]

Prints ONE JSON object on stdout::

    {"models": {"<model or server>": {"generate": {scored_share, rho, tau, s_per_item, n},
                                      "probability": {...}, "probability_yesno": {...}}},
     "n_items", "variant", "threads", "generate_items", "load_avg"}

Items: the 269 candidate answers of ``seed_108_dev.json``; the human score is the mean of an item's non-null
ratings. Each mode builds its prompts exactly as a judge job does (the variant's template, reduced to the score
line or the yes/no question in the probability modes) and runs through the judge clients of
``annotation.judging.clients``:

* ``<model> (transformers)``: :class:`LocalTransformersJudge` in this process (``--threads`` torch threads);
  probability modes in batches of one question's candidates (``--batch-size``), generate with the default length
  cap (128 new tokens) and the expected-score forward pass;
* ``<model> (llama.cpp server)``: the same GGUF served by ``python -m llama_cpp.server`` on 127.0.0.1
  (``--threads`` threads), asked through :class:`OpenAICompatJudge` (generate: ``max_tokens`` 256 with
  ``top_logprobs``; probability modes: ``max_tokens=1``, ``top_logprobs=20``). Left out with a reason when
  llama-cpp-python is not installed or ``--no-server``.

``generate`` is slow on CPU, so it runs on the first ``--generate-limit`` items (in file order; ``n`` says how
many); the probability modes run on all items (or the first ``--limit``; ``n_items`` says how many). ``scored_share``:
items with a score (generate: a parsable reply) / items asked; ``rho``/``tau``: Spearman ρ and Kendall τ-b (scipy)
of the scores against the human mean over the scored items; ``s_per_item``: wall seconds per item (model loading
excluded) on ``--threads`` threads, on a machine that may be shared (``load_avg`` before and after), after one
untimed warm-up call per mode; ``cpu_s_per_item``: CPU seconds per item of this process and, for the server, of the
server process (steadier on a shared machine); ``speedup``: generate's seconds per item divided by each probability
mode's. Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _log(**event) -> None:
    print(json.dumps(event), file=sys.stderr, flush=True)


def load_items(path: Path) -> list[dict]:
    """``[{key, question_id, prompt texts…, human}]`` for the items with at least one non-null rating."""
    data = json.loads(path.read_text(encoding="utf-8"))
    items = []
    for key, value in data.items():
        scores = [r for r in value.get("ratings") or [] if r is not None]
        if not scores:
            continue
        items.append({
            "key": key,
            "question_id": re.sub(r"_M\d+_\d+$", "", key),
            "texts": dict(question=value["question"], reference_answer=value["reference"],
                          candidate_answer=value["candidate"], rationale=value.get("rationale") or "",
                          transcript=value.get("transcription") or ""),
            "human": sum(scores) / len(scores),
        })
    return items


def prompts_for(items: list[dict], *, variant: str, mode: str) -> list[str]:
    """The judge prompts of ``items`` in ``mode`` (as ``annotation.services.judging.judge_prompt_for`` builds them)."""
    from annotation.judging.probability import probability_prompt
    from annotation.judging.prompting import prompt_render, prompt_template

    template = prompt_template(variant)
    return [probability_prompt(prompt=prompt_render(variant=variant, **item["texts"]), template=template, mode=mode)
            for item in items]


class Clock:
    """Wall seconds and CPU seconds (this process, all threads, plus the server process when given)."""

    def __init__(self, server_pid: int | None = None):
        import psutil

        self.server = psutil.Process(server_pid) if server_pid else None

    def _cpu(self) -> float:
        cpu = time.process_time()
        if self.server is not None:
            times = self.server.cpu_times()
            cpu += times.user + times.system
        return cpu

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), self._cpu()
        return self

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, self._cpu() - self.cpu


def metrics(scores: list[float | None], human: list[float], seconds: tuple[float, float]) -> dict:
    """scored_share, rho, tau over the scored items, s_per_item (wall), cpu_s_per_item, n."""
    from scipy.stats import kendalltau, spearmanr

    pairs = [(s, h) for s, h in zip(scores, human, strict=True) if s is not None]
    wall, cpu = seconds
    out = {"scored_share": round(len(pairs) / len(scores), 4) if scores else None, "rho": None, "tau": None,
           "s_per_item": round(wall / len(scores), 4) if scores else None,
           "cpu_s_per_item": round(cpu / len(scores), 4) if scores else None, "n": len(scores)}
    if len(pairs) >= 3 and len({s for s, _ in pairs}) > 1:
        xs, ys = zip(*pairs, strict=True)
        out["rho"] = round(float(spearmanr(xs, ys).statistic), 4)
        out["tau"] = round(float(kendalltau(xs, ys).statistic), 4)
    return out


def run_probability(client, items: list[dict], *, variant: str, mode: str, batch_size: int, clock: Clock) -> dict:
    """Score every item in ``mode``; batches are one question's candidates (at most ``batch_size``)."""
    from annotation.judging.probability import distribution_score

    by_question: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_question.setdefault(item["question_id"], []).append(index)
    prompts = prompts_for(items, variant=variant, mode=mode)
    scores: list[float | None] = [None] * len(items)
    client.score(prompts=prompts[:1], mode=mode)  # warm-up, untimed
    clock.__enter__()
    for indices in by_question.values():
        for start in range(0, len(indices), batch_size):
            chunk = indices[start:start + batch_size]
            for index, reply in zip(chunk, client.score(prompts=[prompts[i] for i in chunk], mode=mode), strict=True):
                if reply.distribution is not None:
                    scores[index] = distribution_score(distribution=reply.distribution, mode=mode)
            _log(
                event=mode, done=sum(s is not None for s in scores),
                elapsed_s=round(time.perf_counter() - clock.wall, 1),
            )
    seconds = clock.stop()
    result = metrics(scores, [item["human"] for item in items], seconds)
    _log(event="mode", mode=mode, **result)
    return result


def run_generate(client, items: list[dict], *, variant: str, clock: Clock) -> dict:
    """Generate and parse a reply for each item; also the expected score's ρ where log-probabilities came."""
    from annotation.judging.parsing import parse_judge_reply

    prompts = prompts_for(items, variant=variant, mode="generate")
    scores, expected = [], []
    client.judge(prompt=prompts[0])  # warm-up (one-time set-up of generation), untimed
    clock.__enter__()
    for index, prompt in enumerate(prompts):
        reply = client.judge(prompt=prompt)
        parsed = parse_judge_reply(reply.text)
        scores.append(parsed.score)
        expected.append(reply.expected_score if parsed.ok else None)
        _log(event="generate", item=index, score=parsed.score, chars=len(reply.text),
             elapsed_s=round(time.perf_counter() - clock.wall, 1))
    seconds = clock.stop()
    human = [item["human"] for item in items]
    result = metrics(scores, human, seconds)
    exp = metrics(expected, human, seconds)
    result["expected_score"] = {"scored_share": exp["scored_share"], "rho": exp["rho"], "tau": exp["tau"]}
    _log(event="mode", mode="generate", **result)
    return result


def bench_model(client, items, *, variant, generate_items, batch_size, server_pid=None) -> dict:
    """The three modes of one judge client; ``speedup``: generate's seconds per item over each probability mode's."""
    clock = Clock(server_pid)
    out = {
        "probability": run_probability(client, items, variant=variant, mode="probability", batch_size=batch_size,
                                       clock=clock),
        "probability_yesno": run_probability(client, items, variant=variant, mode="probability_yesno",
                                             batch_size=batch_size, clock=clock),
        "generate": run_generate(client, items[:generate_items], variant=variant, clock=clock),
    }
    out["speedup"] = {mode: {key: round(out["generate"][key] / out[mode][key], 1)
                             for key in ("s_per_item", "cpu_s_per_item") if out[mode][key]}
                      for mode in ("probability", "probability_yesno")}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "orca_seed108"))
    parser.add_argument("--model", default="smollm2", help="local judge model: 'smollm2', a .gguf or a folder")
    parser.add_argument("--variant", default="full")
    parser.add_argument("--limit", type=int, default=0, help="only the first N items in every mode (0: all)")
    parser.add_argument("--generate-limit", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--no-server", action="store_true", help="skip the llama.cpp server")
    parser.add_argument("--no-local", action="store_true", help="skip the in-process transformers model")
    args = parser.parse_args(argv)
    # A plain `kill` still stops the llama.cpp server: SystemExit runs the context manager's cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    import scipy.stats  # noqa: F401 - imported before any timing
    import torch

    from annotation.judging.clients import LocalTransformersJudge, OpenAICompatJudge, _load, resolve_local_model
    from annotation.judging.llamacpp import llama_cpp_available, llama_server
    from annotation.providers.base import RetryPolicy
    from annotation.providers.openai_compat import OpenAICompatAudioChat

    torch.set_num_threads(args.threads)
    path = Path(args.data_dir) / "seed_108_dev.json"
    if not path.is_file():
        raise SystemExit(f"{path}: not found (the seed-108 dev split; see ../shared/data/README.md)")
    items = load_items(path)
    if args.limit:
        items = items[: args.limit]
    generate_items = min(args.generate_limit, len(items))
    load_before = os.getloadavg()[0]
    out: dict = {"models": {}, "n_items": len(items), "variant": args.variant, "threads": args.threads,
                 "generate_items": generate_items}

    if not args.no_local:
        _log(event="load", model=args.model)
        _load(args.model, "cpu")
        client = LocalTransformersJudge(name=args.model, model=args.model, batch_size=args.batch_size)
        out["models"][f"{args.model} (transformers)"] = bench_model(
            client, items, variant=args.variant, generate_items=generate_items, batch_size=args.batch_size)

    server_key = f"{args.model} (llama.cpp server)"
    folder, gguf = resolve_local_model(args.model)
    if args.no_server:
        out["models"][server_key] = {"skipped": "--no-server"}
    elif not gguf:
        out["models"][server_key] = {"skipped": f"{args.model} is not a GGUF model"}
    elif not llama_cpp_available():
        out["models"][server_key] = {"skipped": "llama-cpp-python[server] is not installed"}
    else:
        with llama_server(model_path=str(Path(folder) / gguf), threads=args.threads) as server:
            chat = OpenAICompatAudioChat(base_url=server.url, model="smollm2", timeout_s=600, policy=RetryPolicy(),
                                         temperature=0.0, max_tokens=256)
            client = OpenAICompatJudge(name=server_key, chat=chat)
            # The server scores one prompt per request: the batch size only groups the requests.
            out["models"][server_key] = bench_model(client, items, variant=args.variant,
                                                    generate_items=generate_items, batch_size=args.batch_size,
                                                    server_pid=server.process.pid)
    out["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
