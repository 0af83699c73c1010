"""Altair charts: the only part of the package that imports Altair.

``render`` draws charts in a static, offline page (and registers the renderer) and holds what several
chapters' charts share; ``narrow`` lays charts out for a narrow page; ``verdicts`` draws each verdict. One
module per chapter, named as the chapter, builds that chapter's charts from computed results (data frames
and tensors in, Altair charts out); the sentences and tables a page shows beside them are in
:mod:`identifiability.text`.
"""
