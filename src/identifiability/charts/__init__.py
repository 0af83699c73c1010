"""Altair charts: the only part of the package that imports Altair.

``render`` draws charts in a static, offline page (and registers the renderer); one module per chapter
builds that chapter's charts from computed results (data frames and tensors in, Altair charts out).
"""
