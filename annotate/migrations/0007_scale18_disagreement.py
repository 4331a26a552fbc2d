"""Episode.disagreement: the axes an episode's coders differ on, stored, and backfilled here."""

from django.db import migrations, models
from django.db.models import Case, F, IntegerField, Max, Min, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Cast, Coalesce

# The bits of annotate.services.disagreement.DISAGREEMENT_BITS when this migration was written.
BITS = {"failure_type": 1, "source": 2, "stage": 4, "capability": 8, "not_a_failure": 16, "needs_new_type": 32}


def _column(axis):
    if axis in ("not_a_failure", "needs_new_type"):
        return Cast(axis, IntegerField())
    return Coalesce(f"{axis}_id", Value(0), output_field=IntegerField())


def backfill(apps, schema_editor):
    Coding = apps.get_model("annotate", "Coding")
    Episode = apps.get_model("annotate", "Episode")
    spread = (
        Coding.objects.filter(episode_id=OuterRef("pk"))
        .order_by()
        .values("episode_id")
        .annotate(**{f"lo_{a}": Min(_column(a)) for a in BITS}, **{f"hi_{a}": Max(_column(a)) for a in BITS})
    )
    mask = sum(
        (Case(When(Q(**{f"lo_{a}__lt": F(f"hi_{a}")}), then=Value(bit)), default=Value(0)) for a, bit in BITS.items()),
        Value(0),
    )
    # Only episodes with two codings or more can disagree; the rest keep the default 0.
    Episode.objects.filter(n_codings__gte=2).update(
        disagreement=Coalesce(Subquery(spread.annotate(mask=mask).values("mask"), output_field=IntegerField()), 0)
    )


class Migration(migrations.Migration):
    dependencies = [("annotate", "0006_trace15_traces")]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="disagreement",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="episode",
            index=models.Index(
                condition=models.Q(("disagreement__gt", 0)),
                fields=["study", "status", "id"],
                name="episode_disagreement_idx",
            ),
        ),
    ]
