"""Query parameters and response shapes of the analysis endpoints (for validation and the OpenAPI schema).

The documents themselves are built by annotate.analysis; these serializers
describe them so the schema tells clients what they get.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from annotate.analysis.coders import AGREEMENT_B
from annotate.analysis.params import DEFAULT_B
from lib.stats.bootstrap import (
    CELL_METHOD_ALIASES,
    CELL_METHOD_NAMES,
    CELL_METHODS,
    DEFAULT_CELL_METHOD,
    MIN_CLUSTERS,
)

# Named once for the OpenAPI schema (settings.SPECTACULAR_SETTINGS ENUM_NAME_OVERRIDES).
CELL_INTERVAL_CHOICES = [*CELL_METHODS, *CELL_METHOD_ALIASES]  # an old name gives its method


class MatrixQuerySerializer(serializers.Serializer):
    bootstrap = serializers.IntegerField(
        required=False,
        min_value=100,
        help_text=f"Cluster-bootstrap replicates B (default {DEFAULT_B}). Above "
        f"FAULTLINE_BOOTSTRAP_JOB_THRESHOLD ({settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD:,}) the analysis runs as "
        "a job: POST studies/{slug}/analysis/; a finished job with the same parameters and data is served here.",
    )
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**32 - 1, help_text="Random seed.")
    cell = serializers.CharField(
        required=False, help_text="STAGE:CAPABILITY codes of the contrast cell; default the largest difference."
    )
    contrast = serializers.CharField(
        required=False, help_text="KIND_A-KIND_B, e.g. github_issue-literature (the default)."
    )
    cap = serializers.IntegerField(
        required=False, min_value=1, max_value=10000, help_text="At most this many episodes per cluster (check)."
    )
    bca = serializers.BooleanField(
        required=False, default=False, help_text='BCa bootstrap intervals (the old spelling of interval="bca").'
    )
    interval = serializers.ChoiceField(
        choices=CELL_INTERVAL_CHOICES,
        required=False,
        help_text=f"Cell-share interval, default {DEFAULT_CELL_METHOD}: "
        + "; ".join(f"{k}: {v}" for k, v in CELL_METHOD_NAMES.items())
        + "; ".join(f". {k} is the old name of {v}" for k, v in CELL_METHOD_ALIASES.items())
        + ". Differences between kinds always use the cluster bootstrap (BCa with interval=bca).",
    )
    version = serializers.CharField(
        required=False, max_length=150,
        help_text="An earlier codebook version of the study (NAME@VERSION or VERSION), after a codebook migration: "
        "the matrices of the final labels as the migration found them, with that version's codes (cell too). "
        "Default: the study's codebook now. parameters.codebook says which version the numbers use.",
    )  # fmt: skip


class CoverageQuerySerializer(serializers.Serializer):
    version = serializers.CharField(
        required=False, max_length=150,
        help_text="An earlier codebook version of the study (NAME@VERSION or VERSION): hold-out coverage of the "
        "final labels as a codebook migration found them. Default: the study's codebook now.",
    )  # fmt: skip


class AgreementQuerySerializer(serializers.Serializer):
    bootstrap = serializers.IntegerField(
        required=False, default=AGREEMENT_B, min_value=100, max_value=20000, help_text="Replicates over episodes."
    )
    seed = serializers.IntegerField(required=False, default=0, min_value=0, max_value=2**32 - 1)
    version = serializers.CharField(
        required=False, default=None, allow_null=True, max_length=150,
        help_text="An earlier codebook version of the study (NAME@VERSION or VERSION), after a codebook migration: "
        "agreement of the codings as the migration found them. Default: the study's codebook now.",
    )  # fmt: skip


class EstimateSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(help_text="Why the value or interval is missing, if it is.")
    interval = serializers.ChoiceField(
        choices=["percentile", "clopper_pearson_one_sided"],
        help_text="percentile bootstrap, or at perfect / near-perfect agreement a one-sided lower bound "
        "(ci_low; ci_high is then 1): Clopper-Pearson on the share of disagreeing episodes, carried through "
        "the chance correction.",
    )
    one_sided = serializers.BooleanField()
    undefined_share = serializers.FloatField(
        allow_null=True, help_text="Share of bootstrap replicates in which the statistic was undefined (left out)."
    )
    warning = serializers.CharField(help_text="Set when undefined_share is above 5%, with the reason.")


class StudyRefSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()


class CodeCountSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()
    count = serializers.IntegerField()
    proportion = serializers.FloatField(allow_null=True)


class DistributionsSerializer(serializers.Serializer):
    failure_type = CodeCountSerializer(many=True)
    category = CodeCountSerializer(many=True)
    source = CodeCountSerializer(many=True)


def grid(help_text: str, null: bool = True):
    return serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField()), allow_null=null, help_text=help_text
    )


class KindSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["github_issue", "literature", "incident", "trace"])
    label = serializers.CharField()
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    n_episodes = serializers.IntegerField()
    n_clusters = serializers.IntegerField()
    largest_cluster = serializers.DictField(allow_null=True)
    counts = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()), help_text="stages x capabilities"
    )
    row_totals = serializers.ListField(child=serializers.IntegerField())
    col_totals = serializers.ListField(child=serializers.IntegerField())
    proportions = grid("Cell share of the kind's episodes; null without episodes.")
    ci_low = grid("Lower interval limits; null without enough data.")
    ci_high = grid("Upper interval limits; null without enough data.")
    interval = serializers.ChoiceField(choices=list(CELL_METHODS), help_text="The cell-share interval method.")
    interval_name = serializers.CharField(help_text="What the interval method is, in words.")
    clusters_with_records = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="Per cell, the clusters holding at least one of its episodes.",
    )
    effective_clusters = grid(
        "Per cell, how many clusters' worth its episodes are: (sum y)^2 / sum y^2 over clusters (Kish); "
        "null without enough data."
    )
    few_clusters = serializers.ListField(
        child=serializers.ListField(child=serializers.BooleanField()),
        help_text=f"Per cell: the interval rests on fewer than {MIN_CLUSTERS} effective clusters (which includes "
        f"every cell with records in fewer than {MIN_CLUSTERS} clusters).",
    )
    n_eff = grid("Effective sample size per cell the analytic intervals use; null without enough data.")
    df = grid(
        "Degrees of freedom of each cell's lower limit (Bell-McCaffrey under the cell's intra-cluster correlation, "
        "see docs/intervals.md); null without enough data."
    )
    df_upper = grid(
        "Degrees of freedom of each cell's upper limit: where it is clustered, the part of the variance estimate "
        "independent of the error rests on at most its effective clusters - 1 (docs/intervals.md, step 4); "
        "null without enough data."
    )
    distributions = DistributionsSerializer()
    excluded = serializers.DictField(child=serializers.IntegerField(), help_text="Excluded episodes by reason.")


class DifferenceSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    estimate = grid("p_a - p_b per cell.", null=False)
    ci_low = grid("Lower limits; null without enough data.")
    ci_high = grid("Upper limits; null without enough data.")
    excludes_zero = serializers.ListField(
        child=serializers.ListField(child=serializers.BooleanField()), allow_null=True
    )
    interval = serializers.ChoiceField(choices=["percentile", "bca"], help_text="Cluster-bootstrap interval.")
    few_clusters = serializers.ListField(
        child=serializers.ListField(child=serializers.BooleanField()),
        help_text=f"Per cell: either kind rests on fewer than {MIN_CLUSTERS} effective clusters.",
    )


class CheckSerializer(serializers.Serializer):
    check = serializers.ChoiceField(
        choices=["leave_one_cluster_out", "cluster_cap", "drop_largest_cluster", "record_bootstrap"]
    )
    description = serializers.CharField()
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    estimate = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    keeps_sign = serializers.BooleanField(allow_null=True)
    excludes_zero = serializers.BooleanField(allow_null=True)
    detail = serializers.DictField()


class ContrastSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    cell = serializers.DictField(child=serializers.CharField())
    cell_chosen = serializers.ChoiceField(choices=["given", "largest_difference"])
    a_count = serializers.IntegerField()
    a_n = serializers.IntegerField()
    b_count = serializers.IntegerField()
    b_n = serializers.IntegerField()
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    estimate = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    excludes_zero = serializers.BooleanField(allow_null=True)
    few_clusters = serializers.BooleanField(help_text=f"Either kind rests on fewer than {MIN_CLUSTERS} clusters.")
    sensitivity_bootstrap = serializers.IntegerField(required=False, allow_null=True)
    sensitivity = CheckSerializer(many=True)


class ExcludedSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    by_reason = serializers.DictField(child=serializers.IntegerField())
    holdout_not_in_matrices = serializers.IntegerField(required=False)


class DataSnapshotSerializer(serializers.Serializer):
    as_of = serializers.DateTimeField(
        allow_null=True, help_text="Latest change to codings, adjudications or documents."
    )
    fingerprint = serializers.CharField(help_text="sha256 of the labels analysed.")
    episodes = serializers.IntegerField(required=False)
    labelled_primary = serializers.IntegerField(required=False)
    holdout = serializers.IntegerField()


class AnalysisDocumentSerializer(serializers.Serializer):
    schema = serializers.CharField(help_text="faultline.analysis/1")
    study = StudyRefSerializer()
    parameters = serializers.DictField(
        help_text="bootstrap, seed, level, interval (the cell method), interval_name, interval_default, "
        "interval_methods, difference_interval, min_clusters, resampling, block, cap, subsamples, codebook (the "
        "NAME@VERSION the numbers use), codebook_versions (every version the study used, the current one first), "
        "codebook_current, version (the version asked for; null: the current one), label_rule, label_coder"
    )
    data = DataSnapshotSerializer()
    axes = serializers.DictField(help_text="stages and capabilities: lists of {code, name}, the matrix order.")
    kinds = KindSerializer(many=True)
    differences = DifferenceSerializer(many=True)
    contrast = ContrastSerializer()
    excluded = ExcludedSerializer()
    generated_at = serializers.DateTimeField()


class PairSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    n = serializers.IntegerField()
    percent_agreement = EstimateSerializer()
    cohen_kappa = EstimateSerializer()
    confusion = serializers.DictField(
        help_text="labels (codes either coder used) and matrix (rows: coder a); agreed (the diagonal's total) and "
        "labels_used. On the overall axis only the 30 whole labels the pair used most are kept: the others fold "
        "into one last row and column (other: how many), so every total is unchanged."
    )


class AxisAgreementSerializer(serializers.Serializer):
    axis = serializers.ChoiceField(choices=["failure_type", "category", "source", "stage", "capability", "overall"])
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    n_episodes = serializers.IntegerField()
    n_ratings = serializers.IntegerField()
    n_categories = serializers.IntegerField(
        help_text="The codebook's categories for the axis: what Gwet's AC1 spreads chance agreement over."
    )
    categories_used = serializers.IntegerField(help_text="Categories some coder used.")
    n_rated = serializers.IntegerField(help_text="Episodes with at least one coding (they enter chance terms).")
    disagreeing = serializers.IntegerField(help_text="Episodes coded by two or more with any disagreement.")
    percent_agreement = EstimateSerializer()
    fleiss_kappa = EstimateSerializer()
    krippendorff_alpha = EstimateSerializer()
    gwet_ac1 = EstimateSerializer()
    pairs = PairSerializer(many=True)


class WorstTypeSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()
    specific_agreement = serializers.FloatField()
    ratings = serializers.IntegerField()


class AgreementDocumentSerializer(serializers.Serializer):
    schema = serializers.CharField(help_text="faultline.agreement/1")
    study = StudyRefSerializer()
    parameters = serializers.DictField()
    coders = serializers.ListField(child=serializers.CharField())
    axes = AxisAgreementSerializer(many=True)
    worst_types = WorstTypeSerializer(many=True)
    attribution = serializers.DictField(
        help_text="Trace episodes: agreement on the responsible agent (kappa, alpha) and the decisive step (exact, "
        "within 1 and 3 steps), and accuracy of each coder, the final labels and each suggester against the "
        "reference attribution (Wilson intervals, with n)."
    )
    generated_at = serializers.DateTimeField()


class CoverageSerializer(serializers.Serializer):
    status = serializers.CharField(help_text='"ok", or "not_enough_data" (see reason).')
    reason = serializers.CharField()
    covered = serializers.IntegerField()
    needs_new_type = serializers.IntegerField()
    n = serializers.IntegerField()
    value = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)


class KindCoverageSerializer(CoverageSerializer):
    kind = serializers.CharField()


class NewTypeEpisodeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()


class CoverageDocumentSerializer(serializers.Serializer):
    schema = serializers.CharField(help_text="faultline.coverage/1")
    study = StudyRefSerializer()
    parameters = serializers.DictField()
    data = DataSnapshotSerializer()
    coverage = CoverageSerializer()
    by_kind = KindCoverageSerializer(many=True)
    excluded = ExcludedSerializer()
    new_type_episodes = NewTypeEpisodeSerializer(many=True)
    generated_at = serializers.DateTimeField()
