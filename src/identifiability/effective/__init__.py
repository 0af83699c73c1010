"""Effective attention (chapter 3's topic): the null-space projection, its nulls, attention mass per key category."""
