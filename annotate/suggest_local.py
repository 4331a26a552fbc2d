"""Kept for pickles, and for nothing else: local models trained before the layout move are stored in
LocalModel.blob naming their classes `annotate.suggest_local.TrainedModel` and `...AxisModel`, and unpickling
imports this module to find them. Models trained since name annotate.suggestions.local_model. Never remove it
while such blobs may be stored; tests/test_layout.py loads one written at 74991ea.
"""

from annotate.suggestions.local_model import AxisModel, TrainedModel

__all__ = ["AxisModel", "TrainedModel"]
