"""Texts: the corpora, their POS tags, token roles and the fine-tuning tasks' data."""
