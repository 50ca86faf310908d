"""Each family's step layout, by model type: BERT's code and the families built like it (`steps`), ModernBERT's
(`steps_modernbert`) and DeBERTa-v2's (`steps_deberta`). A new family's layout is one entry here."""

from __future__ import annotations

from .steps import ALBERT, BERT, DISTILBERT, ELECTRA, MPNET, ROBERTA, StepLayout
from .steps_deberta import DEBERTA
from .steps_modernbert import MODERNBERT

STEPS: dict[str, StepLayout] = {
    "bert": BERT, "roberta": ROBERTA, "xlm-roberta": ROBERTA, "camembert": ROBERTA, "distilbert": DISTILBERT,
    "electra": ELECTRA, "albert": ALBERT, "mpnet": MPNET, "modernbert": MODERNBERT, "deberta-v2": DEBERTA,
}
