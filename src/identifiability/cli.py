"""Command line: execute chapter notebooks with papermill and build the Jupyter Book.

    identifiability book [--model M] [--corpus C] [-p name=value ...] [--only 02]
                         [--repository https://github.com/<owner>/<repo>] [--branch main]
    identifiability run notebooks/NN_<name>.md [--model M] [-p n_sentences=20] [--out DIR]
    identifiability compare OLD_RESULTS_DIR NEW_RESULTS_DIR   (what changed between two runs' results)
    identifiability record-c10 [--model M] [--corpus C] [--n N]   (C10's recorded run, data/recorded/c10/)
    identifiability record-compare [--base M] [--data DIR]   (make compare's recorded run, data/recorded/compare/)
    identifiability record-confirm [--model M] [--corpus lee_test]   (claims on unseen text, data/recorded/confirm/)
    identifiability record-family [--data DIR] [--corpus C]   (make family's recorded run, data/recorded/family/)
    identifiability record-measures [--model M] [--corpus C] [--n N]   (chapter 10's, data/recorded/measures/)
    identifiability pretrain [--members NAME,...|all] [--tokens N] [--device cpu|cuda]   (the family, data/models/)
    identifiability resplit [--model M] [--widths 16,64,128] [--tokens N] [--mode global|layerwise]   (healed)

Notebook sources are jupytext MyST files in ``notebooks/``; executed ``.ipynb`` files and HTML are build
output under ``_build/``. The book for the embedded default model goes to ``_build/html``; any other model
or corpus goes to ``_build/<model>/<corpus>/html`` (``run``: ``.../run``) so runs never overwrite each other.
Every option and chapter parameter is checked before anything runs; a bad one is one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from .base import paths, stops  # stops before .chapters loads torch: a Ctrl-C meanwhile is one line too
from .base.errors import ChapterFailed, UserError, one_line
from .base.paths import DEFAULT_MODEL
from .chapters.contract import CORPUS_HTA, by_role, check_parameters, check_source, preflight
from .chapters.execution import run_notebook
from .chapters.parameters import ParameterError, declared_parameters
from .chapters.preflight import check_writable
from .models import keys  # stops before .chapters loads torch: a Ctrl-C meanwhile is one line too


def parse_params(pairs: list[str]) -> dict:
    """``-p name=value`` options as {name: value} (values stay text: each chapter converts its own)."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ParameterError(f"parameter {p!r} must look like name=value, e.g. -p n_sentences=50")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


_INTO = (
    "the checkout whose data/recorded receives the run (default: this one; a pilot smaller than the run "
    "recorded there goes elsewhere, e.g. --into /tmp/pilot)"
)


def _cluster_args(s) -> None:
    s.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786 (default: local)")
    s.add_argument("--workers", type=int, help="local cluster: single-threaded worker processes (default: cores)")


def _command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A command's parser whose own errors (a missing option, a value of the wrong type) are one line, as
    every other error is, instead of argparse's usage block."""
    parser = sub.add_parser(name, **kwargs)

    def error(message: str) -> NoReturn:
        parser.exit(2, f"error: {parser.prog}: {message} (see {parser.prog} --help)\n")

    parser.error = error
    return parser


def _chapter_parsers(sub) -> None:
    for name in ("book", "run"):
        s = _command(sub, name)
        s.add_argument(
            "--model", default=DEFAULT_MODEL, help="Hugging Face id or local folder (default: embedded MiniLM)"
        )
        s.add_argument("--corpus", default="lee", help="lee | lee_test | polarity | glue/<task> | path/to/file.txt")
        s.add_argument("-p", "--param", action="append", default=[], help="chapter parameter name=value")
        if name == "book":
            s.add_argument("--only", nargs="*", help="chapter notebook stems to run (default: all)")
            s.add_argument(
                "--repository",
                help="public GitHub/GitLab https address for the Binder launch "
                "buttons (default: the origin remote, if it is one)",
            )
            s.add_argument("--branch", default="main", help="branch the launch buttons open (default: main)")
        else:
            s.add_argument("notebooks", nargs="+", type=Path)
            s.add_argument(
                "--out",
                type=Path,
                help="folder for the executed notebooks (default: _build/run for the default model and corpus, "
                "else _build/<model>/<corpus>/run)",
            )


def _sweep_parsers(sub) -> None:
    s = _command(sub, "sweep", help="run chapters over models x corpora x seeds on Dask (resumable)")
    s.add_argument("--models", type=_csv, default=[DEFAULT_MODEL], help="comma-separated ids or folders")
    s.add_argument("--corpora", type=_csv, default=[paths.DEFAULT_CORPUS], help="comma-separated corpora")
    s.add_argument("--seeds", type=_csv, default=["0"], help="comma-separated seeds (the chapters' seed)")
    s.add_argument("--chapters", type=_csv, help="comma-separated stems or numbers, e.g. 03,06 (default: all)")
    s.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        help="chapter parameter name=value (every chapter that declares it), or chapter:name=value (one "
        "chapter, by stem or number, e.g. 06:n_sentences=50)",
    )
    _cluster_args(s)
    h = _command(sub, "hta", help="exact HTA for chapter 6's sentences, spread over a Dask cluster")
    h.add_argument("--model", default=DEFAULT_MODEL)
    h.add_argument("--corpus", default=paths.DEFAULT_CORPUS)
    h.add_argument(
        "--n",
        type=int,
        help="sentences (default: chapter 6's n_sentences); more than the corpus has of 3 to --max-tokens tokens "
        "is refused, naming how many it has",
    )
    h.add_argument("--seed", type=int, help="sampling seed (default: chapter 6's)")
    h.add_argument("--max-tokens", type=int, help="longest sentence (default: chapter 6's max_tokens)")
    h.add_argument("--group", type=int, default=1, help="sentences per task (default 1)")
    _cluster_args(h)
    r = _command(sub, "record-c10", help="C10's recorded run: exact HTA of a token-proportional sample (resumable)")
    r.add_argument("--model", default=DEFAULT_MODEL)
    r.add_argument("--corpus", default=paths.DEFAULT_CORPUS)
    r.add_argument("--n", type=int, help="sentences drawn (default: the rule for a half-width of 0.03)")
    r.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    r.add_argument("--group", type=int, default=1, help="sentences per task (default 1)")
    r.add_argument("--into", type=Path, help=_INTO)
    _cluster_args(r)


def _record_compare_parser(sub) -> None:
    from .recorded.compare import CORPORA, TOLERANCE

    what = (
        f"make compare's recorded run: the chapter results chapter 9 compares (on {', '.join(CORPORA)}) and the "
        "models' provenance, from a data folder into data/recorded/compare/<base>/; prints every value that "
        f"moved since the previous recording (numbers beyond {TOLERANCE:g}, anything else exactly; the files "
        "are copied, and on one machine a rerun of make compare is identical)"
    )
    r = _command(sub, "record-compare", help=what, description=what)
    r.add_argument("--base", default=DEFAULT_MODEL, help="the reference model make compare fine-tuned (BASE)")
    r.add_argument("--data", type=Path, help="the data folder make compare filled (default: this checkout's)")
    r.add_argument(
        "--checkout",
        type=Path,
        help="the checkout make compare ran in: its commit, lock and rules go into the provenance and "
        "relative model names resolve against it (default: the checkout above --data, else this one)",
    )
    r.add_argument("--into", type=Path, help=_INTO)
    r.add_argument("--seed", type=int, default=0, help="the chapters' seed compared (default 0)")
    r.add_argument("--started", type=float, help="make compare's start, Unix seconds (the Makefile passes it)")
    r.add_argument(
        "--seconds",
        type=float,
        help="make compare's duration (default: since --started, else the recorded sweep runs' span)",
    )


def _record_family_parser(sub) -> None:
    what = (
        "make family's recorded run: chapter 7's results on the family, every member's verdicts in chapters 2 to 6 "
        "and each member's provenance (never weights), into data/recorded/family/<corpus>/"
    )
    r = _command(sub, "record-family", help=what, description=what)
    r.add_argument("--data", type=Path, help="the data folder make family filled (default: this checkout's)")
    r.add_argument("--corpus", default=paths.DEFAULT_CORPUS, help="the corpus the chapters ran on (default lee)")
    r.add_argument("--started", type=float, help="make family's start, Unix seconds (the Makefile passes it)")
    r.add_argument("--into", type=Path, help=_INTO)


def _record_measures_parser(sub) -> None:
    from .verdicts.measures import MEASURES_MIN_SENTENCES

    what = (
        "make measures' recorded run: every context-mixing measure scored against exact HTA and an intervention "
        "on sentences drawn like C10's sample (chapter 10), into data/recorded/measures/<model>/<corpus>/"
    )
    r = _command(sub, "record-measures", help=what, description=what)
    r.add_argument("--model", default=DEFAULT_MODEL)
    r.add_argument("--corpus", default=paths.DEFAULT_CORPUS)
    r.add_argument(
        "--n",
        type=int,
        default=MEASURES_MIN_SENTENCES,
        help=f"sentences drawn (at least the rules' {MEASURES_MIN_SENTENCES} for this checkout's record)",
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--into", type=Path, help=_INTO)
    _cluster_args(r)
    r.add_argument("--no-run", dest="run", action="store_false", help="record chapter 10's results already there")


def _record_confirm_parser(sub) -> None:
    what = (
        "make confirm's recorded run: chapters 2 to 6 on text no chapter had seen (lee_test), every claim's verdict "
        "there and the rule it was judged under, into data/recorded/confirm/<model>/<corpus>/"
    )
    r = _command(sub, "record-confirm", help=what, description=what)
    r.add_argument("--model", default=DEFAULT_MODEL)
    r.add_argument("--corpus", default="lee_test", help="text the rules never saw (default lee_test)")
    r.add_argument("--no-run", dest="run", action="store_false", help="record the chapters' results already there")
    r.add_argument("--into", type=Path, help=_INTO)


def _finetune_parsers(sub) -> None:
    from .corpus.tasks import TASKS
    from .models.finetune import Settings

    f = _command(
        sub, "finetune", help="fine-tune a model (the embedded one by default) on a task (resumable; see README)"
    )
    f.add_argument("--task", required=True, help=f"{' | '.join(TASKS)}")
    f.add_argument("--epochs", type=int, default=Settings.epochs, help=f"default {Settings.epochs}")
    f.add_argument("--seed", type=int, default=0, help="default 0")
    f.add_argument(
        "--base",
        default=DEFAULT_MODEL,
        help="model to start from: the embedded one (default), a local folder or a Hugging Face id such as "
        "bert-base-uncased (needs the network or a filled cache)",
    )
    f.add_argument("--out", type=Path, help="model folder (default: data/models/<base>-<task>-seed<seed>)")
    r = _command(sub, "init-random", help="the same architecture with freshly initialised weights")
    r.add_argument(
        "--like",
        default=DEFAULT_MODEL,
        help="model whose architecture to copy: the embedded one (default), a folder or a Hugging Face id",
    )
    r.add_argument("--seed", type=int, default=0, help="default 0")
    r.add_argument("--out", type=Path, help="model folder (default: data/models/<like>-random-seed<seed>)")


def _pretrain_parser(sub) -> None:
    p = _command(sub, "pretrain", help="pre-train the family's masked-LM members into data/models/ (resumable)")
    p.add_argument("--members", default="all", help="comma-separated member names, or all (default)")
    p.add_argument("--tokens", type=int, help="tokens per member (default: the family's; a pilot's folder is apart)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    _cluster_args(p)


def _pretrain_preflight(a: argparse.Namespace) -> None:
    """``--device`` a device this machine has, and a models folder that takes a file, before the text is read
    (the checkpoints' space is checked per member by the job, which knows which members remain)."""
    from .chapters.parameters import ALLOWED

    problem = ALLOWED["device"].problem(a.device)
    if problem:
        raise ParameterError(f"--device {a.device} {problem}; e.g. --device cpu")
    check_writable(
        paths.data_root() / "models", "the models folder", f"set {paths.DATA_ENV} to a data folder that can be"
    )


def _pretrain_main(a) -> int:
    from .pretrain.jobs import pretrain_family, summary

    check_options(a)
    _pretrain_preflight(a)
    text, status = summary(pretrain_family(a.members, a.scheduler, a.workers, a.device, a.tokens))
    print(text)
    return status


def _resplit_parser(sub) -> None:
    p = _command(sub, "resplit", help="the model re-split at other head widths, healed into data/models/ (resumable)")
    p.add_argument(
        "--model", default=DEFAULT_MODEL, help="the model to re-split: the embedded one (default) or a folder"
    )
    p.add_argument("--widths", default="16,64,128", help="head widths, comma-separated (default 16,64,128)")
    p.add_argument("--tokens", type=int, help="tokens each member is healed on (default: the healing's own)")
    p.add_argument("--seed", type=int, default=0, help="the block order's seed (default 0)")
    p.add_argument("--mode", default="global", help="global (default) or layerwise")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")


def _resplit_main(a) -> int:
    from .pretrain.resplits import resplit_family, summary

    _pretrain_preflight(a)  # the device and a models folder that takes a file; each member's is checked next
    print(summary(resplit_family(a.model, a.widths, a.tokens, a.seed, a.mode, a.device)))
    return 0


def _compare_parser(sub) -> None:
    c = _command(sub, "compare", help="compare two folders of results files (timings and paths skipped)")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--rtol", type=float, default=1e-6, help="relative tolerance for numbers (default 1e-6)")
    c.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for numbers (default 0)")


# The least value of each numeric option (by its argparse name); checked before anything runs, so that 0
# is a value (never "not given") and a value below its least is one line.
_LEAST = {
    "tokens": 1,
    "n": 1,
    "seed": 0,
    "seconds": 0,
    "max_tokens": 1,
    "group": 1,
    "workers": 1,
    "epochs": 1,
    "rtol": 0,
    "atol": 0,
}


def check_options(a: argparse.Namespace) -> None:
    """ParameterError (one line) for a numeric option below its least value (:data:`_LEAST`)."""
    for name, least in _LEAST.items():
        value = getattr(a, name, None)
        if value is not None and value < least:
            flag = "--" + name.replace("_", "-")
            raise ParameterError(f"{flag} must be at least {least}, got {value}; e.g. {flag} {least}")


def _hta_preflight(a: argparse.Namespace, model: keys.ModelRef) -> None:
    """The model (``--model`` resolved), the corpus and the sentence window of ``hta``, checked as chapter 6's
    (seconds, no weights), and ``--n`` against the sentences in that window: more would be computed as fewer,
    after a long wait."""
    from .chapters.preflight import ChapterRules, ModelInfo, at_least, check, too_many, window
    from .runs.corpus_hta import HTA_MIN_TOKENS

    default = declared_parameters(by_role(CORPUS_HTA).source)["max_tokens"]
    params = {"max_tokens": default if a.max_tokens is None else a.max_tokens}

    def enough(p: dict, m: ModelInfo, lengths: list[int]) -> str | None:
        usable = sum(HTA_MIN_TOKENS <= k <= p["max_tokens"] for k in lengths)
        where = f"with {HTA_MIN_TOKENS} to {p['max_tokens']} tokens, which chapter 6 samples from"
        return None if a.n is None else too_many("--n", a.n, usable, a.corpus, where)

    rules = ChapterRules(
        (at_least("max_tokens", lambda p, m: HTA_MIN_TOKENS, "a token besides the special ones"),),
        (window(lambda p, m: HTA_MIN_TOKENS, "max_tokens", hint="--max-tokens …"),),
        (enough,),
    )
    check({"hta": (rules, params)}, model, a.corpus)


def _record_measures_preflight(a: argparse.Namespace, target: keys.Target) -> None:
    """The model, the corpus and ``--n`` against the sentences C10's proportional sample draws from, before
    its exact HTA starts: more draws than those sentences score the same sentences again, after hours."""
    from .chapters.preflight import ChapterRules, ModelInfo, check, too_many
    from .recorded.proportional import eligible

    def enough(p: dict, m: ModelInfo, lengths: list[int]) -> str | None:
        pool = eligible(lengths)
        where = f"that C10's proportional sample draws from (at most {pool.max_tokens} tokens)"
        return too_many("--n", a.n, len(pool.indices), a.corpus, where)

    check({"record-measures": (ChapterRules(text=(enough,)), {})}, target.model, target.corpus.name)


def _results_or_known(target: keys.Target) -> None:
    """``--no-run`` records the chapters' results already there: where there are none for this model and
    corpus, a model or a corpus that is none (a typo) is the one line, naming it, rather than "no results"."""
    if target.results_dir.is_dir():
        return
    from .corpus.corpora import load_corpus

    keys.read_config(target.model.name, target.model.source)
    load_corpus(target.corpus.name)


def _chapters_main(a) -> int:
    params = parse_params(a.param)
    if a.cmd == "book":
        from .book.build import build_book

        html = build_book(a.model, a.corpus, params, a.only, repository=a.repository, branch=a.branch)
        print(f"book written to {html}/index.html")
        return 0
    base = {"model": a.model, "corpus": a.corpus, **params}
    for nb in a.notebooks:
        check_source(nb)
    check_parameters(a.notebooks, base)
    target = keys.target(a.model, a.corpus)  # once, here: the checks and the folder below use it
    preflight(a.notebooks, base, model=target.model)
    out = a.out or target.build_dir / "run"  # per model and corpus: another run never overwrites it
    if a.out:  # checked before the chapters, not after them
        check_writable(a.out, "--out", "pass --out a folder that can be written")
    for nb in a.notebooks:
        print(run_notebook(nb, out, base, strict=False))
    return 0


def _sweep_main(a) -> int:
    from .runs import corpus_hta, sweep

    check_options(a)
    if a.cmd == "record-compare":
        from .recorded.compare import record_compare

        record_compare(a.base, a.data, a.seed, a.checkout, a.into, a.started, a.seconds)
        return 0
    if a.cmd == "record-family":
        from .recorded.family import record_family

        record_family(a.data, a.corpus, a.started, into=a.into)
        return 0
    if a.cmd == "record-measures":
        from .recorded.measures import record_measures

        target = keys.target(a.model, a.corpus)  # once, here: the checks and the job below use it
        if a.run:
            _record_measures_preflight(a, target)
        else:
            _results_or_known(target)
        from .recorded.confirm import measures_target

        make_target = measures_target(target.corpus.name)  # on lee_test: make confirm's second step
        record_measures(
            target.model,
            target.corpus,
            a.n,
            a.seed,
            a.scheduler,
            a.workers,
            a.run,
            into=a.into,
            make_target=make_target,
        )
        return 0
    if a.cmd == "record-confirm":
        from .recorded.confirm import record_confirm

        target = keys.target(a.model, a.corpus)
        if not a.run:
            _results_or_known(target)
        record_confirm(target.model, target.corpus, a.run, into=a.into)
        return 0
    if a.cmd == "record-c10":
        from .recorded.c10 import record_c10

        record_c10(a.model, a.corpus, a.n, a.seed, a.group, a.scheduler, a.workers, into=a.into)
        return 0
    if a.cmd == "hta":
        model = keys.model_ref(a.model)  # once, here: the checks and the job below use it
        _hta_preflight(a, model)
        out = corpus_hta.hta_job(model, a.corpus, a.n, a.seed, a.max_tokens, a.group, a.scheduler, a.workers)
        print(
            f"exact HTA: {out['sentences']} sentences, {out['cached_before']} cached before, "
            f"{out['computed']} computed in {out['seconds']:.0f} s"
        )
        return 0
    try:
        seeds = [int(x) for x in a.seeds]
    except ValueError:
        raise ParameterError(f"--seeds must be whole numbers, e.g. --seeds 0,1,2; got {','.join(a.seeds)}") from None
    if min(seeds, default=0) < 0:
        raise ParameterError(f"--seeds must be at least 0, got {','.join(a.seeds)}; e.g. --seeds 0,1,2")
    report = sweep.sweep(a.models, a.corpora, seeds, a.chapters, parse_params(a.param), a.scheduler, a.workers)
    print(report.summary())
    return 1 if report.failed else 0


def _finetune_main(a) -> int:
    from .models.finetune import Settings, finetune, init_random

    check_options(a)
    if a.cmd == "finetune":
        prov = finetune(a.task, a.out, a.base, Settings(epochs=a.epochs, seed=a.seed))
        r = prov["held_out"]
        print(
            f"{a.task}: held-out accuracy {r['accuracy']:.3f} (95% interval {r['ci95'][0]:.3f} to "
            f"{r['ci95'][1]:.3f}; majority class {r['majority_rate']:.3f}) on {r['n']} examples, "
            f"{prov['steps']} steps in {prov['seconds']:.0f} s"
        )
    else:
        prov = init_random(a.like, a.seed, a.out)
        print(f"random initialisation like {prov['like']['name']}, seed {prov['seed']}")
    done = "already there, nothing to do" if prov.get("already_there") else "saved"
    print(f"model {done}: {prov['folder']}")
    return 0


def _compare_main(a) -> int:
    from .runs.compare import compare_folders

    check_options(a)
    try:
        result = compare_folders(a.old, a.new, rtol=a.rtol, atol=a.atol)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(result.report())
    return 0 if result.identical else 1


# Each command's module does the work (the chapter contract, the book build, the sweep, fine-tuning, the
# comparison); here only its arguments are read and its errors reported.
COMMANDS = {
    "book": _chapters_main,
    "run": _chapters_main,
    "sweep": _sweep_main,
    "hta": _sweep_main,
    "record-c10": _sweep_main,
    "record-compare": _sweep_main,
    "record-confirm": _sweep_main,
    "record-measures": _sweep_main,
    "record-family": _sweep_main,
    "finetune": _finetune_main,
    "init-random": _finetune_main,
    "compare": _compare_main,
    "pretrain": _pretrain_main,
    "resplit": _resplit_main,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="identifiability", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # "unrecognized arguments" (an option no command takes) is raised by this parser: one line too
    ap.error = lambda message: ap.exit(2, f"error: identifiability: {message} (see identifiability --help)\n")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _chapter_parsers(sub)
    _sweep_parsers(sub)
    _finetune_parsers(sub)
    _compare_parser(sub)
    _record_compare_parser(sub)
    _record_confirm_parser(sub)
    _record_measures_parser(sub)
    _record_family_parser(sub)
    _pretrain_parser(sub)
    _resplit_parser(sub)
    a = ap.parse_args(argv)
    try:
        # Ctrl-C: one line, exit 130 (identifiability.base.stops); a caller that passes its own argv handles it itself
        resumes = a.cmd in ("sweep", "hta", "record-c10", "pretrain", "resplit")
        status = stops.run(lambda: COMMANDS[a.cmd](a), resumes=resumes, handle=argv is None)
        sys.stdout.flush()  # here, not at exit: a pipe's reader that left is then caught below
        return status
    except BrokenPipeError:
        if not stops.stdout_closed():
            raise
        return stops.EXIT_BROKEN_PIPE  # `identifiability compare ... | head`: the reader has all it wanted
    except ChapterFailed as e:  # what earlier chapters wrote stays where it is
        print(f"error: {e}", file=sys.stderr)
        return 1
    except UserError as e:  # each one line that says what to do
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
