"""The analysis parameters a page, the API or a command asks for, checked once: ParameterError names the field."""

from __future__ import annotations

from dataclasses import dataclass

from annotate.analysis.arrays import KINDS, Axes
from lib import stats

KIND_ALIASES = {"github": "github_issue", "gh": "github_issue", "issue": "github_issue", "lit": "literature"}
LEVEL = 0.95
DEFAULT_B = 2000
MAX_B = 200_000  # keeps replicate counts near 35 MB per kind (int32)


# ---------------------------------------------------------------------------
# Parameters


class ParameterError(ValueError):
    """Bad analysis parameters, as field errors ({field: [message]})."""

    expected_failure = True  # a refusal of the input: logged as one line (annotate.jobs.runner)

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Params:
    bootstrap: int = DEFAULT_B
    seed: int = 0
    cell: tuple[int, int] | None = None  # stage, capability indices; None: the cell with the largest difference
    contrast: tuple[str, str] = ("github_issue", "literature")
    cap: int = 5
    subsamples: int = 20
    bca: bool = False  # BCa for cells and differences; the old spelling of interval="bca"
    level: float = LEVEL
    interval: str = stats.DEFAULT_CELL_METHOD  # the cell-share interval, one of stats.CELL_METHODS
    # An earlier codebook version of the study, as name@version (annotate.analysis.versions); None: the current one.
    version: str | None = None

    @property
    def diff_bca(self) -> bool:
        """Differences are always bootstrapped: BCa when asked for, percentile otherwise."""
        return self.bca or self.interval == "bca"


def _kind(name: str) -> str:
    name = name.strip().lower()
    return KIND_ALIASES.get(name, name)


def parse_params(
    axes: Axes,
    *,
    bootstrap=None,
    seed=None,
    cell: str | None = None,
    contrast: str | None = None,
    cap=None,
    bca=None,
    interval: str | None = None,
    max_bootstrap: int = MAX_B,
    version: str | None = None,
) -> Params:
    """Validate raw parameters (from a command line, a query string or job params). `axes` are the codebook
    version's the analysis is for, and `version` its key, both checked already (annotate.analysis.versions)."""
    errors: dict[str, list[str]] = {}

    def integer(name, raw, default, low, high):
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            errors[name] = ["Enter a whole number."]
            return default
        if not low <= value <= high:
            errors[name] = [f"Must be between {low:,} and {high:,}."]
        return value

    b = integer("bootstrap", bootstrap, DEFAULT_B, 100, max_bootstrap)
    s = integer("seed", seed, 0, 0, 2**32 - 1)
    m = integer("cap", cap, 5, 1, 10_000)
    parsed_cell = None
    if cell:
        stage, sep, capability = cell.partition(":")
        stages = [c for c, _ in axes.stages]
        caps = [c for c, _ in axes.capabilities]
        if not sep or stage not in stages or capability not in caps:
            errors["cell"] = [f"Give STAGE:CAPABILITY with codes of {axes.codebook}, e.g. {stages[0]}:{caps[0]}."]
        else:
            parsed_cell = (stages.index(stage), caps.index(capability))
    pair = ("github_issue", "literature")
    if contrast:
        a, sep, b_ = contrast.partition("-")
        a, b_ = _kind(a), _kind(b_)
        if not sep or a not in KINDS or b_ not in KINDS or a == b_:
            errors["contrast"] = [f"Give KIND_A-KIND_B with two different kinds of {', '.join(KINDS)}."]
        else:
            pair = (a, b_)
    flag = False
    if bca not in (None, ""):
        if str(bca).lower() in {"1", "true", "yes", "on"}:
            flag = True
        elif str(bca).lower() not in {"0", "false", "no", "off"}:
            errors["bca"] = ["Must be true or false."]
    method = "bca" if flag else stats.DEFAULT_CELL_METHOD
    if interval not in (None, ""):
        interval = stats.CELL_METHOD_ALIASES.get(interval, interval)
        if interval not in stats.CELL_METHODS:
            errors["interval"] = [f"Choose one of {', '.join(stats.CELL_METHODS)}."]
        elif flag and interval != "bca":
            errors["bca"] = ["BCa and another interval method cannot both be asked for."]
        else:
            method = interval
    if errors:
        raise ParameterError(errors)
    return Params(bootstrap=b, seed=s, cell=parsed_cell, contrast=pair, cap=m, bca=flag, interval=method,
                  version=version)  # fmt: skip
