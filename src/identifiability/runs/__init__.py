"""Runs at scale: sweeps over models, corpora and seeds, corpus-scale HTA, the results table, model comparison."""
