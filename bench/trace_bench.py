"""Trace import and viewer speed, and the step-level suggesters' accuracy against Who&When references.

    python bench/trace_bench.py            # 1,000 Who&When-shaped logs; a 5,000-step, ~20 MB OTLP trace
    python bench/trace_bench.py --quick    # a small smoke run (the test suite runs this)
    python bench/trace_bench.py --attribution ../shared/datasets/who_and_when   # also: accuracy per rule

The logs are synthesised from the shapes of the Who&When files (both field variants, their agents,
roles and message lengths), the OTLP trace from the GenAI conventions (agents invoking chats and
tools, nested three deep). Targets: >= 200 logs/s; the big trace imported in <= 10 s; its coding
page's first screen served in <= 300 ms median (server time, in-process); the same number of
queries for a 50-step and a 5,000-step trace. Runs on a fresh SQLite file (or DATABASE_URL).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = (
    next(
        (p for p in (ROOT.parent / "shared", Path("/work/shared")) if (p / "datasets" / "who_and_when").is_dir()),
        ROOT.parent / "shared",
    )
    / "datasets"
    / "who_and_when"
)
WORDS = [
    *[
        "agent",
        "tool",
        "call",
        "search",
        "result",
        "page",
        "click",
        "verify",
        "answer",
        "plan",
        "step",
        "expert",
        "code",
        "output",
        "error",
        "file",
    ],
    *[
        "data",
        "table",
        "count",
        "check",
        "value",
        "number",
        "list",
        "web",
        "browse",
        "summary",
        "final",
        "reason",
        "task",
    ],
]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def shapes() -> dict:
    """Agents and message lengths of the Who&When files in shared/, or built-in ones without them."""
    algo = {"agents": ["Excel_Expert", "BusinessLogic_Expert", "Verification_Expert"], "lengths": [600, 1500, 300]}
    hand = {"roles": ["Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer"], "lengths": [900, 2000]}
    if SHARED.is_dir():
        for path in SHARED.rglob("*.json"):
            data = json.loads(path.read_text())
            target = algo if "system_prompt" in data else hand
            for h in data["history"]:
                if "name" in h and target is algo:
                    algo["agents"].append(h["name"])
                elif target is hand:
                    hand["roles"].append(h["role"])
                target["lengths"].append(len(h["content"]))
    return {"algo": algo, "hand": hand}


def synth_log(rng: random.Random, n: int, shape: dict) -> dict:
    """One Who&When-shaped log: either field variant, 5-40 steps, a mistake agent and step."""
    algorithm = n % 2 == 0
    steps = rng.randint(5, 40)
    history = []
    for i in range(steps):
        length = min(rng.choice(shape["algo" if algorithm else "hand"]["lengths"]), 4000) // 6 + 5
        if algorithm:
            name = "Computer_terminal" if i % 3 == 2 else rng.choice(shape["algo"]["agents"])
            content = "exitcode: 0 (execution succeeded)\nCode output: " if name == "Computer_terminal" else ""
            history.append({"content": content + _words(rng, length), "role": "assistant", "name": name})
        else:
            history.append(
                {"content": _words(rng, length), "role": "human" if i == 0 else rng.choice(shape["hand"]["roles"])}
            )
    mistake = rng.randrange(steps)
    speaker = history[mistake].get("name") or history[mistake]["role"].split(" (")[0]
    log = {
        "question": f"Question {n}: {_words(rng, 20)}?",
        "ground_truth": str(rng.randint(1, 99)),
        "question_ID": f"q-{n:06d}",
        "mistake_agent": speaker,
        "mistake_step": str(mistake),
        "mistake_reason": _words(rng, 15),
        "history": history,
    }
    if algorithm:
        log.update(
            is_correct=False,
            level=str(rng.randint(1, 3)),
            system_prompt=dict.fromkeys(shape["algo"]["agents"][:3], "role"),
        )
    else:
        log.update(is_corrected=False)
    return log


def _kv(key, value):
    return {"key": key, "value": {"stringValue": value}}


def big_otlp(steps: int, per_span: int, rng: random.Random) -> dict:
    """An OTLP/JSON trace of `steps` spans: agents invoking chats and tools, nested three deep."""
    t0 = 1_767_225_600_000_000_000
    spans, agents = [], ["planner", "coder", "reviewer", "browser"]
    parent_agent = None
    for i in range(steps):
        start = t0 + i * 10_000_000
        attrs = []
        if i % 25 == 0:
            agent = agents[(i // 25) % len(agents)]
            parent, name = ("s0" if i else ""), f"invoke_agent {agent}"
            attrs = [_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", agent)]
            parent_agent = f"s{i}"
        elif i % 2:
            parent, name = parent_agent, "chat gpt-4o"
            attrs = [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.request.model", "gpt-4o"),
                _kv(
                    "gen_ai.input.messages",
                    json.dumps([{"role": "user", "parts": [{"type": "text", "content": _words(rng, per_span // 12)}]}]),
                ),
                _kv(
                    "gen_ai.output.messages",
                    json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": _words(rng, per_span // 12)}]}]
                    ),
                ),
            ]
        else:
            parent, name = parent_agent, "execute_tool search"
            attrs = [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", "search"),
                _kv("gen_ai.tool.call.id", f"call_{i}"),
                _kv("gen_ai.tool.call.arguments", json.dumps({"q": _words(rng, 5)})),
                _kv("gen_ai.tool.call.result", _words(rng, per_span // 6)),
            ]
        span = {
            "traceId": "b" * 32,
            "spanId": f"s{i}",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 8_000_000),
            "attributes": attrs,
            "status": {"code": 1},
        }
        if parent:
            span["parentSpanId"] = parent
        spans.append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", "bench-agent")]},
                "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
            }
        ]
    }


def setup_django(work: Path) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FAULTLINE_DEV", "1")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        os.environ["DATABASE_URL"] = f"sqlite:///{work / 'trace_bench.sqlite3'}"
    import django

    django.setup()


def first_screen(client, url: str, repeats: int) -> tuple[float, int]:
    """Median server time (ms) of the coding page, and its number of queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    queries = 0
    for i in range(repeats + 1):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.status_code
        if i:  # the first request warms caches (codebook picker, templates)
            times.append(elapsed)
            queries = len(ctx.captured_queries)
    return statistics.median(times), queries


def _fig(p) -> dict:
    return {"value": None if p.value is None else round(p.value, 3), "low": None if p.low is None else round(p.low, 3),
            "high": None if p.high is None else round(p.high, 3), "k": p.k, "n": p.n}  # fmt: skip


def attribution_accuracy(folder: Path) -> dict:
    """Every local rule and the position prior on the evaluate split of each Who&When half.

    Logs split by a hash of "<half>/<file name>" (lib.stats.attribution.split_of); the prior's k (one for exact
    hits, one for ±3) and its agent are chosen on the choose split of the same half, and every figure is measured
    on the evaluate split only. The openai backend is measured too when OPENAI_API_KEY is set.
    """
    import numpy as np

    from annotate.suggestions.steps import LOCAL_RULE, RULES
    from annotate.traces.parsers import iter_trace_records
    from lib.stats.attribution import choose_prior, held_out, split_of

    halves: dict[str, dict[str, list]] = {}
    for p in sorted(folder.rglob("*.json")):
        for tr in iter_trace_records(p, "whowhen"):
            if tr.reference.get("step") is None or not tr.steps:
                continue
            half = "hand_crafted" if "hand" in p.parent.name.lower() else "algorithm_generated"
            split = split_of(f"{p.parent.name}/{p.name}")
            halves.setdefault(half, {"choose": [], "evaluate": []})[split].append(tr)
    out = {"logs": sum(len(v["choose"]) + len(v["evaluate"]) for v in halves.values()), "chosen": LOCAL_RULE}
    out["halves"] = {}
    for half, split in sorted(halves.items()):
        choose, evaluate = split["choose"], split["evaluate"]
        if not choose or not evaluate:
            out["halves"][half] = {"error": "too few logs to split into choose and evaluate halves"}
            continue
        prior = choose_prior(
            np.array([t.reference["step"] for t in choose]),
            np.array([len(t.steps) for t in choose]),
            [t.reference["agent"] for t in choose],
        )
        ref_steps = np.array([t.reference["step"] for t in evaluate])
        n_steps = np.array([len(t.steps) for t in evaluate])
        ref_agents = [t.reference["agent"] for t in evaluate]
        rules = {}
        for name, rule in RULES.items():
            guesses = [rule(t.steps) for t in evaluate]
            h = held_out(
                steps=np.array([-1 if g.step is None else g.step for g in guesses]),
                agents=[g.agent for g in guesses],
                ref_steps=ref_steps, ref_agents=ref_agents, n_steps=n_steps, prior=prior,
            )  # fmt: skip
            rules[name] = {k: _fig(getattr(h, k)) for k in ("step_exact", "step_pm3", "agent")}
            if name == LOCAL_RULE:
                chosen = h
        out["halves"][half] = {
            "choose_logs": len(choose), "evaluate_logs": len(evaluate),
            "prior": {"k_exact": prior.k_exact, "k_pm3": prior.k_pm3, "agent": prior.agent},
            **{k: _fig(getattr(chosen, k)) for k in (
                "step_exact", "step_pm3", "agent", "prior_step_exact", "prior_step_pm3", "prior_agent")},
            "rules": rules,
        }  # fmt: skip
    if os.environ.get("OPENAI_API_KEY"):
        from annotate.suggestions.base import codebook_spec
        from annotate.suggestions.llm import LLMSuggester, trace_attribution
        from taxonomy.models import Codebook

        suggester = LLMSuggester(codebook_spec(Codebook.objects.get()))
        records = [t for v in halves.values() for t in v["evaluate"]]
        hits = {"step": 0, "agent": 0, "answered": 0}
        for tr in records:
            got = trace_attribution(suggester, title=tr.record.title, steps=tr.steps)
            if got["error"]:
                continue
            hits["answered"] += 1
            hits["step"] += got["step"] == tr.reference["step"]
            hits["agent"] += got["agent"].lower() == tr.reference["agent"].lower()
        out["openai"] = {k: round(v / len(records), 3) for k, v in hits.items()} | {"logs": len(records)}
    return out


def print_attribution(acc: dict) -> None:
    def show(f: dict) -> str:
        if f["value"] is None:
            return "—"
        return f"{f['value']:.0%} [{f['low']:.0%}, {f['high']:.0%}] ({f['k']}/{f['n']})"

    for half, h in acc["halves"].items():
        if "error" in h:
            print(f"{half}: {h['error']}")
            continue
        p = h["prior"]
        print(
            f"{half}: chosen on {h['choose_logs']} logs, measured on {h['evaluate_logs']} held-out logs; "
            f"prior: step {p['k_exact']} (exact), step {p['k_pm3']} (±3), agent {p['agent']!r}"
        )
        for key in ("step_exact", "step_pm3", "agent"):
            print(f"  {key:11} rule {acc['chosen']}: {show(h[key]):28} prior: {show(h['prior_' + key])}")
        for name, figures in h["rules"].items():
            print(f"  rule {name:18} " + "  ".join(f"{k} {show(v)}" for k, v in figures.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--attribution", type=Path, help="a folder of Who&When logs to measure the suggesters on")
    parser.add_argument(
        "--record",
        action="store_true",
        help="with --attribution: save the held-out figures to annotate/suggestions/heldout.json, the one place "
        "the agreement page and README read them from",
    )
    args = parser.parse_args()
    n_logs, big_steps, per_span, repeats = (60, 400, 4000, 3) if args.quick else (1000, 5000, 4000, 15)
    work = Path(tempfile.mkdtemp(prefix="trace-bench-"))
    setup_django(work)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from annotate.models import Episode
    from annotate.studies.services import membership_set, study_create
    from annotate.traces.services import import_traces
    from taxonomy.services import codebook_load, codebook_read_file

    codebook = codebook_load(data=codebook_read_file(ROOT / "fixtures" / "codebook-v1.json"), publish=True)
    study = study_create(slug="bench", name="Trace bench", codebook=codebook.codebook)
    rng = random.Random(11)
    shape = shapes()
    logs = work / "logs"
    logs.mkdir()
    for n in range(n_logs):
        (logs / f"{n}.json").write_text(json.dumps(synth_log(rng, n, shape)))
    started, cpu = time.perf_counter(), time.process_time()
    result = import_traces(study=study, paths=[logs], fmt="whowhen")
    logs_s, logs_cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.created == n_logs, result.summary()
    started = time.perf_counter()
    again = import_traces(study=study, paths=[logs], fmt="whowhen")
    reimport_s = time.perf_counter() - started
    assert again.unchanged == n_logs, again.summary()

    big = work / "big.json"
    big.write_text(json.dumps(big_otlp(big_steps, per_span, rng)))
    size_mb = big.stat().st_size / 1e6
    started = time.perf_counter()
    import_traces(study=study, paths=[big], fmt="otlp")
    big_s = time.perf_counter() - started
    small = work / "small.json"
    small.write_text(json.dumps(big_otlp(50, per_span, rng) | {}).replace("b" * 32, "c" * 32))
    import_traces(study=study, paths=[small], fmt="otlp")

    user = get_user_model().objects.create_user(username="coder", password="x")
    membership_set(study=study, user=user, role="coder")
    client = Client()
    client.force_login(user)
    otlp = Episode.objects.filter(document__kind="trace", document__meta__format="otlp").select_related("document")
    eps = {e.document.meta["trace"]["steps"]: e for e in otlp}
    big_ms, big_q = first_screen(client, f"/studies/bench/episodes/{eps[big_steps].pk}/code/", repeats)
    small_ms, small_q = first_screen(client, f"/studies/bench/episodes/{eps[50].pk}/code/", repeats)
    window_ms, _ = first_screen(
        client, f"/studies/bench/documents/{eps[big_steps].document_id}/trace/?start=4800", repeats
    )

    print(f"database: {os.environ['DATABASE_URL'].split(':')[0]}", file=sys.stderr)
    print(
        f"Who&When-shaped logs: {n_logs:,} in {logs_s:.2f} s = {n_logs / logs_s:,.0f} logs/s (target >= 200); "
        f"re-import {n_logs / reimport_s:,.0f} logs/s"
    )
    print(f"OTLP trace: {big_steps:,} steps, {size_mb:.1f} MB imported in {big_s:.2f} s (target <= 10 s)")
    print(
        f"coding page, first screen: {big_ms:.0f} ms median for {big_steps:,} steps, {small_ms:.0f} ms for 50 "
        f"(target <= 300 ms); queries {big_q} vs {small_q}; a later window: {window_ms:.0f} ms"
    )
    summary = {
        "bench": "trace",
        "whowhen_logs_per_s": round(n_logs / logs_s, 1),
        "big_trace_import_s": round(big_s, 2),
        "first_screen_median_ms": round(big_ms, 1),
        "first_screen_queries_small": small_q,
        "first_screen_queries_big": big_q,
        "first_screen_small_median_ms": round(small_ms, 1),
        "window_median_ms": round(window_ms, 1),
        "whowhen_reimport_per_s": round(n_logs / reimport_s, 1),
        # On a busy machine wall time includes waiting for a core; this process's CPU time does not.
        "whowhen_logs_per_cpu_s": round(n_logs / logs_cpu, 1),
        "big_trace_mb": round(size_mb, 1),
        "big_trace_steps": big_steps,
        "logs": n_logs,
        "quick": args.quick,
    }
    folder = args.attribution or (SHARED if SHARED.is_dir() and not args.quick else None)
    if folder is not None:
        acc = attribution_accuracy(folder)
        print_attribution(acc)
        if args.record:
            from annotate.suggestions.heldout import PATH

            PATH.write_text(json.dumps(acc | {"source": str(folder)}, indent=1) + "\n")
        summary["attribution"] = acc
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
