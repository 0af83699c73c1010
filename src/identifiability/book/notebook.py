"""What every chapter notebook does first and last: load, seed, describe the run, save results.

A chapter's first code cell (tagged ``parameters``) declares at least ``model``, ``corpus``,
``n_sentences``, ``max_tokens``, ``seed``, ``device`` and ``results_dir``; the next cell calls
:func:`setup` with them. papermill overrides the parameters; an empty ``results_dir`` means
``data/results/<model>/<corpus>`` so that different models never overwrite each other.
"""

from __future__ import annotations

import importlib
import platform
import random
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..base.fileio import jsonable, read_json, write_json
from ..base.paths import DEFAULT_MODEL
from ..base.results import ADOPTED, RECORDED_FROM
from ..chapters.contract import CHAPTERS, results_file
from ..charts.render import enable_offline
from ..corpus.corpora import Corpus, drop_unusable, load_corpus, sample_sentences
from ..models import keys
from ..models.load import load_model, twin_of
from ..models.loaded_model import LoadedModel
from ..recorded import computed_with
from ..recorded.store import Recorded
from ..verdicts import Verdict, anchor, render, render_twin
from ..verdicts.claims import load_claims, robustness_names, rules_of
from . import schema
from .findings import chapter_summary


@dataclass
class Chapter:
    name: str
    lm: LoadedModel
    corpus: Corpus
    params: dict
    results_dir: Path
    results: dict = field(default_factory=dict)
    dropped_lines: int = 0  # corpus lines left out: they tokenise to special or unknown tokens only
    target: keys.Target | None = None  # the model and corpus as setup resolved them (None: a chapter built by hand)
    _twin: LoadedModel | None = field(default=None, repr=False)

    def sentences(
        self, n: int | None = None, min_tokens: int = 3, max_tokens: int | None = None, corpus: Corpus | None = None
    ) -> list[str]:
        """A seeded sample of sentences from the chapter's corpus (or another one)."""
        return sample_sentences(
            corpus or self.corpus,
            n or self.params["n_sentences"],
            self.params["seed"],
            self.lm.tokenizer,
            min_tokens=min_tokens,
            max_tokens=max_tokens or self.params["max_tokens"],
        )

    def record(self, **values) -> None:
        """Add measured quantities to this chapter's results (saved by :meth:`save`)."""
        self.results.update(values)

    def _claim(self, claim_id: str) -> dict:
        known = {c["id"]: c for c in load_claims()}
        if claim_id not in known or known[claim_id]["chapter"] != self.name:
            raise KeyError(f"{claim_id!r} is not a claim of chapter {self.name} in data/claims.csv")
        return known[claim_id]

    def judge(self, claim_id: str, evidence, recorded: Recorded | None = None) -> Verdict:
        """Judge a claim of this chapter on ``evidence`` and record the verdict in this chapter's results;
        ``recorded``: the recorded run whose numbers the evidence holds (None: this run's own), which the
        findings tables name beside the verdict (results key ``recorded_from``).

        The claim's one entry point is ``verdicts.<chapter name>.c<N>`` (found through the chapter contract),
        called with ``evidence`` (the study's typed evidence of the claim) and its rules from
        ``data/claims.csv`` and ``data/amendments.csv``. The verdict must be judged under the rule in force,
        carry its original rule's verdict where the claim was amended (``verdicts.amended``) and its verdicts
        under exactly the alternatives the claim's row names (``verdicts.with_robustness``). Returns the
        verdict; :meth:`sentence` gives the sentence the page shows."""
        v = self._judged(claim_id, evidence)
        self.results.setdefault("claims", {})[v.claim] = v.to_json()
        if recorded is not None:
            self._recorded_from(claim_id, recorded)
        return v

    def _recorded_from(self, claim_id: str, rec: Recorded) -> None:
        where = {"target": rec.target or rec.job, "date": rec.date}
        self.results.setdefault(RECORDED_FROM, {})[claim_id] = where

    def judge_twin(self, claim_id: str, evidence) -> Verdict:
        """Judge a claim on the untrained twin's ``evidence`` (:attr:`twin`), under the same rule and entry point
        as :meth:`judge`, and record it apart (results key ``twin_claims``, the claims page's twin column): the
        twin's verdict stands beside the model's, never folded into it. :meth:`twin_sentence` words it."""
        v = self._judged(claim_id, evidence)
        self.results.setdefault("twin_claims", {})[v.claim] = v.to_json()
        return v

    def judge_on(self, claim_id: str, evidence, other: str) -> Verdict:
        """Judge a claim on evidence from another model than the chapter's (``other``: its name), under the same
        rule and entry point as :meth:`judge`, recorded apart (results key ``other_claims``, ``{other: {claim:
        verdict}}``): never folded into the chapter's own verdict. ``sentence(v, anchor_=False)`` words it."""
        v = self._judged(claim_id, evidence)
        self.results.setdefault("other_claims", {}).setdefault(other, {})[v.claim] = v.to_json()
        return v

    def recorded(self, claim_id: str, verdict: dict, rec: Recorded) -> Verdict:
        """A verdict the recorded heavy run ``rec`` judged (``verdict``: as its results file holds it), recorded
        as this chapter's, when it was judged under the rule in force; else "not run", naming the make target
        that judges it again (a recording is never re-labelled with a rule it was not judged under)."""
        from ..verdicts import NOT_RUN, from_json, with_robustness

        target = rec.target or rec.job
        claim = self._claim(claim_id)
        v = from_json(verdict)
        if v.claim != claim_id or v.rule != claim["rule"]:
            why = f"the recorded run was judged under an earlier rule of {claim_id}; `make {target}` judges it again"
            v = Verdict(claim_id, NOT_RUN, None, None, None, "", claim["rule"], why)
            v = with_robustness(v, {name: v for name in robustness_names(claim)})
        self.results.setdefault("claims", {})[claim_id] = v.to_json()
        self._recorded_from(claim_id, rec)
        # judged on the recorded run's models, not this run's: the results table never files it under this model
        self.results.setdefault(ADOPTED, {})[claim_id] = target
        return v

    def _judged(self, claim_id: str, evidence) -> Verdict:
        claim = self._claim(claim_id)
        verdicts = importlib.import_module(CHAPTERS[self.name].module("verdicts"))
        v = getattr(verdicts, claim_id.lower())(evidence, rules_of(claim))
        if v.claim != claim_id:
            raise ValueError(f"{claim_id}'s verdict function returned a verdict of {v.claim}")
        if v.rule != claim["rule"]:
            raise ValueError(f"{v.claim}: judged with another rule than the one in force in data/claims.csv")
        if claim["amendment"] is not None and (v.original is None or v.original.rule != claim["original_rule"]):
            raise ValueError(
                f"{v.claim} was amended: its verdict must carry its original rule's (verdicts.amended(v, original))"
            )
        names = robustness_names(claim)
        if [name for name, _ in v.robustness] != names:
            raise ValueError(
                f"{v.claim}: the robustness alternatives {[n for n, _ in v.robustness]} differ from the ones "
                f"data/claims.csv names, {names} (verdicts.with_robustness)"
            )
        return v

    @property
    def twin(self) -> LoadedModel:
        """The model's untrained twin (:func:`identifiability.models.load.twin_of`, seed ``twin_seed`` or the chapter's
        seed), built once per chapter; its provenance is recorded (results key ``twin``)."""
        if self._twin is None:
            seed = int(self.params.get("twin_seed", self.params.get("seed", 0)))
            self._twin = twin_of(self.lm, seed)
            p = self._twin.provenance
            self.results["twin"] = {k: p[k] for k in ("name", "source", "seed", "initialiser", "content_key")}
        return self._twin

    def verdicts_text(self, verdicts: list[Verdict], twins: list[Verdict] = (), what: str = "") -> str:
        """Each verdict's sentence (:meth:`sentence`), each followed by its claim's verdict on the untrained twin
        where ``twins`` has it (:meth:`twin_sentence`; ``what``: what the twin ran on)."""
        by_claim = {t.claim: t for t in twins}
        return "\n\n".join(
            self.sentence(v) + (f"\n\n{self.twin_sentence(v, by_claim[v.claim], what)}" if v.claim in by_claim else "")
            for v in verdicts
        )

    def twins_text(self, verdicts: list[Verdict], twins: list[Verdict], what: str) -> str:
        """The twin's sentences alone (:meth:`twin_sentence`), for a page that showed the model's verdicts
        section by section; each twin verdict beside its claim's."""
        by_claim = {v.claim: v for v in verdicts}
        return "\n\n".join(self.twin_sentence(by_claim[t.claim], t, what) for t in twins)

    def twin_sentence(self, trained: Verdict, twin: Verdict, what: str) -> str:
        """The sentence beside a verdict (:meth:`sentence`) for the same claim on the untrained twin: its verdict,
        its estimate and trained minus twin with an interval (``what``: what the twin ran on)."""
        return render_twin(trained, twin, what)

    def sentence(self, v: Verdict, anchor_: bool = True) -> str:
        """The sentence the page shows for a verdict of this chapter (:meth:`judge`), led by the anchor the
        claims page links to (``verdicts.anchor``: an HTML id on the chapter's page; not for a second verdict
        of the same claim, :meth:`judge_on`, as an id is unique on a page)."""
        lead = f'<span id="{anchor(v.claim)}"></span>' if anchor_ else ""
        return lead + render(v, self._claim(v.claim)["claim"])

    def summary(self) -> str:
        """The chapter's findings at a glance, for the top of its page (Markdown; glued as ``claims_summary``):
        each claim judged so far, the claim before its verdict, with the estimate and its interval, the untrained
        twin's verdict and the recorded run it was judged on (:func:`identifiability.book.findings.chapter_summary`)."""
        return chapter_summary(jsonable(self.results), self.name)

    def save(self) -> Path:
        """Write ``<results_dir>/<chapter>.json`` with the results, parameters and model provenance, after
        checking the results against the chapter's schema (:mod:`identifiability.book.schema`), and the package's
        modules this kernel computed them with (``computed_with``:
        :func:`identifiability.recorded.computed_with.imported`),
        which a recorded run that gathers the file reports."""
        results = jsonable(self.results)
        schema.check(self.name, results)
        return write_json(
            self.results_dir / f"{self.name}.json",
            {
                "chapter": self.name,
                "params": self.params,
                "provenance": self.lm.provenance,
                "corpus": {
                    "name": self.corpus.name,
                    "sentences": len(self.corpus),
                    "dropped_lines": self.dropped_lines,
                },
                "schema_version": schema.SCHEMA_VERSION,
                "results": results,
                computed_with.KEY: computed_with.imported(),
            },
        )

    def describe(self) -> str:
        """Which model, weights, text and parameters this chapter ran on (short lines, for print)."""
        p = self.lm.provenance
        # a parameter left unset (None) reads "not set": the page shows no raw None
        params = [
            f"{k}={v!r}" if v is not None else f"{k} not set"
            for k, v in self.params.items()
            if k not in ("model", "corpus")
        ]
        rows = [
            (
                "model",
                f"{p.get('name')} ({self.lm.adapter.family}, {self.lm.n_layers} layers, {self.lm.n_heads} heads, "
                f"d={self.lm.d_model}, d_v={self.lm.d_v})",
            ),
            ("weights", f"{p.get('source')}"),
            ("content", f"{p.get('content_key', 'n/a')[:16]}… (SHA-256 of weights, config and tokenizer files)"),
            ("revision", f"{p.get('revision') or 'n/a'}"),
            (
                "corpus",
                f"{self.corpus.name} ({len(self.corpus)} sentences"
                + (
                    f"; {self.dropped_lines} lines left out: only special or unknown tokens)"
                    if self.dropped_lines
                    else ")"
                ),
            ),
            ("parameters", ", ".join(params)),
            ("software", f"torch {torch.__version__}, python {platform.python_version()}"),
        ]
        # 72 columns: what a page's output box shows at 1280 px; a wrapped row keeps its indent
        return "\n".join(
            textwrap.fill(
                v,
                72,
                initial_indent=f"{k:>10}  ",
                subsequent_indent=" " * 12,
                break_long_words=False,  # a path or a list value stays whole (the page wraps it if it must)
                break_on_hyphens=False,
            )
            for k, v in rows
        )


def setup(
    chapter: str,
    model: str | None = DEFAULT_MODEL,
    corpus: str = "lee",
    n_sentences: int = 100,
    max_tokens: int = 128,
    seed: int = 0,
    device: str = "cpu",
    results_dir: str = "",
    **extra,
) -> Chapter:
    """Load the model and corpus, seed everything, switch charts to offline rendering. The kernel is a process of
    its own: the model and corpus are resolved here, once (``Chapter.target``), for everything the chapter does."""
    random.seed(seed)
    torch.manual_seed(seed)
    enable_offline()
    target = keys.target(model or None, corpus)
    lm = load_model(target.model, device=device)
    corp, dropped = drop_unusable(load_corpus(corpus), lm.tokenizer)
    params = {
        "model": model,
        "corpus": corpus,
        "n_sentences": n_sentences,
        "max_tokens": max_tokens,
        "seed": seed,
        "device": device,
        **extra,
    }
    out = Path(results_dir) if results_dir else target.results_dir
    return Chapter(chapter, lm, corp, params, out, dropped_lines=dropped, target=target)


def load_results(results_dir: str | Path, chapter: str) -> dict:
    return read_json(results_file(results_dir, chapter))
