"""Generated text: one module per chapter, named as the chapter, holding every sentence, Markdown block and
table a page shows that is not a chart, each from a study result (or a verdict) of that chapter. No module
here imports Altair: the charts are in :mod:`identifiability.charts`. Numbers in verdicts are formatted by
:mod:`identifiability.verdicts.text`.
"""
