"""The three-view explorer: maps agree with the chapters' definitions, and the live panel reacts to typing."""

import torch

from identifiability.book import live_panel
from identifiability.studies.explore import sentence_views


def test_maps_have_the_documented_shapes_and_properties(tiny_any):
    text = "The cat sat on the mat because it was warm and the dog was not there at all today."
    views = sentence_views(tiny_any, text, hta_mode="exact")
    L, H, S = tiny_any.n_layers, tiny_any.n_heads, len(views.tokens)
    raw, eff, c = views.maps.values()
    assert raw.shape == eff.shape == (L, H, S, S) and c.shape == (L, S, S)
    torch.testing.assert_close(c.sum(-1), torch.ones(L, S), atol=1e-5, rtol=0)
    assert (c >= 0).all()
    # tiny heads have d_v = 16 < S, so effective attention differs from raw attention
    assert (raw - eff).abs().max() > 1e-4
    assert views.hta_rows_sum_to_one < 1e-5 and views.max_abs_raw_attention_A <= 1
    assert set(views.record()) == {
        "tokens",
        "max_abs_raw_attention_A",
        "max_abs_effective_attention",
        "max_abs_HTA_contribution_c",
        "hta_rows_sum_to_one",
    }


def test_panel_recomputes_when_the_reader_types(tiny_lm):
    panel = live_panel.sentence_panel(tiny_lm, "A short sentence.", hta_mode="estimate", probes=2)
    box, status, out = panel.children
    first = panel.chart.to_dict()
    assert status.value == ""
    box.value = "A different, somewhat longer sentence about the weather."
    second = panel.chart.to_dict()
    assert second != first and "weather" in str(second)
    box.value = "   "
    assert "type a sentence" in status.value and panel.chart.to_dict() == second
