"""Does the `uncertain` queue order (active learning) need fewer labels than random order? (pure, no ORM)

A simulation on labelled items: a fixed test part (30%, seeded) is scored after
every batch of new labels; the rest is the pool the queue serves from. Both
orders start from the same random seed labels. `uncertain` then takes the
pool items whose top-1 type confidence under the model trained so far is
lowest (what the queue serves first); `random` takes them in a seeded random
order. The report gives each order's type top-1 accuracy curve and how many
labels each needed to reach a target: 95% of the accuracy that the whole pool
gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotate.suggestions._eval import LabelledText, predicted

START = 10
STEP = 5
TEST_SHARE = 0.3
SEED = 7


def _accuracy(spec, train: list[LabelledText], test: list[LabelledText]) -> float:
    from annotate.suggestions.local import local_fit_predict

    answers = local_fit_predict(spec, train, test)
    return float(
        np.mean([predicted(a)[0]["failure_type"] == t.failure_type for a, t in zip(answers, test, strict=True)])
    )


def _uncertainty_order(spec, train: list[LabelledText], pool: list[LabelledText]) -> list[int]:
    from annotate.suggestions.local import local_fit_predict

    answers = local_fit_predict(spec, train, pool)
    conf = [predicted(a)[2] or 0.0 for a in answers]
    return list(np.argsort(conf, kind="stable"))


def _run(spec, pool: list[LabelledText], test: list[LabelledText], order: str, rng: np.random.Generator):
    idx = list(rng.permutation(len(pool)))
    labelled, rest = idx[:START], idx[START:]
    curve = []
    while True:
        train = [pool[i] for i in labelled]
        curve.append((len(labelled), round(_accuracy(spec, train, test), 4)))
        if not rest:
            return curve
        if order == "uncertain":
            ranked = _uncertainty_order(spec, train, [pool[i] for i in rest])
            take = [rest[j] for j in ranked[:STEP]]
        else:
            take = rest[:STEP]
        labelled += take
        rest = [i for i in rest if i not in set(take)]


def labels_to_accuracy(spec, items: Sequence[LabelledText], *, seeds: int = 3) -> dict:
    """Type top-1 learning curves of both orders, and the labels each needs to reach the target."""
    items = list(items)
    if len(items) < START + STEP + 10:
        return {"skipped": f"{len(items)} labelled items; at least {START + STEP + 10} are needed"}
    perm = np.random.default_rng(SEED).permutation(len(items))
    n_test = max(10, int(len(items) * TEST_SHARE))
    test = [items[i] for i in perm[:n_test]]
    pool = [items[i] for i in perm[n_test:]]
    full = _accuracy(spec, pool, test)
    target = round(0.95 * full, 4)
    out: dict = {"test_n": n_test, "pool_n": len(pool), "full_pool_accuracy": round(full, 4), "target": target}
    for order in ("uncertain", "random"):
        needed, curves = [], []
        for s in range(seeds):
            curve = _run(spec, pool, test, order, np.random.default_rng(SEED + 1 + s))
            curves.append(curve)
            needed.append(next((n for n, acc in curve if acc >= target), None))
        reached = [n for n in needed if n is not None]
        out[order] = {
            "labels_to_target": needed,
            "mean_labels_to_target": round(float(np.mean(reached)), 1) if len(reached) == len(needed) else None,
            "curve": [(n, round(float(np.mean([c[j][1] for c in curves])), 4)) for j, (n, _) in enumerate(curves[0])],
        }
    return out
