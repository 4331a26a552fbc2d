"""Synthetic episodes for the suggestion benchmark and tests: texts built from the codebook, with known labels."""

from __future__ import annotations

import random

FILLER = (
    "We upgraded last week and the nightly run started misbehaving.",
    "Attaching the logs from the run below.",
    "This happens on about a third of the runs, not all of them.",
    "Happy to test a patch if that helps.",
    "Environment: Linux, Python 3.11, latest release.",
    "The same task worked fine two versions ago.",
    "Steps to reproduce are in the linked gist.",
    "Our team noticed this during a demo for a customer.",
)


def synthetic_episodes(spec, n: int, *, seed: int = 7, noise: float = 0.1) -> list[dict]:
    """`n` labelled texts: each mixes phrases of its type (example, indicators, definition) with filler."""
    rng = random.Random(seed)
    types = list(spec.types)
    sources = spec.axis_codes("source")
    stages = spec.axis_codes("stage")
    caps = spec.axis_codes("capability")
    out = []
    for i in range(n):
        t = types[i % len(types)] if i < len(types) else rng.choice(types)
        own = [t.example, t.definition, *t.indicators]
        parts = rng.sample(own, k=min(len(own), rng.randint(2, 3)))
        other = rng.choice(types)
        parts.append(rng.choice([other.example, *other.indicators]))
        parts += rng.sample(FILLER, k=rng.randint(1, 3))
        rng.shuffle(parts)
        out.append(
            {
                "text": f"Issue {i}\n\n" + " ".join(p.rstrip(".") + "." for p in parts),
                "failure_type": t.code,
                "source": rng.choice(sources) if rng.random() < noise else t.typical_source,
                "stage": rng.choice(stages) if rng.random() < noise else rng.choice(t.typical_stages or stages),
                "capability": rng.choice(caps) if rng.random() < noise else rng.choice(t.typical_capabilities or caps),
            }
        )
    return out
