"""Blinding: what a member may see of other people's codings. The one rule, asked by every surface.

In a blind study a coder sees others' codings of an episode only once they have
coded it themselves; a coder with the adjudicator duty also sees those of
complete episodes (k codings), which they can no longer be asked to code.
Owners and viewers, who do not code blind, see everything — except on the
coding page, where everyone codes blind, owners too.

Pages, API lists, filters, details, exports, suggestion panels, analysis and
job files take a `Visibility` from `coding_visibility` and ask it; nothing
else decides. Codings, adjudications, the number of codings, an episode's
status and when others coded all count as "others' codings".
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from annotate.models import Adjudication, Coding, Episode, Membership, Role


@dataclass(frozen=True)
class Visibility:
    user_id: int
    k: int
    sees_all: bool  # every coding of every episode
    complete_episodes: bool  # others' codings of complete episodes too (the adjudicator duty)

    def on_episode(self, episode: Episode, *, has_own: bool) -> bool:
        """May the member see others' codings (and the adjudication) of this episode?"""
        if self.sees_all or has_own:
            return True
        return self.complete_episodes and episode.n_codings >= self.k

    def _visible_episode(self, episode_ref: str) -> Q:
        """Q over rows whose episode (reached as `episode_ref`, e.g. "pk" or "episode_id") is visible."""
        own = Exists(Coding.objects.filter(episode_id=OuterRef(episode_ref), coder_id=self.user_id))
        if not self.complete_episodes:
            return Q(own)
        complete = "n_codings__gte" if episode_ref == "pk" else "episode__n_codings__gte"
        return Q(own) | Q(**{complete: self.k})

    def episodes_q(self) -> Q:
        """A Q over Episode rows whose others' codings (and so their progress: coded, complete,
        adjudicated) the member may see; for selectors below this package, which take it as an argument."""
        return Q() if self.sees_all else self._visible_episode("pk")

    def episodes(self, qs: QuerySet[Episode]) -> QuerySet[Episode]:
        """The episodes of `qs` whose others' codings the member may see."""
        return qs if self.sees_all else qs.filter(self._visible_episode("pk"))

    def codings(self, qs: QuerySet[Coding]) -> QuerySet[Coding]:
        """The codings of `qs` the member may see: their own, and others' on visible episodes."""
        if self.sees_all:
            return qs
        return qs.filter(Q(coder_id=self.user_id) | self._visible_episode("episode_id"))

    def adjudications(self, qs: QuerySet[Adjudication]) -> QuerySet[Adjudication]:
        return qs if self.sees_all else qs.filter(self._visible_episode("episode_id"))

    @property
    def sees_progress(self) -> bool:
        """Whether fields that tell that, and when, others coded (n_codings, status) may be shown."""
        return self.sees_all

    @property
    def sees_aggregates(self) -> bool:
        """Whether reports built from everyone's codings (analysis, agreement, exports) may be shown."""
        return self.sees_all


def coding_visibility(membership: Membership, *, on_coding_page: bool = False) -> Visibility:
    """The blinding rule for one member of one study (see the module docstring)."""
    study = membership.study
    restricted = study.blind and (on_coding_page or membership.role == Role.CODER)
    return Visibility(
        user_id=membership.user_id,
        k=study.coders_per_episode,
        sees_all=not restricted,
        complete_episodes=restricted and not on_coding_page and membership.can_adjudicate,
    )


FULL = Visibility(user_id=0, k=0, sees_all=True, complete_episodes=False)
"""For the operator's own commands (manage.py export), which run with the database's full view."""


BLIND_REPORT = (
    "This study is blind: reports built from everyone's codings (analysis, agreement, suggestion quality, "
    "exports) are open to its owners and viewers while coders code blind."
)


def check_reports(membership: Membership) -> None:
    """Refuse a report built from everyone's codings to a member who may not see them all."""
    from django.core.exceptions import PermissionDenied

    if not coding_visibility(membership).sees_aggregates:
        raise PermissionDenied(BLIND_REPORT)
