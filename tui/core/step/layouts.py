"""Each family's step layout, by model type: BERT's code and the families built like it (`steps`), ModernBERT's
(`steps_modernbert`) and DeBERTa-v2's (`steps_deberta`). A new family's layout is one entry here."""

from __future__ import annotations

from .steps import BERT_LIKE, StepLayout
from .steps_deberta import DEBERTA
from .steps_modernbert import MODERNBERT

STEPS: dict[str, StepLayout] = {**BERT_LIKE, "modernbert": MODERNBERT, "deberta-v2": DEBERTA}
