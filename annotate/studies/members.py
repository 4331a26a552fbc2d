"""Writes for starting a study in the browser and for its team: invitations, roles, removal, sign-out.

Who may do each of these is decided by the views' study_view("owner") and by
`may_create_studies`; these functions check the rules that keep a study usable
(it always has an owner; an invitation is used once, before it expires).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from annotate.models import Invitation, Lease, Membership, Role, Study
from annotate.studies.services import membership_set
from annotate.studies.tokens import tokens_revoke_all
from lib import safejson
from taxonomy.services import CodebookError, codebook_validate

User = get_user_model()
DUMMY_EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
MAX_CODEBOOK_BYTES = 5 * 1024 * 1024


def may_create_studies(user) -> bool:
    """The one rule for who may start a study in the browser (FAULTLINE_STUDY_CREATORS)."""
    if not user.is_authenticated:
        return False
    return settings.FAULTLINE_STUDY_CREATORS == "any" or user.is_staff or user.is_superuser


def study_creation_refusal(user) -> str:
    """What a user who may not create studies (may_create_studies) must do to get the right, in one sentence
    the study list shows and the New study page's 403 repeats."""
    name = user.get_username() if user.is_authenticated else "your account"
    return (
        f"Only staff users may create studies on this server (FAULTLINE_STUDY_CREATORS=staff), and {name} is not "
        f"staff. To get the right, ask an administrator to tick Staff status for {name} in the admin site "
        "(/admin/, Users), or to set FAULTLINE_STUDY_CREATORS=any so that every signed-in user may create studies. "
        "To join an existing study instead, ask its owner for an invitation link."
    )


def email_configured() -> bool:
    return settings.EMAIL_BACKEND != DUMMY_EMAIL_BACKEND


def codebook_from_upload(uploaded_file) -> dict:
    """Parse and validate an uploaded codebook JSON exactly as `load_codebook` does; field errors otherwise."""
    if uploaded_file.size > MAX_CODEBOOK_BYTES:
        raise ValidationError({"codebook_file": "A codebook file is at most 5 MB."})
    try:
        data = safejson.loads(uploaded_file.read())
    except safejson.JSONError as exc:
        raise ValidationError({"codebook_file": str(exc)}) from None
    try:
        return codebook_validate(data)
    except CodebookError as exc:
        raise ValidationError({"codebook_file": str(exc)}) from None


def invitation_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class InviteResult:
    """Either `membership` (a known user joined at once) or `invitation` with its one-time `link` path."""

    membership: Membership | None = None
    invitation: Invitation | None = None
    token: str = ""
    emailed: bool = False


def _known_user(who: str):
    if "@" in who:
        return User.objects.filter(email__iexact=who).order_by("pk").first()
    return User.objects.filter(username=who).first()


@transaction.atomic
def member_invite(
    *, study: Study, by, who: str, role: str = Role.CODER, adjudicator: bool = False, accept_url=None
) -> InviteResult:
    """Invite someone by username or email.

    A person who already has an account joins at once with `role` (an existing
    member keeps theirs: changing a role is `member_update`). Anyone else gets a
    single-use link valid for FAULTLINE_INVITE_DAYS; it is mailed when an email
    backend is configured and the address is known, and the owner can always copy it.
    `accept_url(token)` builds the absolute link for the mail.
    """
    who = who.strip()
    if not who:
        raise ValidationError({"who": "Give a username or an email address."})
    if role not in Role.values:
        raise ValidationError({"role": f"unknown role '{role}'"})
    if "@" in who:
        try:
            Invitation._meta.get_field("email").run_validators(who)
        except ValidationError:
            raise ValidationError({"who": f"'{who}' is not a valid email address."}) from None
    user = _known_user(who)
    if user is not None:
        if study.memberships.filter(user=user).exists():
            raise ValidationError({"who": f"{user.get_username()} is already a member; change their role below."})
        return InviteResult(membership=membership_set(study=study, user=user, role=role, adjudicator=adjudicator))
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        study=study, email=who if "@" in who else "", username_hint="" if "@" in who else who[:150],
        role=role, adjudicator=adjudicator and role == Role.CODER, token_hash=invitation_token_hash(token),
        created_by=by, expires_at=timezone.now() + timedelta(days=settings.FAULTLINE_INVITE_DAYS),
    )  # fmt: skip
    emailed = False
    if invitation.email and email_configured() and accept_url is not None:
        link = accept_url(token)
        transaction.on_commit(
            lambda: send_mail(
                f"Join the study {study.name} on Faultline",
                f"{by.get_username()} invites you to code in {study.name} as {role}.\n\n"
                f"Open this link to choose a username and password (it works once, until "
                f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n\n{link}\n",
                None,
                [invitation.email],
            )
        )
        emailed = True
    return InviteResult(invitation=invitation, token=token, emailed=emailed)


class InvitationInvalid(Exception):
    """The link was used, revoked, has expired, or never existed; the message says which."""


def invitation_for_token(token: str) -> Invitation:
    invitation = Invitation.objects.select_related("study").filter(token_hash=invitation_token_hash(token)).first()
    if invitation is None:
        raise InvitationInvalid("This invitation link is not valid. Ask the study's owner for a new one.")
    if invitation.revoked_at is not None:
        raise InvitationInvalid("This invitation was withdrawn. Ask the study's owner for a new one.")
    if invitation.accepted_at is not None:
        raise InvitationInvalid("This invitation link has already been used; each link works once. Log in instead.")
    if invitation.expires_at <= timezone.now():
        raise InvitationInvalid(
            f"This invitation expired on {invitation.expires_at:%Y-%m-%d}. Ask the study's owner for a new one."
        )
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user=None, username: str = "", password: str = "") -> Membership:
    """Use an invitation: join `user`, or create the account (username, password) and join it.

    The invitation row is locked, so two tabs racing on one link make one member.
    A user who is already a member keeps their role.
    """
    found = invitation_for_token(token)
    invitation = Invitation.objects.select_for_update().get(pk=found.pk)
    if invitation.accepted_at is not None:
        raise InvitationInvalid("This invitation link has already been used; each link works once. Log in instead.")
    if user is None:
        user = User(username=username, email=invitation.email)
        user.set_password(password)
        user.save()
    membership = Membership.objects.filter(study=invitation.study, user=user).first()
    if membership is None:
        membership = membership_set(
            study=invitation.study, user=user, role=invitation.role, adjudicator=invitation.adjudicator
        )
    invitation.accepted_at, invitation.accepted_by = timezone.now(), user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    return membership


def invitation_revoke(*, study: Study, invitation_id: int) -> Invitation:
    invitation = Invitation.objects.get(study=study, pk=invitation_id, accepted_at__isnull=True)
    if invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
    return invitation


def _lock_owners(study: Study, membership_id: int) -> Membership:
    """Lock the study's owner rows (in id order, as every caller does), then the member being changed.

    Two owners demoting or removing each other at once would each see the other still owner and
    both go ahead. With the owners locked first, the second waits for the first to commit and then
    finds itself the last owner: refused.
    """
    list(Membership.objects.select_for_update().filter(study=study, role=Role.OWNER).order_by("pk").values("pk"))
    return Membership.objects.select_for_update(of=("self",)).select_related("user").get(study=study, pk=membership_id)


def _keep_an_owner(study: Study, membership: Membership, new_role: str | None) -> None:
    if membership.role != Role.OWNER or new_role == Role.OWNER:
        return
    if not study.memberships.filter(role=Role.OWNER).exclude(pk=membership.pk).exists():
        raise ValidationError({"role": "A study needs at least one owner; make someone else owner first."})


@transaction.atomic
def member_update(*, study: Study, membership_id: int, role: str, adjudicator: bool) -> Membership:
    """Change a member's role and adjudicator duty; the last owner stays owner."""
    if role not in Role.values:
        raise ValidationError({"role": f"unknown role '{role}'"})
    membership = _lock_owners(study, membership_id)
    _keep_an_owner(study, membership, role)
    membership.role, membership.adjudicator = role, adjudicator and role == Role.CODER
    membership.save(update_fields=["role", "adjudicator"])
    return membership


@transaction.atomic
def member_remove(*, study: Study, membership_id: int) -> Membership:
    """Remove a member. Their codings and adjudications stay, attributed to them; their leases end."""
    membership = _lock_owners(study, membership_id)
    _keep_an_owner(study, membership, None)
    Lease.objects.filter(episode__study=study, coder=membership.user).delete()
    membership.delete()
    return membership


@transaction.atomic
def sessions_revoke_all(*, user, password: str) -> int:
    """Log `user` out everywhere: every session ends and every API token is revoked.

    Re-hashing the password with a new salt changes the session auth hash that
    Django checks on each request, so every existing session (this one too) is
    refused at its next request, without scanning the session table. Returns the
    number of tokens revoked.
    """
    if not user.check_password(password):
        raise ValidationError({"password": "That is not your password."})
    user.set_password(password)
    user.save(update_fields=["password"])
    return tokens_revoke_all(user=user)
