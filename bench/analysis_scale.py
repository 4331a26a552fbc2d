"""Step "analysis" of bench/scale_bench.py (issue 31): the analysis of a big study, fresh and from its stored result.

    python bench/scale_bench.py --only analysis --quick   # 20,000 episodes
    python bench/scale_bench.py --only analysis           # 1,000,000 episodes

All N issues are imported (a quarter turned into literature, one paper per four documents, so the default
GitHub - literature contrast and its sensitivity checks have both kinds), 20% are coded twice (1% of those
disagreeing). Then, in this process:
- analysis_fresh_s: a "bootstrap" job with B = 2,000 (one chunk: labels read, replicates drawn, the document
  with its sensitivity checks built and stored), run as a worker runs it (job_run);
- analysis_page_median_ms / _p95_ms: GETs of the analysis page for those parameters through Django's full
  stack, answered from the stored result (each response is checked to say so);
- analysis_stale_page_median_ms: the same after one more coding (the stored result shown, marked stale);
- coverage and agreement: the same, fresh job then page views (agreement with its default B = 1,000; random
  codes give thousands of whole labels, which lib.stats.agreement holds as compact per-episode counts).

    python bench/scale_bench.py --only agreement --quick  # 20,000 episodes: the agreement job, page, document size
    python bench/analysis_scale.py --units 1000000        # lib.stats.agreement alone, no database (agreement_lib)
Targets: page median <= 300 ms; fresh <= 10 s at 20,000 episodes, <= 120 s at 1,000,000.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script (python bench/analysis_scale.py)

from bench.pages_bench import percentile

B = 2_000
SEED = 7


def _literature_share(study) -> None:
    """A quarter of the documents become papers, four documents a paper (clusters of literature)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE annotate_document SET kind = 'literature', cluster = 'paper-' || (id / 16)::text "
            "WHERE study_id = %s AND id %% 4 = 0",
            [study.pk],
        )
        cursor.execute("ANALYZE")


def _job(study, kind: str, params: dict) -> tuple[float, dict]:
    from annotate.jobs.runner import job_run
    from annotate.models import Job

    job = Job.objects.create(kind=kind, study=study, params=params)
    t0 = time.perf_counter()
    job = job_run(job_id=job.pk)
    seconds = time.perf_counter() - t0
    if job.status != "success":
        raise SystemExit(f"{kind} job failed: {job.error}")
    return seconds, job.result


def _views(client, url: str, requests: int, expect: str) -> dict:
    """Wall and CPU milliseconds of GETs of `url` (the CPU time shows what a loaded machine adds to the wall)."""
    times, cpu = [], []
    for i in range(requests + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        r = client.get(url)
        ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        assert r.status_code == 200 and expect in r.content.decode(), (url, r.status_code)
        if i:  # the first view warms the caches of the process, as a worker's first request would
            times.append(ms)
            cpu.append(cpu_ms)
    return {"median_ms": round(statistics.median(times), 1), "p95_ms": round(percentile(times, 0.95), 1),
            "cpu_median_ms": round(statistics.median(cpu), 1)}  # fmt: skip


def _slowest(client, url: str, top: int = 3) -> list:
    """The request's slowest queries (seconds, SQL head): where a page's wall time goes beyond its CPU."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        client.get(url)
    ranked = sorted(ctx.captured_queries, key=lambda q: -float(q["time"]))[:top]
    return [[float(q["time"]), q["sql"][:160]] for q in ranked] + [["queries", len(ctx.captured_queries)]]


def analysis_steps(args, work, n: int, big, users, log, write_issues, run_import, code_episodes) -> tuple:
    """The figures and targets of `--only analysis`."""
    _build(work, n, big, users, log, write_issues, run_import, code_episodes)
    return analysis_measure(args, n, big, users, log)


def _build(work, n: int, big, users, log, write_issues, run_import, code_episodes) -> None:
    coded, disagreeing = n // 5, n // 100
    path = work / "big.jsonl"
    write_issues(path, n, max(1, n * 3 // 20), seed=len("big"))
    t0 = time.perf_counter()
    assert run_import(big.slug, path)["created"] == n  # the job deletes the file
    _literature_share(big)
    code_episodes(big, (users["c1"], users["c2"]), coded, disagreeing, seed=1)
    log(f"imported {n:,} issues (a quarter as papers), coded {coded:,} twice in {time.perf_counter() - t0:.1f} s")


def agreement_steps(args, work, n: int, big, users, log, write_issues, run_import, code_episodes) -> tuple:
    """`--only agreement`: the study built as for `--only analysis`, then only the agreement job and page."""
    from django.test import Client

    _build(work, n, big, users, log, write_issues, run_import, code_episodes)
    client = Client()
    client.force_login(users["owner"])
    got = agreement_measure(client, big, 5 if args.quick else 8, log)
    summary = {"bench": "scale", "only": "agreement", "episodes": n, "quick": args.quick, **got}
    targets = {
        "agreement page median <= 300 ms": got["agreement_page_median_ms"] <= 300,
        "agreement document <= 1 MB": got["agreement_document_kb"] <= 1024,
    }
    return summary, targets


def agreement_measure(client, big, requests: int, log) -> dict:
    """A fresh agreement job (B = 1,000), views of its stored result, and the stored document's size."""
    from annotate.analysis.results import agreement_key
    from annotate.models import AnalysisResult

    seconds, _ = _job(big, "agreement", {"bootstrap": 1000, "seed": 0,
                                          "result_key": agreement_key(bootstrap=1000, seed=0)})  # fmt: skip
    page = _views(client, f"/studies/{big.slug}/agreement/", requests, "Stored result")
    overall = _views(client, f"/studies/{big.slug}/agreement/?axis=overall", requests, "Stored result")
    doc = AnalysisResult.objects.get(study=big, kind="agreement").document
    kb = len(json.dumps(doc)) / 1024
    labels = next(a for a in doc["axes"] if a["axis"] == "overall")["pairs"][0]["confusion"]["labels_used"]
    log(f"agreement job {seconds:.2f} s, page median {page['median_ms']} ms (overall axis {overall['median_ms']} ms), "
        f"document {kb:,.1f} kB ({labels:,} whole labels used by the pair)")  # fmt: skip
    return {"agreement_fresh_s": round(seconds, 2), "agreement_page_median_ms": page["median_ms"],
            "agreement_overall_page_median_ms": overall["median_ms"], "agreement_document_kb": round(kb, 1),
            "agreement_whole_labels": labels}  # fmt: skip


def analysis_measure(args, n: int, big, users, log) -> tuple:
    """The timed part, on a study built as above (also run alone on a kept database: bench/analysis_scale.py)."""
    from django.test import Client
    from django.urls import reverse

    from annotate.analysis.arrays import codebook_axes
    from annotate.analysis.params import parse_params
    from annotate.analysis.results import analysis_key, coverage_key
    from annotate.coding.selectors import codebook_picker
    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import AnalysisResult, Episode

    coded = n // 5
    params = parse_params(codebook_axes(big), bootstrap=B, seed=SEED)
    # A worker has its URLconf loaded after its first job; loading it (it imports every API view) is not the
    # analysis's cost, and took 2 s of the first job's time.
    reverse("analysis_page", args=[big.slug])
    load0 = os.getloadavg()[0]
    fresh_s, _ = _job(big, "bootstrap", {"bootstrap": B, "seed": SEED, "chunks": 1,
                                               "result_key": analysis_key(params)})  # fmt: skip
    stored = AnalysisResult.objects.get(study=big, kind="analysis")
    doc = stored.document
    checks = [c["check"] for c in doc["contrast"].get("sensitivity", [])]
    labelled = doc["data"]["labelled_primary"]
    log(f"load average {load0:.1f}; analysis job, B = {B:,} with the sensitivity checks "
        f"({', '.join(checks) or 'none'}): {fresh_s:.2f} s "
        f"({labelled:,} labelled episodes, {[k['n_clusters'] for k in doc['kinds']]} clusters)")  # fmt: skip
    assert len(checks) == 4, "the contrast has no sensitivity checks: the bench would not measure them"

    client = Client()
    client.force_login(users["owner"])
    requests = 20 if args.quick else 30
    url = f"/studies/{big.slug}/analysis/?bootstrap={B}&seed={SEED}"
    page = _views(client, url, requests, "Stored result")
    page["slowest_queries"] = _slowest(client, url)
    log(f"analysis page from the stored result: median {page['median_ms']} ms (CPU {page['cpu_median_ms']} ms), "
        f"p95 {page['p95_ms']} ms; slowest queries {page['slowest_queries']}")  # fmt: skip

    cov_s, _ = _job(big, "coverage", {"result_key": coverage_key()})
    cov_page = _views(client, f"/studies/{big.slug}/coverage/", requests, "Stored result")
    log(f"coverage job {cov_s:.2f} s, page median {cov_page['median_ms']} ms")
    agreement = agreement_measure(client, big, max(3, requests // 4), log)

    by_code = codebook_picker(big.codebook).value_by_code
    values = CodingValues(failure_type=codebook_picker(big.codebook).types[0], source=by_code["source"]["llm"],
                          stage=by_code["stage"]["setup"], capability=by_code["capability"]["memory"])  # fmt: skip
    one = Episode.objects.filter(study=big, n_codings=0).order_by("id").select_related("study", "document").first()
    coding_save(episode=one, coder=users["c1"], version=None, values=values)
    stale = _views(client, url, requests, "Stale")
    log(f"analysis page after one more coding (stale, stored result shown): median {stale['median_ms']} ms")

    summary = {
        "bench": "scale", "only": "analysis", "episodes": n, "coded": coded, "labelled": labelled,
        "bootstrap_B": B, "analysis_fresh_s": round(fresh_s, 2),
        "analysis_page_median_ms": page["median_ms"], "analysis_page_p95_ms": page["p95_ms"],
        "analysis_page_cpu_median_ms": page["cpu_median_ms"],
        "analysis_stale_page_median_ms": stale["median_ms"],
        "coverage_fresh_s": round(cov_s, 2), "coverage_page_median_ms": cov_page["median_ms"],
        "agreement_fresh_s": agreement["agreement_fresh_s"],
        "agreement_page_median_ms": agreement["agreement_page_median_ms"],
        "agreement_document_kb": agreement["agreement_document_kb"],
        "stored_document_kb": round(len(json.dumps(doc)) / 1024, 1), "quick": args.quick,
        "load_average": [round(load0, 1), round(os.getloadavg()[0], 1)],
    }  # fmt: skip
    limit = 10 if n <= 20_000 else 120
    targets = {
        "analysis page median <= 300 ms": page["median_ms"] <= 300,
        f"fresh analysis <= {limit} s": fresh_s <= limit,
        "stale page median <= 300 ms": stale["median_ms"] <= 300,
    }
    return summary, targets


def agreement_lib(units: int, *, B: int = 1000, seed: int = 0, log=print) -> dict:
    """lib.stats.agreement alone (no database) on `units` episodes, each coded by two coders, on the axes of the
    agreement document with the fixture codebook's sizes (65 types in 12 categories, 8 sources, 7 stages and
    6 capabilities; whole labels their combinations, 21,840 possible), the codes drawn as code_episodes draws
    them: one random label per episode, the second coder giving another type on 5% of them. Per axis: process
    and wall seconds, and the peak of memory allocated during the call (tracemalloc)."""
    import resource
    import tracemalloc

    import numpy as np

    from lib import stats

    rng = np.random.default_rng(seed)
    sizes = {"failure_type": 65, "source": 8, "stage": 7, "capability": 6}
    first = {a: rng.integers(0, q, units) for a, q in sizes.items()}
    other = np.where(rng.random(units) < 0.05, (first["failure_type"] + rng.integers(1, 65, units)) % 65,
                     first["failure_type"])  # fmt: skip
    codes = {a: np.c_[v, v] for a, v in first.items()}
    codes["failure_type"][:, 1] = other
    codes["category"] = codes["failure_type"] % 12
    whole = ((codes["failure_type"] * 8 + codes["source"]) * 7 + codes["stage"]) * 6 + codes["capability"]
    _, codes["overall"] = np.unique(whole, return_inverse=True)
    codes["overall"] = codes["overall"].reshape(units, 2)
    stats.agreement(codes["overall"][:100], units, B=10)  # scipy's modules loaded, as in a worker after its first job
    out: dict = {"bench": "agreement_lib", "units": units, "coders": 2, "bootstrap_B": B, "axes": {}}
    for axis in ("failure_type", "category", "source", "stage", "capability", "overall"):
        Q = int(codes[axis].max()) + 1
        tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        res = stats.agreement(codes[axis], Q, B=B, seed=seed)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out["axes"][axis] = {"categories": Q, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                             "peak_mb": round(peak, 1), "ac1": round(res.gwet_ac1.value, 4)}  # fmt: skip
        log(f"{axis}: {Q:,} categories, {wall:.2f} s ({cpu:.2f} s CPU), peak {peak:,.1f} MB allocated, "
            f"AC1 {res.gwet_ac1.value:.4f} [{res.gwet_ac1.low:.4f}, {res.gwet_ac1.high:.4f}]")  # fmt: skip
    out["wall_s"] = round(sum(a["wall_s"] for a in out["axes"].values()), 2)
    out["peak_mb"] = max(a["peak_mb"] for a in out["axes"].values())
    out["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["load_average"] = round(os.getloadavg()[0], 1)
    return out


if __name__ == "__main__":  # the timed part alone, on a database a killed run of scale_bench left behind
    import argparse

    parser = argparse.ArgumentParser(description="the timed part of scale_bench --only analysis")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--units", type=int, help="only lib.stats.agreement on this many episodes (no database)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="B of --units (default 1,000, the job's)")
    cli = parser.parse_args()
    if cli.units:
        print(json.dumps(agreement_lib(cli.units, B=cli.bootstrap, log=lambda m: print(m, file=sys.stderr))))
        raise SystemExit(0)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FAULTLINE_DEV", "1")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from annotate.models import AnalysisResult, Episode, Job, Study

    settings.ALLOWED_HOSTS = ["*"]
    big = Study.objects.get(slug="big")
    AnalysisResult.objects.filter(study=big).delete()  # every figure from a fresh start
    Job.objects.filter(study=big, status__in=["pending", "running"]).update(status="failed", error="bench restart")
    users = {u.username: u for u in get_user_model().objects.filter(username__in=("owner", "c1"))}
    summary, targets = analysis_measure(cli, Episode.objects.filter(study=big).count(), big, users,
                                        lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    for name, ok in targets.items():
        print(f"  {'met' if ok else 'MISSED'}: {name}", file=sys.stderr)
    summary["targets_missed"] = [name for name, ok in targets.items() if not ok]
    print(json.dumps(summary))
