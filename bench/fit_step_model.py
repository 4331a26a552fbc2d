"""Fit the local step suggester's learned rule on the CHOOSE split of Who&When logs only.

    python bench/fit_step_model.py /path/to/Who&When     # writes annotate/suggestions/step_model.json

Logistic regression (scikit-learn, default L2, C=1) over annotate.suggestions.steps.FEATURES, one row per step,
the reference's mistake step the positive. Logs are split by lib.stats.attribution.split_of("<half>/<file>");
the evaluate split is never read here, so bench/trace_bench.py --attribution measures the rule on logs it never
saw. The JSON records the files it was fitted on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fit(folder: Path) -> dict:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from annotate.suggestions.steps import FEATURES, step_features
    from annotate.traces.parsers import iter_trace_records
    from lib.stats.attribution import split_of

    X, y, files = [], [], []
    for p in sorted(folder.rglob("*.json")):
        name = f"{p.parent.name}/{p.name}"
        if split_of(name) != "choose":
            continue
        for tr in iter_trace_records(p, "whowhen"):
            if tr.reference.get("step") is None or not tr.steps:
                continue
            X.append(step_features(tr.steps))
            y.append(np.arange(len(tr.steps)) == tr.reference["step"])
            files.append(name)
    if not files:
        raise SystemExit(f"no Who&When logs of the choose split under {folder}")
    model = LogisticRegression(C=1.0, max_iter=5000).fit(np.vstack(X), np.concatenate(y))
    return {
        "features": list(FEATURES),
        "coef": [round(float(c), 6) for c in model.coef_[0]],
        "intercept": round(float(model.intercept_[0]), 6),
        "fitted_on": sorted(files),
        "split": "choose",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a Who&When folder (Algorithm-Generated/, Hand-Crafted/)")
    parser.add_argument("--out", type=Path, default=ROOT / "annotate" / "suggestions" / "step_model.json")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FAULTLINE_DEV", "1")
    import django

    django.setup()
    data = fit(args.folder)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"fitted on {len(data['fitted_on'])} choose-split logs -> {args.out}")


if __name__ == "__main__":
    main()
