"""Integration tier: the same checks on the real embedded model (all-MiniLM-L6-v2)."""

import torch

from identifiability.models import trace
from identifiability.models.load import EMBEDDED_SHA256


def test_real_model_loads_and_extracts(real_lm, sentences):
    assert real_lm.provenance["sha256"] == EMBEDDED_SHA256
    assert (real_lm.n_layers, real_lm.n_heads, real_lm.d_v) == (6, 12, 32)
    assert real_lm.provenance["rebuild_rel_error"] <= 1e-5
    tr = trace.trace_batch(real_lm, sentences[1:2])[0]
    enc = real_lm.tokenizer(sentences[1], return_tensors="pt")
    with torch.no_grad():
        out = real_lm.model(**enc, output_hidden_states=True, output_attentions=True)
    torch.testing.assert_close(tr.hidden[1:], torch.stack(out.hidden_states[1:], 0)[:, 0])
    torch.testing.assert_close(tr.attentions, torch.stack(out.attentions, 0)[:, 0])
