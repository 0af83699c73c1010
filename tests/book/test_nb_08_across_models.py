"""Chapter 8 on the book's own results (one model): it says how to add models, judges C13 and C14 as not
testable with the reason, and shows the default model's verdicts."""


def test_across_models_page_on_one_model(chapter_run):
    for stem in ("03_effective_attention", "04_token_identity"):
        chapter_run(stem)
    out = chapter_run("08_across_models")
    r = out["results"]
    assert r["models"] == 1 and r["table_rows"] > 0
    for cid in ("C13", "C14"):
        v = r["claims"][cid]
        assert v["verdict"] == "not testable on this model" and "make compare" in v["reason"]
