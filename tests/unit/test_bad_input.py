"""Bad or unusual input, as a careful new user would try it: each case gets its exit code and one line that
names the fix, stops before any chapter executes when the pre-flight step can tell, writes nothing and
overwrites nothing, and never lets two different models or two texts share a cache entry or a results
folder."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from identifiability import cli
from identifiability.base import paths
from identifiability.base.fileio import write_json
from identifiability.chapters.contract import CHAPTERS, coerce_parameters
from identifiability.chapters.parameters import ALLOWED, Allowed, declared_parameters
from identifiability.models import keys
from identifiability.models.fingerprint import ModelNotAvailable
from identifiability.models.load import load_model, random_model

from .failing_disk import refuse_new_files

NB = paths.source_root() / "notebooks"


@pytest.fixture(autouse=True)
def data_folder(tmp_path, monkeypatch):
    """Every test writes results and caches into its own data folder."""
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


def _save(lm, folder: Path, sharded: bool = False, tokenizer: bool = True) -> Path:
    lm.model.save_pretrained(folder, safe_serialization=True, **({"max_shard_size": "2MB"} if sharded else {}))
    if tokenizer:
        lm.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """Two different tiny models saved sharded under the same base name, and one saved whole."""
    root = tmp_path_factory.mktemp("models")
    a = _save(random_model("bert", seed=0), root / "a" / "tiny", sharded=True)
    b = _save(random_model("bert", seed=1), root / "b" / "tiny", sharded=True)
    whole = _save(random_model("bert", seed=0), root / "whole" / "tiny")
    assert len(list(a.glob("model-*.safetensors"))) > 1 and not (a / "model.safetensors").exists()
    return a, b, whole


# --------------------------------------------------------------------------------------------------
# one identity per model: never a shared cache entry, never a shared results folder
# --------------------------------------------------------------------------------------------------


def test_two_sharded_models_of_one_name_never_share_caches_or_results(tiny_models, data_folder):
    from identifiability.identity import hidden_states

    a, b, whole = tiny_models
    la, lb, lw = load_model(str(a)), load_model(str(b)), load_model(str(whole))
    assert la.content_key != lb.content_key and la.key != lb.key
    assert la.key.startswith("tiny-") and keys.model_ref(str(a)).key == la.key
    assert keys.target(str(a), "lee").results_dir != keys.target(str(b), "lee").results_dir
    # same weights saved whole or sharded: the same tensors, but not the same files, hence another key
    assert lw.content_key not in (la.content_key, lb.content_key)
    texts = ["The cat sat on the mat.", "A new blaze near Goulburn has forced the closure of the highway."]
    ha, hb = hidden_states(la, texts, "lee", progress=False), hidden_states(lb, texts, "lee", progress=False)
    assert (ha.hidden - hb.hidden).abs().max() > 1e-3  # the second model was not served the first one's states
    cached = list((data_folder / "cache").rglob("*.safetensors"))
    assert len(cached) == 2


def test_a_folder_saved_again_with_new_weights_gets_a_new_key(tmp_path):
    folder = _save(random_model("bert", seed=0), tmp_path / "m")
    first = keys.model_ref(str(folder)).key
    _save(random_model("bert", seed=2), folder)
    assert keys.model_ref(str(folder)).key != first


# --------------------------------------------------------------------------------------------------
# the battery: exit code and one line naming the fix, through the command line
# --------------------------------------------------------------------------------------------------


def _folder_without(tmp_path: Path, tiny_models, *names: str) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_models[2], folder)
    for n in names:
        (folder / n).unlink(missing_ok=True)
    return folder


def _truncated(tmp_path, tiny_models):
    folder = _folder_without(tmp_path, tiny_models)
    w = folder / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100_000])
    return ["--model", str(folder)]


def _text(tmp_path, content: bytes):
    f = tmp_path / "text.txt"
    f.write_bytes(content)
    return ["--corpus", str(f)]


def _pickled(tmp_path, tiny_models):
    folder = _folder_without(tmp_path, tiny_models, "model.safetensors")
    (folder / "pytorch_model.bin").write_bytes(b"never opened: pickles can run code")
    return ["--model", str(folder)]


CASES = {
    "no config": (lambda t, m: ["--model", str(_folder_without(t, m, "config.json"))], 2, r"config\.json is missing"),
    "no tokenizer": (
        lambda t, m: [
            "--model",
            str(
                _folder_without(t, m, "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
            ),
        ],
        2,
        r"no tokenizer files .*save the tokenizer",
    ),
    "no weights, a pickle instead": (
        lambda t, m: _pickled(t, m),
        2,
        r"model\.safetensors is missing \(pytorch_model\.bin is there, but pickled weights are never opened",
    ),
    "truncated weights": (_truncated, 2, r"truncated or corrupt: 100000 bytes found, \d+ declared"),
    "empty folder": (lambda t, m: ["--model", str((t / "empty").mkdir() or t / "empty")], 2, r"is empty"),
    "missing folder": (lambda t, m: ["--model", str(t / "nowhere" / "model")], 2, r"does not exist"),
    "unsupported architecture": (
        lambda t, m: ["--model", str(_retype(_folder_without(t, m), "t5"))],
        2,
        r"no adapter for model_type 't5'",
    ),
    "config transformers rejects": (
        lambda t, m: ["--model", str(_configured(_folder_without(t, m), num_attention_heads="four"))],
        2,
        r"broken/config\.json is not a config transformers accepts: Validation error for field 'num_attention_heads': "
        r"TypeError: Field 'num_attention_heads' expected int, got str \(value: 'four'\); correct that file",
    ),
    "config with a dtype torch lacks": (
        lambda t, m: ["--model", str(_configured(_folder_without(t, m), dtype="float99"))],
        2,
        r"broken/config\.json is not a config transformers accepts: module 'torch' has no attribute 'float99'",
    ),
    "latin-1 text": (lambda t, m: _text(t, "Caf\xe9 au lait.\n".encode("latin-1")), 2, r"not UTF-8 .*iconv"),
    "binary text": (lambda t, m: _text(t, b"\x00\x01\x02binary\n"), 2, r"is a binary file"),
    "emoji-only text": (
        lambda t, m: _text(t, "😀😀\n\u200d\u200d\n🎉\n".encode()),
        2,
        r"corpus 'text.txt': 3 lines are only special or unknown tokens: check the tokenizer or the text$",
    ),
    "sentences too short for the window": (
        lambda t, m: _text(t, "😀😀\nA line.\n".encode()),
        2,
        r"no sentence of corpus 'text.txt' has 8 to 24 tokens \(its sentences have 5 to 5; 1 lines of only special "
        r"or unknown tokens left out\); widen the window with -p example_min_tokens",
    ),
    "typo in a parameter": (lambda t, m: ["-p", "n_sentnces=5"], 2, r"did you mean 'n_sentences'"),
    "wrong type": (lambda t, m: ["-p", "n_sentences=many"], 2, r"must be int"),
    "max_tokens=1": (lambda t, m: ["-p", "max_tokens=1"], 2, r"max_tokens=1 is too small: .* at least 8"),
}


def _configured(folder: Path, **fields) -> Path:
    """``folder`` with ``fields`` changed in its config.json, as a hand edit would."""
    import json

    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **fields}))
    return folder


def _retype(folder: Path, model_type: str) -> Path:
    from transformers import AutoConfig

    AutoConfig.for_model(model_type).save_pretrained(folder)  # a valid config of a family with no adapter
    return folder


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_stops_before_any_chapter(case, tmp_path, tiny_models, capsys):
    make, code, message = CASES[case]
    args = make(tmp_path, tiny_models)
    out = tmp_path / "executed"
    assert cli.main(["run", str(NB / "01_model_and_data.md"), "--out", str(out), *args]) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert re.search(message, err), err
    assert not out.exists() or not list(out.iterdir())  # nothing executed


@pytest.mark.parametrize(
    "chapter,params,message",
    [
        (
            "02_nonidentifiability",
            ["-p", "layer=3"],
            r"layer=3 is not a layer with attention in this model: use 1\.\.2 .*-p layer=1",
        ),
        ("02_nonidentifiability", ["-p", "layer=0"], r"layer=0 is not a layer .*\(0 is the embeddings; leave it unset"),
        ("02_nonidentifiability", ["-p", "layer=top"], r"parameter 'layer' of 02_nonidentifiability must be int"),
        ("02_nonidentifiability", ["-p", "head=9"], r"head=9 is not a head of this model: use 0\.\.3"),
        ("03_effective_attention", ["-p", "max_tokens=1"], r"at least 18 \(sentences longer than d_v\)"),
        ("06_context_mixing", ["-p", "max_tokens=1"], r"max_tokens=1 is too small"),
        ("04_token_identity", ["-p", "min_tokens=40", "-p", "max_tokens=60"], r"no sentence .* has 40 to 60 tokens"),
    ],
)
def test_parameters_are_checked_against_the_model_and_the_text(chapter, params, message, tmp_path, tiny_models, capsys):
    out = tmp_path / "executed"
    args = ["run", str(NB / f"{chapter}.md"), "--out", str(out), "--model", str(tiny_models[2]), *params]
    if chapter == "04_token_identity":
        args += _text(tmp_path, b"A short line.\nAnother short line here.\n")
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(message, err) and "\n" not in err, err
    assert not out.exists()


def test_results_files_are_readable_as_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json(tmp_path / "r.json", {"x": 1})
        from identifiability.base.results import cached_tensors

        cached_tensors("k", {"p": 1}, lambda: {"t": torch.zeros(2)}, root=tmp_path / "cache")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in (tmp_path / "cache").rglob("*.*"))


def test_lines_of_nothing_but_unknown_tokens_are_counted_and_left_out(tmp_path, tiny_lm):
    from identifiability.corpus.corpora import drop_unusable, load_corpus

    f = tmp_path / "mixed.txt"
    f.write_text("A plain sentence.\n😀😀\n\u200d\nAnother plain one.\n", encoding="utf-8")
    corpus, dropped = drop_unusable(load_corpus(str(f)), tiny_lm.tokenizer)
    assert dropped == 2 and corpus.sentences == ["A plain sentence.", "Another plain one."]


def test_load_model_names_the_damaged_file(tmp_path, tiny_models):
    folder = _folder_without(tmp_path, tiny_models)
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    with pytest.raises(ModelNotAvailable, match="model.safetensors is not a valid safetensors file"):
        load_model(str(folder))


# --------------------------------------------------------------------------------------------------
# every parameter checked before anything runs, and nothing written when a check fails
# --------------------------------------------------------------------------------------------------


def _files(*roots: Path) -> dict[Path, bytes]:
    """Every file under ``roots`` with its bytes: equal before and after means nothing was written."""
    return {f: f.read_bytes() for root in roots if root.exists() for f in sorted(root.rglob("*")) if f.is_file()}


@pytest.fixture
def earlier_results(data_folder, tiny_models) -> Path:
    """A results folder as an earlier run of chapters 1 and 2 on the tiny model and ``lee`` leaves it."""
    folder = keys.target(str(tiny_models[2]), "lee").results_dir
    for stem in ("01_model_and_data", "02_nonidentifiability"):
        write_json(folder / f"{stem}.json", {"chapter": stem, "results": {"from": "the earlier run"}})
    return folder


def _fails_writing_nothing(args: list[str], message: str, capsys, *watched: Path, code: int = 2) -> str:
    """``identifiability ARGS`` exits ``code`` with one line matching ``message`` and changes no file under
    ``watched`` (nor adds one)."""
    before = _files(*watched)
    assert cli.main(args) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert re.search(message, err), err
    assert _files(*watched) == before
    return err


# (chapter, parameter) for every number a chapter declares: each has its least value in the contract
NUMBERS = [
    (spec.stem, name, type(default))
    for spec in CHAPTERS.values()
    for name, default in declared_parameters(spec.source).items()
    if isinstance(default, int | float) and not isinstance(default, bool)
]


def test_every_number_a_chapter_declares_has_its_least_value_in_the_contract():
    assert len(NUMBERS) > 40
    missing = [(stem, name) for stem, name, _ in NUMBERS if ALLOWED.get(name, Allowed()).minimum is None]
    assert not missing, f"give these a minimum in parameters.ALLOWED: {missing}"
    for spec in CHAPTERS.values():  # every default passes its own check
        assert coerce_parameters(spec.source, declared_parameters(spec.source)) == declared_parameters(spec.source)


def test_chapter_6s_pre_flight_checks_the_shortest_length_the_chapter_uses():
    """The pre-flight's window for chapter 6's exact sentences starts where the chapter's own ``short``
    does: a chapter that changed its lower bound alone would pass a window it cannot fill."""
    from identifiability.chapters import contract as chapters

    source = CHAPTERS["06_context_mixing"].source.read_text(encoding="utf-8")
    assert f"short = ({chapters.EXACT_MIN_TOKENS}, exact_max_tokens)" in source


@pytest.mark.parametrize("stem,name,kind", NUMBERS, ids=[f"{s[:2]}-{n}" for s, n, _ in NUMBERS])
def test_a_number_below_its_least_value_stops_before_anything_runs(stem, name, kind, tmp_path, earlier_results, capsys):
    least = ALLOWED[name].minimum
    bad = kind(least) - 1
    out = tmp_path / "executed"
    _fails_writing_nothing(
        ["run", str(NB / f"{stem}.md"), "--out", str(out), "-p", f"{name}={bad}"],
        rf"^error: {stem}: {name}={bad} must be at least {least:g} \(.+\); pass e\.g\. -p {name}=",
        capsys,
        earlier_results.parent.parent,
    )
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "-3"])
def test_n_sentences_below_1_leaves_the_earlier_results_as_they_were(
    value, tmp_path, tiny_models, earlier_results, capsys
):
    for command in (
        ["run", str(NB / "01_model_and_data.md"), "--out", str(tmp_path / "executed"), "--model", str(tiny_models[2])],
        ["book", "--model", str(tiny_models[2]), "--only", "01"],
        ["sweep", "--models", str(tiny_models[2]), "--chapters", "01", "--workers", "1"],
    ):
        _fails_writing_nothing(
            [*command, "-p", f"n_sentences={value}"],
            rf"n_sentences={value} must be at least 1 \(a count\)",
            capsys,
            earlier_results.parent.parent.parent,  # the whole data folder: results, caches, sweeps
            tmp_path / "executed",
            keys.target(str(tiny_models[2]), "lee").build_dir,
        )


def _absent_cuda() -> str:
    return f"cuda:{torch.cuda.device_count()}"  # one past the last device: absent on every machine


@pytest.mark.parametrize(
    "stem,params,message",
    [
        ("01_model_and_data", ["device=banana"], r"device='banana' is not a device: use cpu, cuda, cuda:N or mps"),
        ("03_effective_attention", [f"device={_absent_cuda()}"], r"device='cuda:\d+' is not available here"),
        ("03_effective_attention", ["precision=float16"], r"precision='float16' must be one of float32, float64"),
        ("08_explore", ["hta_mode=fast"], r"hta_mode='fast' must be one of estimate, exact"),
        ("08_explore", ["sentence= "], r"sentence=' ' is empty"),
        ("02_nonidentifiability", ["lengths=abc"], r"lengths='abc' is not a list of lengths: length 'abc' is neither"),
        ("02_nonidentifiability", ["search_lengths=dv+x"], r"search_lengths='dv\+x' is not a list of lengths"),
        ("02_nonidentifiability", ["example_length=,"], r"example_length=',' gives no length"),
        ("06_context_mixing", ["exact_max_tokens=5"], r"exact_max_tokens=5 is too small: .*at least 6"),
        ("04_token_identity", ["second_corpus=nowhere"], r"second_corpus='nowhere': unknown corpus 'nowhere'"),
        ("09_across_models", ["judge_corpus=glue"], r"judge_corpus='glue': unknown corpus"),
        (
            "06_context_mixing",
            ["second_corpus=polarity", "max_tokens=4"],
            r"no sentence of corpus 'polarity' has 3 to 4 tokens",
        ),
    ],
)
def test_choices_devices_and_length_expressions_are_checked_first(
    stem, params, message, tmp_path, tiny_models, earlier_results, capsys
):
    out = tmp_path / "executed"
    args = ["run", str(NB / f"{stem}.md"), "--out", str(out), "--model", str(tiny_models[2])]
    for p in params:
        args += ["-p", p]
    if "max_tokens=4" in params:  # the run's own text has sentences of 3 or 4 tokens; the second corpus none
        args += _text(tmp_path, b"Yes.\nA longer line of text here.\n")
    _fails_writing_nothing(args, message, capsys, earlier_results.parent.parent)
    assert not out.exists()


def test_a_device_this_machine_has_passes():
    assert ALLOWED["device"].problem("cpu") is None
    assert ALLOWED["device"].problem(_absent_cuda())


def test_chapter_2_on_one_long_paragraph_says_to_split_it(tmp_path, tiny_models, earlier_results, capsys):
    from identifiability.corpus.corpora import load_corpus

    paragraph = tmp_path / "paragraph.txt"
    paragraph.write_text(" ".join(load_corpus("lee").sentences[:100]) + "\n", encoding="utf-8")
    out = tmp_path / "executed"
    args = ["run", str(NB / "02_nonidentifiability.md"), "--out", str(out), "--model", str(tiny_models[2])]
    _fails_writing_nothing(
        [*args, "--corpus", str(paragraph)],
        r"02_nonidentifiability: no sentence of corpus 'paragraph.txt' has 3 to 128 tokens \(its sentences have "
        r"2\d\d\d to 2\d\d\d\); put one sentence per line \(the model reads at most 128 tokens\)",
        capsys,
        earlier_results.parent.parent,
    )
    assert not out.exists()


def test_chapter_2_needs_text_enough_for_its_longest_joined_text(tmp_path, tiny_models, capsys):
    short = tmp_path / "short.txt"
    short.write_text("A first line of text.\nAnd a second one.\n", encoding="utf-8")
    out = tmp_path / "executed"
    args = ["run", str(NB / "02_nonidentifiability.md"), "--out", str(out), "--model", str(tiny_models[2])]
    _fails_writing_nothing(
        [*args, "--corpus", str(short)],
        r"the corpus has 15 tokens in all, fewer than the 128 of the longest text this chapter joins",
        capsys,
        tmp_path,
    )


def test_a_tokenizer_that_knows_no_word_is_named_before_chapter_2_runs(tmp_path, tiny_models, capsys):
    import json

    folder = _folder_without(tmp_path, tiny_models)
    tok = json.loads((folder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    tok["model"]["vocab"] = {t: i for t, i in vocab.items() if t.startswith("[") and t.endswith("]")}
    (folder / "tokenizer.json").write_text(json.dumps(tok))  # every word is now [UNK]
    out = tmp_path / "executed"
    _fails_writing_nothing(
        ["run", str(NB / "02_nonidentifiability.md"), "--out", str(out), "--model", str(folder)],
        r"02_nonidentifiability: corpus 'lee': \d+ lines are only special or unknown tokens: check the tokenizer "
        r"or the text$",
        capsys,
        tmp_path,
    )
    assert not out.exists()


# --------------------------------------------------------------------------------------------------
# nothing overwrites anything else
# --------------------------------------------------------------------------------------------------


def test_two_text_files_of_one_name_get_their_own_results_and_book(tmp_path, tiny_models, data_folder):
    from identifiability.book import notebook

    a, b, same = tmp_path / "a" / "sents.txt", tmp_path / "b" / "sents.txt", tmp_path / "c" / "sents.txt"
    for f, text in ((a, "The first file.\n"), (b, "Another file, other text.\n"), (same, "The first file.\n")):
        f.parent.mkdir()
        f.write_text(text, encoding="utf-8")
    model = str(tiny_models[2])
    assert keys.target(model, str(a)).results_dir != keys.target(model, str(b)).results_dir
    assert keys.target(model, str(a)).build_dir != keys.target(model, str(b)).build_dir
    assert keys.target(model, str(a)).results_dir == keys.target(model, str(same)).results_dir  # the content decides
    assert keys.corpus_ref(str(a)).key.startswith("sents-") and keys.corpus_ref("lee").key == "lee"
    saved = []
    for f in (a, b):
        ch = notebook.setup("01_model_and_data", model=model, corpus=str(f))
        ch.record(corpus_sentences=1)
        saved.append(ch.save())
    assert saved[0] != saved[1] and all(p.is_file() for p in saved)
    assert notebook.load_results(saved[0].parent, "01_model_and_data")["params"]["corpus"] == str(a)
    a.write_text("The first file, edited.\n", encoding="utf-8")
    assert keys.target(model, str(a)).results_dir != saved[0].parent  # an edited file is new text


def test_run_without_out_writes_per_model_and_corpus(tmp_path, tiny_models, monkeypatch):
    monkeypatch.setattr(paths, "build_root", lambda: tmp_path / "_build")
    folders = []
    monkeypatch.setattr(cli, "run_notebook", lambda nb, out, params, strict: folders.append(out) or out / nb.name)
    nb = str(NB / "01_model_and_data.md")
    for model, corpus in ((tiny_models[2], "lee"), (tiny_models[0], "lee"), (tiny_models[2], "polarity")):
        assert cli.main(["run", nb, "--model", str(model), "--corpus", corpus]) == 0
    assert cli.main(["run", nb]) == 0
    assert len(set(folders)) == 4 and folders[-1] == tmp_path / "_build" / "run"
    assert folders[0] == keys.target(str(tiny_models[2]), "lee").build_dir / "run"


@pytest.mark.parametrize(
    "line", ["||| the second half alone", "the first half alone |||", "one ||| two ||| three", " ||| "]
)
def test_a_pair_line_that_is_not_two_halves_is_refused_with_its_line_number(line, tmp_path, tiny_models, capsys):
    text = tmp_path / "pairs.txt"
    text.write_text(f"A first sentence. ||| Its second one.\n\nA plain sentence.\n{line}\n", encoding="utf-8")
    out = tmp_path / "executed"
    args = ["run", str(NB / "01_model_and_data.md"), "--out", str(out), "--model", str(tiny_models[2])]
    _fails_writing_nothing(
        [*args, "--corpus", str(text)],
        rf"pairs\.txt, line 4: {re.escape(repr(line.strip()))} is not a pair: write 'first sentence \|\|\| second "
        r"sentence'",
        capsys,
        tmp_path,
    )


def test_well_formed_pair_lines_are_pairs(tmp_path):
    from identifiability.corpus.corpora import PAIR_SEP, load_corpus, split_pair

    text = tmp_path / "pairs.txt"
    text.write_text("One. ||| Two.\nThree.|||Four.\nFive.\n", encoding="utf-8")
    corpus = load_corpus(str(text))
    assert corpus.sentences == [f"One.{PAIR_SEP}Two.", f"Three.{PAIR_SEP}Four.", "Five."]
    assert split_pair(corpus.sentences[1]) == ("Three.", "Four.")


def test_the_seed_spread_tells_a_book_run_from_a_sweep_run():
    import pandas as pd

    from identifiability.runs import aggregate

    def rows(source: str, n_sentences: int, estimate: float) -> list[dict]:
        doc = {
            "chapter": "03_effective_attention",
            "params": {"model": "m", "corpus": "lee", "seed": 0, "n_sentences": n_sentences},
            "provenance": {"key": "m", "content_key": "c"},
            "results": {"claims": {"C4": {"estimate": estimate, "ci95": [0.5, 0.9], "verdict": "holds"}}},
        }
        return aggregate.rows_of(doc, source, f"{source}/r")

    def spread(*parts: list[dict]) -> pd.DataFrame:
        table = pd.DataFrame([r for part in parts for r in part], columns=aggregate.COLUMNS)
        s = aggregate.seed_spread(table)
        return s[s.quantity == "C4"]

    other = spread(rows("book", 100, 0.7), rows("sweep", 150, 0.8))  # one seed, two parameter sets
    assert sorted(other.sources) == ["book", "sweep"] and set(other.seeds) == {1}
    assert other.set_index("sources")["mean"].to_dict() == {"book": 0.7, "sweep": 0.8}
    same = spread(rows("book", 100, 0.7), rows("sweep", 100, 0.7))  # one run, built twice: counted once
    assert list(same.sources) == ["book, sweep"] and list(same.seeds) == [1]


# --------------------------------------------------------------------------------------------------
# the other commands: 0 is a value, values below the least are one line, nothing written
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,message",
    [
        (["hta", "--n", "0"], r"--n must be at least 1, got 0; e\.g\. --n 1$"),
        (["hta", "--n", "-2"], r"--n must be at least 1, got -2"),
        (["hta", "--seed", "-1"], r"--seed must be at least 0, got -1"),
        (["hta", "--max-tokens", "0"], r"--max-tokens must be at least 1, got 0"),
        (["hta", "--group", "0"], r"--group must be at least 1, got 0"),
        (["hta", "--workers", "0"], r"--workers must be at least 1, got 0"),
        (["hta", "--max-tokens", "2"], r"hta: max_tokens=2 is too small"),
        (["hta", "--corpus", "nowhere"], r"unknown corpus 'nowhere'"),
        (["hta", "--model", "/nowhere/model"], r"does not exist"),
        (["record-c10", "--n", "0"], r"--n must be at least 1, got 0; e\.g\. --n 1$"),
        (["record-c10", "--seed", "-1"], r"--seed must be at least 0, got -1"),
        (["record-c10", "--workers", "0"], r"--workers must be at least 1, got 0"),
        (["sweep", "--seeds", "0,-1"], r"--seeds must be at least 0, got 0,-1"),
        (["sweep", "--workers", "0"], r"--workers must be at least 1, got 0"),
        (["sweep", "-p", "06:n_exact=0"], r"06_context_mixing: n_exact=0 must be at least 1"),
        (["sweep", "-p", "device=banana"], r"device='banana' is not a device"),
        (["finetune", "--task", "sentiment", "--epochs", "0"], r"--epochs must be at least 1, got 0"),
        (["finetune", "--task", "sentiment", "--seed", "-1"], r"--seed must be at least 0, got -1"),
        (["init-random", "--seed", "-1"], r"--seed must be at least 0, got -1"),
        (["book", "-p", "precision=float16", "--only", "03"], r"precision='float16' must be one of"),
        (["book", "-p", "device=banana"], r"device='banana' is not a device"),
    ],
)
def test_options_below_their_least_value_are_one_line_before_any_work(
    args, message, tmp_path, data_folder, monkeypatch, capsys
):
    monkeypatch.setattr(paths, "build_root", lambda: tmp_path / "_build")
    _fails_writing_nothing(args, message, capsys, data_folder, tmp_path)
    assert not data_folder.exists() and not (tmp_path / "_build").exists()


def test_hta_zero_is_a_value_not_a_default(tmp_path, tiny_models, data_folder, monkeypatch, capsys):
    """0 used to mean "not given" (50 sentences were computed for --n 0); now each 0 reaches the check."""
    from identifiability.runs import corpus_hta

    called = []
    monkeypatch.setattr(corpus_hta, "hta_job", lambda *a, **k: called.append(a) or {})
    for option in ("--n", "--max-tokens", "--group"):
        assert cli.main(["hta", "--model", str(tiny_models[2]), option, "0"]) == 2
        assert f"{option} must be at least 1, got 0" in capsys.readouterr().err
    assert not called


@pytest.mark.parametrize(
    "args,message",
    [
        (["hta", "--n", "abc"], r"^error: identifiability hta: argument --n: invalid int value: 'abc'"),
        (["finetune"], r"^error: identifiability finetune: the following arguments are required: --task"),
        (["sweep", "--workers", "2.5"], r"^error: identifiability sweep: argument --workers: invalid int value"),
        (["run"], r"^error: identifiability run: the following arguments are required: notebooks"),
        (["hta", "--out", "x"], r"^error: identifiability: unrecognized arguments: --out x"),
        ([], r"^error: identifiability: the following arguments are required: cmd"),
    ],
)
def test_an_option_argparse_refuses_is_one_line_too(args, message, tmp_path, data_folder, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(message, err) and err.endswith("--help)"), err
    assert not data_folder.exists()


# --------------------------------------------------------------------------------------------------
# the data folder takes a file, checked before anything runs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code,fix", [(errno.EROFS, "make it writable"), (errno.ENOSPC, "free space there")], ids=["read-only", "full"]
)
def test_a_data_folder_that_takes_no_file_is_one_line_before_anything_runs(
    code, fix, tmp_path, tiny_models, data_folder, monkeypatch, capsys
):
    data_folder.mkdir()
    ran = []
    monkeypatch.setattr(cli, "run_notebook", lambda *a, **k: ran.append(a))
    refuse_new_files(monkeypatch, data_folder, code)
    args = ["run", str(NB / "01_model_and_data.md"), "--out", str(tmp_path / "out"), "--model", str(tiny_models[2])]
    _fails_writing_nothing(
        args,
        rf"^error: the data folder {re.escape(str(data_folder))} cannot be written \({os.strerror(code)}\): "
        rf"{fix}, or set IDENTIFIABILITY_DATA to a folder that can be$",
        capsys,
        tmp_path,
    )
    assert not ran


def test_a_data_folder_below_a_file_is_one_line_before_any_sweep_or_hta_runs(tmp_path, monkeypatch, capsys):
    from identifiability.runs import corpus_hta, sweep

    (tmp_path / "a file").write_text("not a folder")
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "a file" / "data"))
    monkeypatch.setattr(corpus_hta, "hta_job", lambda *a, **k: pytest.fail("hta started"))
    monkeypatch.setattr(sweep.cluster, "connect", lambda *a, **k: pytest.fail("a cluster started"))
    for args in (["sweep", "--chapters", "01", "--workers", "1"], ["hta", "--workers", "1"]):
        _fails_writing_nothing(args, r"the data folder .*a file/data cannot be written \(Not a directory\)", capsys)


@pytest.mark.parametrize("command", ["init-random --like", "finetune --task lee-pairs --base"])
def test_a_config_transformers_rejects_is_one_line_for_the_model_commands_too(
    command, tmp_path, tiny_models, data_folder, capsys
):
    folder = _configured(_folder_without(tmp_path, tiny_models), num_hidden_layers="two")
    _fails_writing_nothing(
        [*command.split(), str(folder), "--out", str(tmp_path / "out")],
        r"broken/config\.json is not a config transformers accepts: .*'num_hidden_layers' expected int",
        capsys,
        tmp_path,
    )
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# the weights' tensor names against the config, from the files' headers, before any kernel starts
# --------------------------------------------------------------------------------------------------


def _edited_weights(tmp_path: Path, source: Path, edit) -> Path:
    """A copy of the model folder ``source`` whose weight files (every shard) went through ``edit``."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "edited"
    shutil.copytree(source, folder)
    for w in sorted(folder.glob("*.safetensors")):
        save_file(edit(load_file(w)), w, metadata={"format": "pt"})
    return folder


QUERY = "encoder.layer.0.attention.self.query.weight"


@pytest.mark.parametrize(
    "which,edit,message",
    [
        (
            "whole",
            lambda t: {(k.replace("query", "qeury") if k == QUERY else k): v for k, v in t.items()},
            rf"the weights in .*/edited lack 1 of the \d+ tensors of the bert encoder its config\.json describes "
            rf"\(e\.g\. {re.escape(QUERY)}, the weights have encoder\.layer\.0\.attention\.self\.qeury\.weight "
            r"instead\): pass the folder the model was saved to, or save it again with save_pretrained$",
        ),
        (
            "sharded",
            lambda t: {k: v for k, v in t.items() if not k.startswith("encoder.layer.1.output.")},
            r"the weights in .*/edited lack 4 of the \d+ tensors of the bert encoder .*\(e\.g\. "
            r"encoder\.layer\.1\.output\.LayerNorm\.bias\)",
        ),
    ],
)
def test_weights_that_lack_or_misname_an_encoder_tensor_stop_before_any_kernel(
    which, edit, message, tmp_path, tiny_models, monkeypatch, capsys
):
    folder = _edited_weights(tmp_path, tiny_models[2 if which == "whole" else 0], edit)
    ran = []
    monkeypatch.setattr(cli, "run_notebook", lambda *a, **k: ran.append(a))
    out = tmp_path / "executed"
    args = ["run", str(NB / "01_model_and_data.md"), "--out", str(out), "--model", str(folder)]
    _fails_writing_nothing(args, message, capsys, tmp_path)
    assert not ran and not out.exists()


def test_a_complete_folder_of_every_family_passes_the_tensor_check_saved_alone_or_with_a_head(tiny_any, tmp_path):
    """No false alarm: a base model's folder, and a task model's (prefixed names, a head) as a fine-tune saves."""
    from transformers import AutoModelForSequenceClassification

    from identifiability.models.fingerprint import check_encoder_tensors

    config = tiny_any.model.config
    tiny_any.model.save_pretrained(tmp_path / "base")
    AutoModelForSequenceClassification.from_config(config).save_pretrained(tmp_path / "task")
    for folder in (tmp_path / "base", tmp_path / "task"):
        check_encoder_tensors(folder, config)


def test_a_config_transformers_reads_but_builds_no_model_of_stops_before_any_kernel(
    tmp_path, tiny_models, monkeypatch, capsys
):
    import json

    folder = _configured(_folder_without(tmp_path, tiny_models), num_attention_heads=5)  # 5 does not divide 64
    config = json.loads((folder / "config.json").read_text())
    del config["embedding_size"]  # with it, BERT skips the check (the tiny models' config has one)
    (folder / "config.json").write_text(json.dumps(config))
    ran = []
    monkeypatch.setattr(cli, "run_notebook", lambda *a, **k: ran.append(a))
    args = ["run", str(NB / "01_model_and_data.md"), "--out", str(tmp_path / "executed"), "--model", str(folder)]
    _fails_writing_nothing(
        args,
        r"broken/config\.json describes no model transformers can build: The hidden size \(64\) is not a multiple of "
        r"the number of attention heads \(5\); correct that file",
        capsys,
        tmp_path,
    )
    assert not ran


def test_hta_n_above_the_sentences_in_the_window_is_refused_naming_them(tmp_path, data_folder, monkeypatch, capsys):
    """More than the corpus has would be computed as fewer, after a job of half an hour: refused instead."""
    from identifiability.runs import corpus_hta

    jobs = []
    done = {"sentences": 3, "cached_before": 0, "computed": 3, "seconds": 1.0}
    monkeypatch.setattr(corpus_hta, "hta_job", lambda *a, **k: jobs.append(a) or done)
    text = tmp_path / "three.txt"
    text.write_text("A short line.\nAnother line of text here.\nYes.\n", encoding="utf-8")  # 6, 8 and 4 tokens
    _fails_writing_nothing(
        ["hta", "--corpus", str(text), "--n", "4"],
        r"^error: hta: --n 4 is more than the 3 sentences of corpus 'three\.txt' with 3 to 64 tokens, which chapter 6 "
        r"samples from: pass --n 3 or fewer$",
        capsys,
        data_folder,
    )
    _fails_writing_nothing(
        ["hta", "--corpus", str(text), "--n", "3", "--max-tokens", "6"],
        r"--n 3 is more than the 2 sentences of corpus 'three\.txt' with 3 to 6 tokens",
        capsys,
        data_folder,
    )
    assert not jobs
    assert cli.main(["hta", "--corpus", str(text), "--n", "3"]) == 0 and len(jobs) == 1


@pytest.mark.parametrize(
    "make,why",
    [
        (lambda t: t / "notebooks" / "01_model_and_dat.md", "does not exist"),
        (lambda t: (t / "notebooks").mkdir() or t / "notebooks", "is a folder, not a notebook"),
        (lambda t: _file(t / "_toc.yml", "format: jb-book\n"), "is not a notebook"),
        (lambda t: _file(t / "notes.md", "# Notes\n\nNo code here.\n"), r"is not a chapter notebook \(no cell tagged"),
    ],
    ids=["missing", "folder", "not a notebook", "no parameters cell"],
)
def test_run_on_what_is_not_a_chapter_notebook_is_one_line_listing_the_chapters(make, why, tmp_path, capsys):
    source = make(tmp_path)
    out = tmp_path / "executed"
    err = _fails_writing_nothing(
        ["run", str(source), "--out", str(out)], rf"^error: {re.escape(str(source))} {why}", capsys
    )
    assert err.endswith(f"run a chapter, notebooks/<chapter>.md, one of {', '.join(CHAPTERS)}"), err
    assert not out.exists()


def _file(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
