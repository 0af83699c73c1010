from .background import chapter

BACKGROUND = (chapter("model_and_data"),)


def test_chapter_1_reports_the_corpus_and_a_traced_sentence(background):
    out = background.chapter("model_and_data")
    r = out["results"]
    assert out["provenance"]["sha256"].startswith("53aa5117")
    assert r["sampled"] == 40 and r["corpus_sentences"] > 2500
    assert 15 < r["mean_tokens"] < 50  # news sentences, special tokens included
    assert 0 < r["share_longer_than_d_head"] < 1
    assert r["example_tokens"][0] == "[CLS]" and r["example_tokens"][-1] == "[SEP]"
    assert r["example_row_sums_max_error"] < 1e-5
