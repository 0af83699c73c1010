"""The book's model (all-MiniLM-L6-v2: 12 heads of d_v = 32) re-split (issue 55): at its own width it is itself bit
for bit; at d_v = 16 and 128 every weight is kept and the function changes."""

from __future__ import annotations

import torch

from identifiability.models.resplit import resplit


def test_the_book_model_at_its_own_width_is_itself_and_at_16_and_128_keeps_its_weights(real_lm):
    model = real_lm.model
    enc = real_lm.tokenizer(["The cat sat on the mat.", "A second sentence."], return_tensors="pt", padding=True)
    with torch.no_grad():
        original = model(**enc, output_hidden_states=True).hidden_states
        same = resplit(model, real_lm.adapter, 32)(**enc, output_hidden_states=True).hidden_states
        assert all(torch.equal(a, b) for a, b in zip(original, same))
        for width in (16, 128):
            member = resplit(model, real_lm.adapter, width)
            assert member.config.num_attention_heads == 384 // width
            assert all(torch.equal(v, model.state_dict()[k]) for k, v in member.state_dict().items())
            last = member(**enc, output_hidden_states=True).hidden_states[-1]
            assert not torch.allclose(last, original[-1], atol=1e-3)
