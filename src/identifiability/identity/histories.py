"""What the probes' training histories say: the epoch a validation rate levels off, the training table of
every trained probe, and the validation-rate curves (chapter 4's training section and its recorded seeds)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .probes import TrainedProbes

LEVEL_TOL = 0.005  # a validation rate has levelled off once it stays within this of its last value


def levels_off(curve: Sequence[float], tol: float = LEVEL_TOL) -> int:
    """The first epoch from which every later value of ``curve`` (one per epoch, epoch 0 first) lies within
    ``tol`` of the last one: where a validation rate stops moving."""
    last = curve[-1]
    inside = [abs(v - last) <= tol for v in curve]
    return next(e for e in range(len(curve)) if all(inside[e:]))


def training_summary(probes: dict[str, TrainedProbes]) -> pd.DataFrame:
    """One row per trained probe: mapping, loss, layer, epochs run, best epoch, whether early stopping
    triggered, the epoch its validation rate levels off (:func:`levels_off`), best validation loss."""
    rows = []
    for tp in probes.values():
        h = tp.history
        if tp.kind == "naive":
            continue
        for p, (layer, loss) in enumerate(zip(tp.layers, tp.losses)):
            vl = [e[p] for e in h["val_loss"]]
            rates = [e[p] for e in h.get("val_rate", [])]
            rows.append(
                {
                    "mapping": tp.kind,
                    "loss": loss,
                    "layer": layer,
                    "epochs run": h["stop_epoch"][p],
                    "best epoch": h["best_epoch"][p],
                    "stopped early": tp.stopped_early(p),
                    "levels off": levels_off(rates) if rates else -1,
                    "best val loss": min(vl) if vl else float("nan"),
                    "final train loss": h["train_loss"][h["stop_epoch"][p] - 1][p] if h["train_loss"] else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def seed_training(runs: Sequence[TrainedProbes], seeds: Sequence[int]) -> dict:
    """The training table (:func:`training_summary`) of each run's probes (one run per training seed, of one
    mapping) with a ``seed`` column, as lists per column ({} without runs)."""
    frames = [training_summary({"run": tp}).assign(seed=s) for tp, s in zip(runs, seeds)]
    return pd.concat(frames, ignore_index=True).round(4).to_dict(orient="list") if frames else {}


def rate_curves(probes: dict[str, TrainedProbes]) -> pd.DataFrame:
    """The validation rate (cosine lookup among the sentence's tokens) of every trained probe after each
    epoch, epoch 0 being its initial weights: columns mapping, loss, layer, epoch, rate, stopped early."""
    rows = [
        {
            "mapping": tp.kind,
            "loss": loss,
            "layer": layer,
            "epoch": e,
            "rate": r[p],
            "stopped early": tp.stopped_early(p),
        }
        for tp in probes.values()
        if tp.kind != "naive"
        for p, (layer, loss) in enumerate(zip(tp.layers, tp.losses))
        for e, r in enumerate(tp.history.get("val_rate", [])[: tp.history["stop_epoch"][p] + 1])
    ]
    return pd.DataFrame(rows, columns=["mapping", "loss", "layer", "epoch", "rate", "stopped early"])
