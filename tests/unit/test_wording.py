"""The page scan of issue 53 on a stand-in page: registry keys, member folders and results keys where a reader
reads (not in code cells, code spans or outputs' code blocks), and words set as math (symbols allowed)."""

from identifiability.book.wording import code_in_prose, registry_keys, words_as_math

PAGE = """<html><body><article>
<div class="cell_input"><pre>measures = "norm_resln,globenc"  # a parameters cell: typed, allowed</pre></div>
<p><strong>C24.</strong> The claim ... <em>Why:</em> globenc: tracks at layers 1, 2; GlobEnc is the name;
<code>grad_input</code> is typed; mlm-w128-dv32-seed0-init trained; lp_tv_mean 0.3; d_s and d_v are notation.</p>
<p><span class="math notranslate nohighlight">\\(norm_{\\mathrm{resln}}\\)</span>@rolled,
<span class="math notranslate nohighlight">\\(\\dim \\mathrm{LN}([T,1]) \\geq 1\\)</span>,
<span class="math notranslate nohighlight">\\(A_{\\mathrm{eff}}\\)</span>,
<span class="math notranslate nohighlight">\\(\\operatorname{rank}(T) = \\min(d_s, d_v)\\)</span>,
<div class="math notranslate nohighlight">\\[A = \\left[\\begin{matrix}1 & 2\\end{matrix}\\right]\\]</div></p>
</article></body></html>"""


def test_the_scan_finds_keys_members_and_results_keys_outside_code():
    found = code_in_prose(PAGE, registry_keys())
    assert found == ["lp_tv_mean", "mlm-w128-dv32-seed0-init", "globenc"]  # not GlobEnc, grad_input, d_s
    assert "norm_resln@rolled" in registry_keys() and "raw" not in registry_keys()


def test_the_scan_finds_words_set_as_math_and_leaves_symbols_alone():
    assert words_as_math(PAGE) == [r"norm_{\mathrm{resln}}"]
    assert words_as_math('<span class="math">\\(globenc + \\mathrm{LN}\\)</span>') == [r"globenc + \mathrm{LN}"]
    assert words_as_math('<span class="math">\\(\\dim LN\\)</span>', frozenset()) == []  # two letters: a symbol
