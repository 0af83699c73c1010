"""Bad or unusual input, as a careful new user would try it: each case gets its exit code and one line that
names the fix, stops before any chapter executes when the pre-flight step can tell, and never lets two
different models share a cache entry or a results folder."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from identifiability import cli, keys, paths
from identifiability.fileio import write_json
from identifiability.fingerprint import ModelNotAvailable
from identifiability.models import load_model, random_model

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
    assert la.key.startswith("tiny-") and keys.model_key(str(a)) == la.key
    assert keys.results_dir(str(a), "lee") != keys.results_dir(str(b), "lee")
    # same weights saved whole or sharded: the same tensors, but not the same files, hence another key
    assert lw.content_key not in (la.content_key, lb.content_key)
    texts = ["The cat sat on the mat.", "A new blaze near Goulburn has forced the closure of the highway."]
    ha, hb = hidden_states(la, texts, "lee", progress=False), hidden_states(lb, texts, "lee", progress=False)
    assert (ha.hidden - hb.hidden).abs().max() > 1e-3  # the second model was not served the first one's states
    cached = list((data_folder / "cache").rglob("*.safetensors"))
    assert len(cached) == 2


def test_a_folder_saved_again_with_new_weights_gets_a_new_key(tmp_path):
    folder = _save(random_model("bert", seed=0), tmp_path / "m")
    first = keys.model_key(str(folder))
    _save(random_model("bert", seed=2), folder)
    assert keys.model_key(str(folder)) != first


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
    "latin-1 text": (lambda t, m: _text(t, "Caf\xe9 au lait.\n".encode("latin-1")), 2, r"not UTF-8 .*iconv"),
    "binary text": (lambda t, m: _text(t, b"\x00\x01\x02binary\n"), 2, r"is a binary file"),
    "emoji-only text": (
        lambda t, m: _text(t, "😀😀\n\u200d\u200d\n🎉\n".encode()),
        2,
        r"no sentence of corpus 'text.txt' has 8 to 24 tokens .*widen the window with -p example_min_tokens",
    ),
    "typo in a parameter": (lambda t, m: ["-p", "n_sentnces=5"], 2, r"did you mean 'n_sentences'"),
    "wrong type": (lambda t, m: ["-p", "n_sentences=many"], 2, r"must be int"),
    "max_tokens=1": (lambda t, m: ["-p", "max_tokens=1"], 2, r"max_tokens=1 is too small: .* at least 8"),
}


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


def test_a_failing_chapter_is_one_line_with_the_notebook_and_keeps_what_came_before(tmp_path, capsys):
    src = tmp_path / "99_failing.md"
    before = tmp_path / "before.json"
    src.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n  language: python\n---\n\n"
        "```{code-cell} ipython3\n:tags: [parameters]\n\nmodel = 'all-MiniLM-L6-v2'\ncorpus = 'lee'\n```\n\n"
        f"```{{code-cell}} ipython3\nopen({str(before)!r}, 'w').write('{{}}')\n```\n\n"
        "```{code-cell} ipython3\nraise ValueError('the corpus has no sentence of 9 tokens\\nsecond line')\n```\n"
    )
    out = tmp_path / "executed"
    assert cli.main(["run", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]  # above it: papermill's progress bar
    assert err.startswith("error: 99_failing stopped: ValueError: second line")
    assert str(out / "99_failing.ipynb") in err and (out / "99_failing.ipynb").is_file()
    assert before.is_file()  # what ran before the error stays


def test_results_files_are_readable_as_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json(tmp_path / "r.json", {"x": 1})
        from identifiability.results import cached_tensors

        cached_tensors("k", {"p": 1}, lambda: {"t": torch.zeros(2)}, root=tmp_path / "cache")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in (tmp_path / "cache").rglob("*.*"))


def test_lines_of_nothing_but_unknown_tokens_are_counted_and_left_out(tmp_path, tiny_lm):
    from identifiability.corpora import drop_unusable, load_corpus

    f = tmp_path / "mixed.txt"
    f.write_text("A plain sentence.\n😀😀\n\u200d\nAnother plain one.\n", encoding="utf-8")
    corpus, dropped = drop_unusable(load_corpus(str(f)), tiny_lm.tokenizer)
    assert dropped == 2 and corpus.sentences == ["A plain sentence.", "Another plain one."]


def test_load_model_names_the_damaged_file(tmp_path, tiny_models):
    folder = _folder_without(tmp_path, tiny_models)
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    with pytest.raises(ModelNotAvailable, match="model.safetensors is not a valid safetensors file"):
        load_model(str(folder))
