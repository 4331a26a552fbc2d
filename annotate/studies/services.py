"""Writes for studies and memberships."""

from __future__ import annotations

import hashlib

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from annotate.models import Membership, Role, Study
from taxonomy.models import Codebook

User = get_user_model()


@transaction.atomic
def study_create(
    *,
    slug: str,
    name: str,
    codebook: Codebook,
    owner=None,
    coders: list | tuple = (),
    viewers: list | tuple = (),
    description: str = "",
) -> Study:
    """Create a study with its members. The queue seed is fixed here so the order is reproducible."""
    if Study.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": f"a study with slug '{slug}' already exists"})
    study = Study(slug=slug, name=name, codebook=codebook, description=description)
    study.full_clean(exclude=["codebook", "members", "label_coder"])
    study.queue_seed = int.from_bytes(hashlib.sha256(slug.encode()).digest()[:6], "big")
    study.save()
    if owner is not None:
        membership_set(study=study, user=owner, role=Role.OWNER)
    for user in coders:
        membership_set(study=study, user=user, role=Role.CODER)
    for user in viewers:
        membership_set(study=study, user=user, role=Role.VIEWER)
    return study


def membership_set(*, study: Study, user, role: str, adjudicator: bool = False) -> Membership:
    """Add a member or change their role."""
    if role not in Role.values:
        raise ValidationError({"role": f"unknown role '{role}'"})
    membership, _ = Membership.objects.update_or_create(
        study=study, user=user, defaults={"role": role, "adjudicator": adjudicator}
    )
    return membership


def queue_key_for(study: Study, episode_id: int) -> int:
    """The episode's place in the study's random order: a stable hash of (seed, id)."""
    digest = hashlib.blake2b(f"{study.queue_seed}:{episode_id}".encode(), digest_size=7).digest()
    return int.from_bytes(digest, "big")


def study_data_changed(*, study_id: int) -> None:
    """Mark the study's data as changed: stored analysis results computed before now are stale.

    Called by every write that can change final labels or what the analysis counts, inside that write's
    transaction, so a result can never be marked current for data it did not see. The UPDATE holds the study
    row until the commit: writers' commits queue there for its length, not for their whole work (callers
    make it their last statement where they can)."""
    Study.objects.filter(pk=study_id).update(data_version=F("data_version") + 1)
