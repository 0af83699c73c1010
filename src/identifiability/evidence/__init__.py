"""Evidence: what each claim's verdict reads, one frozen dataclass per claim, in the module of the claim's
chapter (``evidence/<chapter name>.py``, the chapter's one name as in ``studies/`` and ``verdicts/``).

The chapter's study builds it (estimates, their :class:`identifiability.base.stats.Interval` s, null baselines, raw
counts a rule thresholds); ``verdicts.<chapter name>.c<N>(evidence, rules)`` reads it. Neither side imports
the other: this package imports nothing of the package but :mod:`identifiability.base.stats`, so a study never
depends on a rule, and a rule's thresholds live in the verdicts module alone (a threshold a study needs to
build its evidence is a parameter of the study, passed the verdicts module's constant by the chapter).
"""
