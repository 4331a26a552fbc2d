"""The bootstrap's data in transit: replicates computed and packed, label arrays and designs packed for Celery
messages (compressed, base64), the chunk ranges of a run, and the digest that shows two runs byte-identical."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time
import zlib
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict
from itertools import pairwise

import numpy as np
from django.conf import settings

from annotate.analysis.arrays import LabelArrays
from annotate.analysis.params import Params
from annotate.coding.labels import FinalLabel
from lib import stats

ProgressFn = Callable[[int, int], None]


# ---------------------------------------------------------------------------
# Replicates: computed here, or in chunks by Celery workers


def compute_replicates(
    ds: list[stats.ClusterDesign], p: Params, *, progress: ProgressFn | None = None
) -> list[np.ndarray]:
    return stats.replicate_blocks(ds, B=p.bootstrap, seed=p.seed, progress=progress)


def pack(arrays: list[np.ndarray]) -> list[dict]:
    """Replicate counts as JSON-safe compressed blobs (for Celery results)."""
    return [
        {"shape": list(a.shape), "data": base64.b64encode(zlib.compress(a.astype(np.int32).tobytes(), 6)).decode()}
        for a in arrays
    ]


def unpack(blobs: list[dict]) -> list[np.ndarray]:
    return [
        np.frombuffer(zlib.decompress(base64.b64decode(b["data"])), dtype=np.int32).reshape(b["shape"]).copy()
        for b in blobs
    ]


PARAM_KEYS = ("bootstrap", "seed", "cell", "contrast", "cap", "bca", "interval")
# Chunks per job when a broker is configured: enough to keep 16 worker processes busy and
# to show progress as they finish, few enough that sending the labels to each stays cheap.
DEFAULT_CHUNKS = 16
_ARRAYS = ("episode_id", "kind", "stage", "capability", "source", "failure_type", "category")


def chunk_ranges(total_blocks: int, chunks: int) -> list[tuple[int, int]]:
    """Contiguous block ranges, as even as possible."""
    chunks = max(1, min(chunks, total_blocks))
    edges = [round(i * total_blocks / chunks) for i in range(chunks + 1)]
    return [(a, b) for a, b in pairwise(edges) if b > a]


def labels_pack(labels: LabelArrays) -> str:
    """The label arrays as one compressed JSON-safe string, so chunks and the combine step
    work on the snapshot the job read instead of querying the study again.

    Cluster names travel as a JSON list (a numpy string array of them is several times larger
    and slow to compress), and everything is compressed once, quickly: this is on the job's
    serial path."""
    buf = io.BytesIO()
    np.savez(buf, **{name: getattr(labels, name) for name in _ARRAYS})
    meta = {
        "cluster": labels.cluster.tolist(),
        "excluded": {kind: dict(counter) for kind, counter in labels.excluded.items()},
        "holdout": [[e_id, kind, title, asdict(label)] for e_id, kind, title, label in labels.holdout],
        "n_episodes": labels.n_episodes,
        "fingerprint": labels.fingerprint,
        "as_of": labels.as_of,
    }
    arrays = buf.getvalue()
    blob = len(arrays).to_bytes(8, "little") + arrays + json.dumps(meta).encode()
    return base64.b64encode(zlib.compress(blob, 1)).decode()


def labels_unpack(packed: str) -> LabelArrays:

    blob = zlib.decompress(base64.b64decode(packed))
    size = int.from_bytes(blob[:8], "little")
    with np.load(io.BytesIO(blob[8 : 8 + size]), allow_pickle=False) as arrays:
        ints = {name: arrays[name].astype(np.int64) for name in _ARRAYS}
    meta = json.loads(blob[8 + size :])
    cluster = np.empty(len(meta["cluster"]), dtype=object)
    cluster[:] = meta["cluster"]
    return LabelArrays(
        **ints,
        cluster=cluster,
        excluded={kind: Counter(counts) for kind, counts in meta["excluded"].items()},
        holdout=[(e_id, kind, title, FinalLabel(**label)) for e_id, kind, title, label in meta["holdout"]],
        n_episodes=meta["n_episodes"],
        fingerprint=meta["fingerprint"],
        as_of=meta["as_of"],
    )


def designs_pack(ds: list[stats.ClusterDesign]) -> str:
    """The designs' count matrices, sparse and compressed: all a chunk needs to draw its replicates
    (a few hundred KB for 200,000 episodes, against re-reading and re-sorting every cluster name)."""
    buf = io.BytesIO()
    arrays = {}
    for i, d in enumerate(ds):
        flat = d.counts.ravel()
        nz = np.flatnonzero(flat)
        arrays[f"shape{i}"] = np.asarray(d.counts.shape, dtype=np.int64)
        arrays[f"at{i}"] = np.diff(nz, prepend=0).astype(np.int32)  # gaps compress better than positions
        arrays[f"n{i}"] = flat[nz].astype(np.int32)
    np.savez_compressed(buf, **arrays)
    return base64.b64encode(buf.getvalue()).decode()


def designs_unpack(packed: str) -> list[stats.ClusterDesign]:
    with np.load(io.BytesIO(base64.b64decode(packed)), allow_pickle=False) as arrays:
        out = []
        for i in range(sum(1 for name in arrays.files if name.startswith("shape"))):
            G, K = (int(x) for x in arrays[f"shape{i}"])
            flat = np.zeros(G * K, dtype=np.int64)
            flat[np.cumsum(arrays[f"at{i}"], dtype=np.int64)] = arrays[f"n{i}"]
            out.append(stats.counts_design(flat.reshape(G, K)))
    return out


@contextmanager
def _timed(into: dict, name: str):
    """Wall and CPU seconds of a step, kept in `into`: the bench splits a job into serial and parallel work."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        into[name] = {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}


def replicates_digest(reps: list[np.ndarray]) -> str:
    """sha256 of the replicate counts: equal digests mean byte-identical bootstraps."""
    digest = hashlib.sha256()
    for a in reps:
        digest.update(np.ascontiguousarray(a, dtype=np.int32).tobytes())
    return digest.hexdigest()


def over_threshold(B: int) -> bool:
    return B > settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD
