"""Drop the single-column foreign-key indexes that a composite index or unique constraint led by the same
column already covers (coding: (episode, coder) and (coder, updated_at); lease, exposure, suggestion,
trace step, job, membership and suggester audit likewise): each cost every save, lease and import a write."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0009_scale18_lean_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name='coding',
            name='coder',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='codings', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='coding',
            name='episode',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='codings', to='annotate.episode'),
        ),
        migrations.AlterField(
            model_name='codingexposure',
            name='episode',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='exposures', to='annotate.episode'),
        ),
        migrations.AlterField(
            model_name='job',
            name='study',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='annotate.study'),
        ),
        migrations.AlterField(
            model_name='lease',
            name='episode',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='leases', to='annotate.episode'),
        ),
        migrations.AlterField(
            model_name='membership',
            name='study',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='annotate.study'),
        ),
        migrations.AlterField(
            model_name='suggesteraudit',
            name='study',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='suggester_audits', to='annotate.study'),
        ),
        migrations.AlterField(
            model_name='suggestion',
            name='episode',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='suggestions', to='annotate.episode'),
        ),
        migrations.AlterField(
            model_name='tracestep',
            name='document',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='annotate.document'),
        ),
    ]
