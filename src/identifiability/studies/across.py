"""Chapter 8's study: every model this copy of the book has results for, compared on shared parameters."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .. import across
from . import Study, data


@dataclass(frozen=True)
class Comparison(Study):
    """The results table read for a comparison across models, and what the page shows of it."""

    models: int  # models that can be compared (same seed and shared parameters)
    table_rows: int  # rows of the whole results table
    runs: int = data()  # chapter runs in the table
    models_in_table: int = data()
    model_table: pd.DataFrame = data()  # one row per compared model: model_key, model, role
    claim_table: pd.DataFrame = data()  # across.claims
    curves: pd.DataFrame = data()  # across.curves
    no_separator: list[str] = data()  # models whose tokenizer adds no separator to a sentence
    fine_tuning: dict = data()  # across.fine_tuning_inputs: what C13 and C14 take


def comparison(table: pd.DataFrame, reference: str, seed: int, judge_corpus: str) -> Comparison:
    """Compare the models of ``table`` (``aggregate.read_table``) on runs of ``seed`` with the parameters most
    models share; ``reference`` is the pre-trained model, ``judge_corpus`` the text C13 and C14 are judged on."""
    rows = across.comparable(table, seed=seed)
    models = across.models_of(rows, reference=reference)
    return Comparison(
        models=len(models),
        table_rows=len(table),
        runs=int(table.run.nunique()) if len(table) else 0,
        models_in_table=int(table.model_key.nunique()) if len(table) else 0,
        model_table=models,
        claim_table=across.claims(rows, models),
        curves=across.curves(rows, models),
        no_separator=across.without_separator(rows, models),
        fine_tuning=across.fine_tuning_inputs(rows, models, judge_corpus),
    )


RESULTS = (Comparison,)
