"""Two owners demoting or removing each other at the same moment: the study keeps an owner (PostgreSQL)."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from annotate.models import Membership, Role
from annotate.studies import members
from annotate.studies.members import member_remove, member_update
from annotate.studies.services import membership_set

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_owners(require_postgres, study, bob):
    membership_set(study=study, user=bob, role=Role.OWNER)
    return [study.memberships.get(user__username=name) for name in ("alice", "bob")]


def _race(monkeypatch, calls) -> list[Exception]:
    """Run `calls` in threads that each pass the last-owner check before any of them writes.

    Both threads wait at a barrier right after the check; while one holds the lock the fix takes,
    the other cannot reach the barrier, whose timeout then lets the first one go on alone.
    """
    barrier = threading.Barrier(len(calls), timeout=3)
    check = members._keep_an_owner

    def check_then_wait(*args, **kwargs):
        check(*args, **kwargs)
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()

    monkeypatch.setattr(members, "_keep_an_owner", check_then_wait)
    errors: list[Exception] = []

    def run(call):
        try:
            call()
        except ValidationError as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return errors


@pytest.mark.parametrize("action", ["demote", "remove", "one_of_each"])
def test_owners_acting_on_each_other_at_once_leave_an_owner(monkeypatch, study, two_owners, action):
    alice_m, bob_m = two_owners

    def demote(m):
        return lambda: member_update(study=study, membership_id=m.pk, role=Role.CODER, adjudicator=False)

    def remove(m):
        return lambda: member_remove(study=study, membership_id=m.pk)

    first, second = {"demote": (demote, demote), "remove": (remove, remove), "one_of_each": (demote, remove)}[action]
    errors = _race(monkeypatch, [first(bob_m), second(alice_m)])
    owners = Membership.objects.filter(study=study, role=Role.OWNER).count()
    assert owners == 1
    assert len(errors) == 1 and "at least one owner" in str(errors[0])
