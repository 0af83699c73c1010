"""Chapter 7's words (identifiability.text.head_width): each wording, from numbers on each side of the branch
that chooses it."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pandas as pd

from identifiability.base.stats import Interval
from identifiability.evidence.head_width import C20Comparison, C20Evidence, C20Pair, FamilyModel
from identifiability.studies.head_width import HeadOffset, HeadThreshold
from identifiability.text import head_width as prose
from identifiability.verdicts.core import Verdict

from .test_text import stand_ins_match


def _thr(name: str, d_v: int, share: float, alt: bool | None = True) -> NS:
    return NS(hw_model=name, hw_d_v=d_v, hw_unique_share=share, margins=pd.DataFrame({"x": range(40)}),
              hw_alternatives_at_dv2=alt)  # fmt: skip


def _model(name: str, twin: bool = False) -> FamilyModel:
    return FamilyModel(name, name.removesuffix("-init"), 32, 128, 4, 0, True, twin)


def _off(name: str, sub: float, val: float, entropy: float, twin: bool = False) -> NS:
    return NS(hw_model=name, hw_beyond_random=sub, hw_beyond_random_weights=val, hw_entropy=entropy,
              model=_model(name, twin))  # fmt: skip


def test_stand_ins_have_the_study_fields():
    assert stand_ins_match([(_thr("a", 16, 1.0), HeadThreshold), (_off("a", -0.1, -0.1, 2.0), HeadOffset)]) == []


def test_threshold_text_names_each_models_share_and_where_alternatives_appear():
    every = prose.threshold_text([_thr("a", 16, 1.0), _thr("b", 64, 0.975)])
    assert every == (
        "At d_s = d_v + 1 the (head, input) pairs with a single solution are: a (d_v = 16) 100% of 40; b (d_v = 64) "
        "97.5% of 40; every head admits alternatives at d_s = d_v + 2 on all 2 models."
    )
    some = prose.threshold_text([_thr("a", 16, 1.0, False), _thr("b", 64, 0.5), _thr("c", 32, 1.0, None)])
    assert some.endswith("on 1 of 3 models (not on a) (c: no input of d_v + 2 tokens).")
    assert prose.threshold_text([]) == "No model of the family was measured at its threshold."


SEED = Interval(0.01, 0.0, 0.03, 40, "inputs")


def _c20(seed: Interval | None = SEED, twins: bool = True) -> C20Evidence:
    a, b = "mlm-w128-dv16-seed0", "mlm-w128-dv64-seed0"
    iv = Interval(-0.2, -0.25, -0.15, 40, "inputs")
    c = C20Comparison(
        (a, b), (1.125, 4.0), 6, {a: iv, b: Interval(-0.1, -0.15, -0.05, 40, "inputs")},
        (C20Pair(a, b, Interval(-0.1, -0.12, -0.08, 40, "inputs")),),
        (C20Pair(a + "-init", b + "-init", Interval(0.002, -0.01, 0.01, 40, "inputs")),) if twins else (),
        seed, ("mlm-w128-dv32-seed0", "mlm-w128-dv32-seed1") if seed else (),
    )  # fmt: skip
    return C20Evidence((), c)


def test_offset_text_states_the_range_the_members_the_twins_and_the_seeds():
    text = prose.offset_text(_c20())
    assert text.startswith("On d_s / d_v from 1.12 to 4.00 (6 input lengths or more per member)")
    # members in words, never by their folders
    assert "is the head-width-16 member -0.200; the head-width-64 member -0.100;" in text and "mlm-" not in text
    big = "largest difference between members is -0.100 (the head-width-16 member minus the head-width-64 member)"
    assert big in text
    assert ", between their untrained twins 0.00200;" in text
    assert text.endswith("seeds of the head-width-32 member it is 0.0100 (95% interval 0 to 0.0300, 40 inputs).")
    alone = prose.offset_text(_c20(seed=None, twins=False))
    assert "untrained twins" not in alone and alone.endswith("no seed-to-seed difference.")
    one = C20Evidence((), C20Comparison(("a",), (1.1, 4.0), 6, {}, (), (), None))
    assert prose.offset_text(one) == "Fewer than two members of one width were trained enough to compare."


def test_learned_text_sets_the_members_beside_their_twins():
    members = [_off("m16", -0.2, -0.15, 1.234), _off("m64", -0.1, -0.05, 2.5)]
    text = prose.learned_text([*members, _off("m16-init", 0.001, 0.0, 3.3, twin=True)])
    assert text == (
        "Over the inputs with d_s >= d_v + 2, the pre-trained members give m16 D_sub -0.200, D_val -0.150, "
        "entropy 1.23 nats; m64 D_sub -0.100, D_val -0.0500, entropy 2.50 nats; their untrained twins give "
        "m16-init D_sub 0.00100, D_val 0, entropy 3.30 nats."
    )
    assert prose.learned_text(members).endswith("entropy 2.50 nats; no untrained twin was measured.")
    assert prose.learned_text([_off("t", 0.0, 0.0, 3.0, twin=True)]) == "No pre-trained member was measured."


def test_family_text_names_each_model_and_says_when_there_is_none():
    assert "`make family`" in prose.family_text([]) and "*not run*" in prose.family_text([])
    shown = prose.family_text([], recorded=True)
    assert "the recorded run's" in shown and "not run" not in shown
    low = FamilyModel("m", "m", 32, 128, 4, 1, False, False, -0.003)
    text = prose.family_text([_model("a"), low, _model("a-init", twin=True)])
    assert text == (
        "This build measures 2 pre-trained member(s): a (d_v = 32: 4 heads of width 128, seed 0; trained enough); "
        "m (d_v = 32: 4 heads of width 128, seed 1; undertrained: reported, not judged, -0.3 points over the "
        "unigram baseline); and 1 untrained twin(s): a-init."
    )


def test_training_text_names_each_member_from_twin_to_last_checkpoint():
    import pandas as pd

    t = pd.DataFrame(
        [
            dict(member="m16", d_v=16, tokens_seen=0, d_sub=0.1, cls=1.0, sep=1.0),
            dict(member="m16", d_v=16, tokens_seen=6_000_000, d_sub=-0.2, cls=3.5, sep=0.8),
        ]
    )
    said = prose.training_text(t)
    assert "m16 (d_v = 16): D_sub 0.100 untrained, -0.200 after 6.00 million tokens" in said
    assert "[CLS] 1.00 → 3.50" in said
    assert prose.training_text(pd.DataFrame()) == "No member's checkpoints were measured."


def test_the_claims_table_has_a_column_per_member_and_brackets_an_undertrained_members_verdicts():
    from identifiability.recorded.family import claims_across

    from .test_record_family import _members

    md = prose.claims_across_markdown(claims_across(_members()))
    head, rule, c4, c6 = md.splitlines()
    assert head == "| claim | d_v = 16 | d_v = 64 | d_v = 32 (width 64, undertrained, not judged) |"
    assert rule == "|---|---|---|---|"
    assert c4 == "| C4 | **fails** -0.500; twin: holds | — | — |"
    assert c6 == "| C6 | **holds** 0.800 | **holds** 0.900 | (holds 1.00) |"
    assert "`make family`" in prose.claims_across_markdown(claims_across({}))


def test_the_across_text_says_what_moves_with_d_v_what_training_makes_and_leaves_the_undertrained_out():
    from identifiability.recorded.family import claims_across

    from .test_record_family import _members

    runs = _members()
    text = prose.across_text(claims_across(runs))
    assert text.startswith("On the 2 members trained enough to judge, the same verdict whatever d_v: C4 (fails)")
    assert "C6 (holds)" in text and "differs between members" not in text  # the undertrained one is left out
    assert text.endswith("The untrained twin's verdict differs from the trained member's on C4 (what training makes).")
    runs["mlm-w128-dv64-seed0"]["chapters"]["04"]["claims"]["C6"]["verdict"] = "fails"
    moved = prose.across_text(claims_across(runs))
    assert "a verdict that differs between members: C6 (d_v = 16: holds; d_v = 64: fails)" in moved
    assert "the same verdict whatever d_v: C4 (fails)" in moved
    assert prose.across_text(claims_across({})) == ""
    runs["mlm-w128-dv16-seed0"]["chapters"]["04"]["claims"]["C6"]["verdict"] = "not testable on this model"
    apart = prose.across_text(claims_across(runs))
    assert "C6 (fails)" in apart and "Not judged on the family" not in apart  # d_v = 64 still judged C6
    runs["mlm-w128-dv64-seed0"]["chapters"]["04"]["claims"]["C6"]["verdict"] = "not run in this build"
    none = prose.across_text(claims_across(runs))
    assert "Not judged on the family (not run or not testable there): C6." in none and "C6 (" not in none


def _part(model: str, d_sub: float | None) -> Verdict:
    return Verdict(f"C21.{model}", "fails", d_sub, None, None, "", "rule", "reason")


def test_twin_shift_text_pairs_each_member_with_its_twin_and_names_the_direction():
    down = prose.twin_shift_text([_part("a", 0.15), _part("b", 0.1), _part("a-init", 0.3), _part("b-init", 0.2)])
    assert "(a 0.300 → 0.150; b 0.200 → 0.100): down on every member; the trained D_sub is above 0 on every" in down
    up = prose.twin_shift_text([_part("a", -0.1), _part("a-init", -0.2)])
    assert "up on every member" in up and "below 0 on every member" in up
    mixed = prose.twin_shift_text([_part("a", -0.1), _part("a-init", 0.2), _part("b", 0.3), _part("b-init", 0.2)])
    assert "down on 1 of 2" in mixed and "below 0 on 1 of 2 members" in mixed


def test_twin_shift_text_is_empty_without_a_pair():
    assert prose.twin_shift_text([_part("a", 0.1), _part("b-init", 0.2)]) == ""
    assert prose.twin_shift_text([_part("a", None), _part("a-init", 0.2)]) == ""
    assert prose.twin_shift_text([Verdict("C21", "fails", 0.1, None, None, "", "r", "x")]) == ""


def test_pretraining_note_sums_the_members_minutes():
    members = {"a": {"provenance": {"minutes": 31.0, "device": "cpu"}}, "b": {"provenance": {"minutes": 94.0}},
               "c": {"provenance": {}}, "d": {}}  # fmt: skip
    assert prose.pretraining_note(members) == (
        "; pre-training, not in that time: 2 members, 31.0 to 94.0 minutes each on ?, cpu (125 minutes in all)"
    )
    assert prose.pretraining_note({"a": {"provenance": {"minutes": 30.0, "device": "cpu"}}}) == (
        "; pre-training, not in that time: 1 member, 30.0 minutes on cpu (30.0 minutes in all)"
    )
    assert prose.pretraining_note({"c": {}}) == ""


def test_the_retraining_is_said_with_both_trainings_verdicts_and_the_seed_bound():
    """Issue 54 item 7: chapter 7 says the family was retrained after its first verdicts were seen, shows the
    first training's verdicts beside the current ones, and that C20's bound rests on one pair of seeds."""
    from identifiability.recorded.family import first_training
    from identifiability.text.head_width import retraining_text
    from identifiability.verdicts import FAILS, INCONCLUSIVE, Verdict

    first = first_training()
    assert first is not None and set(first["claims"]) == {"C19", "C20", "C21"}
    now = [
        Verdict("C20", INCONCLUSIVE, 0.055, None, None, "", "rule", "why", threshold=0.0457),
        Verdict("C21", FAILS, 0.186, (0.16, 0.21), None, "", "rule", "why"),
    ]
    text = retraining_text(first, now)
    assert "trained again without that dropout" in text
    assert "| C20 | fails (0.0548) | inconclusive (0.0550) |" in text
    assert "one pair of seeds" in text and "0.0257" in text and "0.0457" in text


def test_every_text_function_of_chapter_7_says_members_in_words():
    """A member's folder name is what a reader types: every public function here passes its text through
    display_names (pretrain.family), so a page never shows 'mlm-w128-dv32-seed0' where it reads."""
    import inspect

    public = [f for n, f in inspect.getmembers(prose, inspect.isfunction) if f.__module__ == prose.__name__]
    public = [f for f in public if not f.__name__.startswith("_")]
    assert public and all(getattr(f, "__wrapped__", None) for f in public), [
        f.__name__ for f in public if not getattr(f, "__wrapped__", None)
    ]
    said = prose.twin_shift_text([_part("mlm-w128-dv16-seed0", 0.15), _part("mlm-w128-dv16-seed0-init", 0.3)])
    assert "the head-width-16 member 0.300 → 0.150" in said and "mlm-" not in said
