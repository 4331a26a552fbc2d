"""Suggestion benchmark: local scoring throughput, local training time, LLM batch concurrency.

    python bench/suggest_bench.py [--quick]

- Local scoring of 10,000 synthetic episodes built from the codebook (target ≥ 500/s
  on 2 cores), with the codebook prior alone and with a trained model, side by side.
- Training the local model on 5,000 labelled synthetic episodes (target ≤ 10 s).
- LLM batches through the real openai client against the local OpenAI-compatible
  test server adding 200 ms per request, at concurrency 1 and 8 (8 must give at least 4 times the throughput).

No database is needed: the codebook is read from fixtures/codebook-v1.json.
The last line is one JSON object: {"bench": "suggest", "local_score_per_s", "train_s", "llm_speedup_8_vs_1", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FAULTLINE_DEV", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from annotate.suggestions.base import codebook_spec_from_data  # noqa: E402
from annotate.suggestions.llm import LLMSuggester, make_client  # noqa: E402
from annotate.suggestions.local import LocalSuggester  # noqa: E402
from annotate.suggestions.local_model import TrainingExample, model_train  # noqa: E402
from annotate.tests.factories.llm_server import FakeLLMServer  # noqa: E402
from bench.synthetic_suggest import synthetic_episodes  # noqa: E402

CHUNK = 500  # the batch service scores in chunks of this size


def score_rate(suggester, texts: list[str]) -> tuple[float, float]:
    """Episodes per second, and the top-1 type of the first text (a sanity check that it ran)."""
    started = time.perf_counter()
    first = None
    for i in range(0, len(texts), CHUNK):
        answers = suggester.suggest_texts(texts[i : i + CHUNK])
        first = first or answers[0]
    return len(texts) / (time.perf_counter() - started), first


def llm_rate(spec, server: FakeLLMServer, texts: list[str], concurrency: int) -> float:
    client = make_client(timeout=30)
    suggester = LLMSuggester(spec, study_id=None, client=client, concurrency=concurrency, max_retries=0)
    started = time.perf_counter()
    answers = suggester.suggest_texts(texts)
    elapsed = time.perf_counter() - started
    errors = [a.error for a in answers if a.error]
    if errors:
        raise SystemExit(f"LLM bench: {len(errors)} failed answers, e.g. {errors[0]}")
    return len(texts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    n_score, n_train, n_llm = (1_000, 500, 16) if args.quick else (10_000, 5_000, 64)

    spec = codebook_spec_from_data(json.loads((ROOT / "fixtures" / "codebook-v1.json").read_text()))
    data = synthetic_episodes(spec, n_train + n_score, seed=11)
    train, test = data[:n_train], data[n_train:]
    texts = [d["text"] for d in test]

    cold_rate, _ = score_rate(LocalSuggester(spec), texts[: min(len(texts), 2_000)])
    examples = [
        TrainingExample(i, d["text"], d["failure_type"], False, d["source"], d["stage"], d["capability"])
        for i, d in enumerate(train)
    ]
    started, cpu = time.perf_counter(), time.process_time()
    trained = model_train(spec, examples)
    train_s, train_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    trained_suggester = LocalSuggester(spec, trained)
    trained_rate, _ = score_rate(trained_suggester, texts)
    answers = trained_suggester.suggest_texts(texts[:1000])
    top1 = sum(a.top.failure_type == d["failure_type"] for a, d in zip(answers, test, strict=False)) / len(answers)
    print(
        f"local scoring: {trained_rate:8.0f} episodes/s with the trained model, {cold_rate:8.0f}/s codebook prior only"
    )
    print(
        f"local training on {n_train} labelled episodes: {train_s:.2f} s wall, {train_cpu_s:.2f} s CPU "
        f"(top-1 on held-out synthetic: {top1:.2f})"
    )

    server = FakeLLMServer().start()
    server.delay_s = 0.2
    settings.OPENAI_API_KEY = "sk-bench"
    settings.OPENAI_BASE_URL = server.base_url
    try:
        llm_texts = [d["text"] for d in test[:n_llm]]
        rate1 = llm_rate(spec, server, llm_texts, 1)
        rate8 = llm_rate(spec, server, llm_texts, 8)
    finally:
        server.stop()
    speedup = rate8 / rate1
    print(f"LLM batch, 200 ms per request: {rate1:.2f}/s at concurrency 1, {rate8:.2f}/s at 8 ({speedup:.1f}x)")
    print(
        json.dumps(
            {
                "bench": "suggest",
                "local_score_per_s": round(trained_rate, 1),
                "train_s": round(train_s, 3),
                "train_cpu_s": round(train_cpu_s, 3),
                "llm_speedup_8_vs_1": round(speedup, 2),
                "local_score_prior_only_per_s": round(cold_rate, 1),
                "n_score": n_score,
                "n_train": n_train,
                "synthetic_top1": round(top1, 3),
                "llm_per_s_1": round(rate1, 2),
                "llm_per_s_8": round(rate8, 2),
                "llm_requests": n_llm,
            }
        )
    )


if __name__ == "__main__":
    main()
