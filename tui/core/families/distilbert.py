"""DistilBERT (models/distilbert): `transformer.layer.N`, no token types, no pooler, a config of its own names."""

from __future__ import annotations

from .record import Family, Forward, StepKeys

DISTILBERT = Family(
    "distilbert", "DistilBert", "distilbert",
    {head: False for head in ("none", "mlm", "sequence-classification", "token-classification",
                              "question-answering", "multiple-choice")},
    lacks=("type_vocab_size",),
    defaults={"num_hidden_layers": 6},
    aliases={"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
             "hidden_dim": "intermediate_size"},  # DistilBertConfig's attribute_map (hidden_dim: the FFN's width)
    fixed_qa_labels=True,
    layer_stack="transformer.layer",
    roles=(
        (r"^transformer\.layer\.", "encoder.layer."),
        (r"\.attention\.q_lin\.", ".attention.self.query."),
        (r"\.attention\.k_lin\.", ".attention.self.key."),
        (r"\.attention\.v_lin\.", ".attention.self.value."),
        (r"\.attention\.out_lin\.", ".attention.output.dense."),
        (r"\.sa_layer_norm\.", ".attention.output.LayerNorm."),
        (r"\.ffn\.lin1\.", ".intermediate.dense."),
        (r"\.ffn\.lin2\.", ".output.dense."),
        (r"\.output_layer_norm\.", ".output.LayerNorm."),
    ),
    forward=Forward(layer="TransformerBlock", token_types=False, lm_head="transform-bias-last", qa_dropout=True),
    step_keys=StepKeys(activation="activation", dropouts=("dropout", "attention_dropout")),
)
