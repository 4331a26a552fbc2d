from django.db import migrations, models


def opt_in_incident_studies(apps, schema_editor):
    """Studies that hold only incidents keep taking them; a study that also holds research documents
    (GitHub issues, literature, traces) does not: new incidents posted there are refused from now on."""
    Study = apps.get_model("annotate", "Study")
    Document = apps.get_model("annotate", "Document")
    with_incidents = set(Document.objects.filter(kind="incident").values_list("study_id", flat=True).distinct())
    with_research = set(
        Document.objects.exclude(kind="incident").values_list("study_id", flat=True).distinct()
    )
    Study.objects.filter(pk__in=with_incidents - with_research).update(accepts_incidents=True)


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0011_coded_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="accepts_incidents",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(opt_in_incident_studies, migrations.RunPython.noop),
    ]
