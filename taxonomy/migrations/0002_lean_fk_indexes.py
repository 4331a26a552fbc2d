"""Drop the codebook foreign-key indexes that each table's unique constraint led by the codebook covers."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('taxonomy', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='axisvalue',
            name='codebook',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='axis_values', to='taxonomy.codebook'),
        ),
        migrations.AlterField(
            model_name='category',
            name='codebook',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='categories', to='taxonomy.codebook'),
        ),
        migrations.AlterField(
            model_name='codebookrule',
            name='codebook',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='rules', to='taxonomy.codebook'),
        ),
        migrations.AlterField(
            model_name='failuretype',
            name='codebook',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='failure_types', to='taxonomy.codebook'),
        ),
    ]
