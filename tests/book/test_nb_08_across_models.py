"""Chapter 8 on the book's own results (one model): it says how to add models, judges C13 and C14 as not run
in this build (current and original rules, and every alternative) with the command that runs them, and shows
the default model's verdicts."""

from identifiability.verdicts.claims import load_claims, robustness_names


def test_across_models_page_on_one_model(chapter_run):
    for stem in ("03_effective_attention", "04_token_identity"):
        chapter_run(stem)
    out = chapter_run("08_across_models")
    r = out["results"]
    assert r["models"] == 1 and r["table_rows"] > 0
    assert r["fine_tuning_power"] == {}  # no fine-tune: no power to state
    claims = {c["id"]: c for c in load_claims()}
    for cid in ("C13", "C14"):
        v = r["claims"][cid]
        assert v["verdict"] == "not run in this build" and "make compare" in v["reason"]
        assert v["original"]["verdict"] == "not run in this build"
        assert [name for name, _ in v["robustness"]] == robustness_names(claims[cid])
        assert {label for _, label in v["robustness"]} == {"not run in this build"}
