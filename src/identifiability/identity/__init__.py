"""Token identity across layers (paper section 4, appendix B) and the angle-versus-magnitude ablations.

The question: given the hidden embedding e_i^l of token i at layer l, can we tell which input token it
came from? Token i is *identified* at layer l if the nearest neighbour of g^l(e_i^l) among a set of
candidate input embeddings is x_i (the embedding layer's output, position included). g^l is

* ``naive``: the identity map (nearest neighbour of e_i^l itself),
* ``linear``: an affine map R^d -> R^d,
* ``mlp``: a two-layer perceptron,

trained to minimise the L2 distance (``l2``) or the cosine distance (``cos``) between g^l(e_i^l) and x_i,
and evaluated with L2 or cosine nearest-neighbour lookup. Candidates are the input embeddings of the
same sentence (the paper's setting) or, stricter, of every token in the evaluation split.

Shapes: L = number of layers, so there are L+1 hidden states per token (``hidden[0]`` is x, the input to
the first layer; ``hidden[l]`` is layer l's output); N tokens in a corpus sample, d model width, P probes
trained side by side.

Everything that costs time is cached with :func:`identifiability.base.results.cached_tensors`: the hidden states
(one forward pass per model + corpus + sample) and the trained probe weights, so the two chapters that use
them (token identity; angle vs magnitude) share the work.

Modules (each imports only modules listed above it; none imports Altair: the charts are in
:mod:`identifiability.charts.token_identity`):

* :mod:`.hidden`: hidden states of a corpus sample, extracted once and cached;
* :mod:`.data`: splits by sentence and the input variants (raw, unit, norm, unit+norm);
* :mod:`.lookup`: nearest-neighbour lookups and chance levels (no probes involved);
* :mod:`.probes`: the maps g^l, trained side by side, their validation rate per epoch, and their cache;
* :mod:`.histories`: what the training histories say (levelling off, the training table, rate curves);
* :mod:`.evaluation`: identification rates, neighbours, generalisation across layers;
* :mod:`.geometry`: angle versus magnitude (ablations, norms, angles).

``from identifiability import identity as ident`` gives every public name below.
"""

from .data import VARIANTS, SplitData, make_split, make_splits, split_by_sentence, token_mask, unit_vectors
from .evaluation import (
    CANDIDATES,
    NEIGHBOUR_OFFSETS,
    change_by_sentence,
    correct_by_sentence,
    evaluate,
    evaluate_all,
    generalisation,
    last_layer,
    misses_elsewhere,
    nested,
    position_only_by_sentence,
    position_only_rows,
    predict,
    rate_of,
    rates_by_sentence,
    seed_shares,
    shuffled_label_rates,
    train_test_gap,
    uniform_misses,
    unseen_shares,
)
from .geometry import (
    QUANTILES,
    ablation_study,
    angle_summary,
    norm_histograms,
    norm_summary,
    random_scales,
    rescaled_rates,
)
from .hidden import CACHE_VERSION, HiddenStates, cache_params, extract_hidden, hidden_states
from .histories import LEVEL_TOL, levels_off, rate_curves, seed_training, training_summary
from .lookup import (
    LOOKUPS,
    SentenceLayout,
    chance_in_sentence,
    chance_in_set,
    nearest_in_sentence,
    nearest_in_set,
    offset_chance,
)
from .probes import (
    DEFAULT_LR,
    LOSSES,
    MAPPINGS,
    ProbeConfig,
    StackedProbe,
    TrainedProbes,
    apply_probes,
    data_key,
    fit_probes,
    probe_config,
    probe_losses,
    seeded_probes,
    train_all,
    train_probes,
)

__all__ = [
    # hidden
    "CACHE_VERSION",
    "HiddenStates",
    "cache_params",
    "extract_hidden",
    "hidden_states",
    # data
    "VARIANTS",
    "SplitData",
    "make_split",
    "make_splits",
    "split_by_sentence",
    "token_mask",
    "unit_vectors",
    # probes
    "DEFAULT_LR",
    "LEVEL_TOL",
    "LOSSES",
    "MAPPINGS",
    "ProbeConfig",
    "StackedProbe",
    "TrainedProbes",
    "apply_probes",
    "data_key",
    "fit_probes",
    "levels_off",
    "probe_config",
    "probe_losses",
    "rate_curves",
    "seed_training",
    "seeded_probes",
    "train_all",
    "train_probes",
    "training_summary",
    # lookup
    "LOOKUPS",
    "SentenceLayout",
    "chance_in_sentence",
    "chance_in_set",
    "nearest_in_sentence",
    "nearest_in_set",
    "offset_chance",
    # evaluation
    "change_by_sentence",
    "correct_by_sentence",
    "position_only_by_sentence",
    "position_only_rows",
    "rates_by_sentence",
    "rate_of",
    "seed_shares",
    "shuffled_label_rates",
    "unseen_shares",
    "misses_elsewhere",
    "last_layer",
    "train_test_gap",
    "uniform_misses",
    "CANDIDATES",
    "NEIGHBOUR_OFFSETS",
    "evaluate",
    "evaluate_all",
    "generalisation",
    "nested",
    "predict",
    # geometry
    "QUANTILES",
    "ablation_study",
    "angle_summary",
    "norm_histograms",
    "norm_summary",
    "random_scales",
    "rescaled_rates",
]
