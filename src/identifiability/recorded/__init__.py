"""Recorded heavy runs: every job whose results are committed under data/recorded/, with their provenance."""
