"""The serving job a scenario describes: its ``inference:`` section, or the model of its
``training:`` section served with the defaults, and flags over either.

The one place a scenario turns into a served model and a
:class:`~fabricsim.workloads.serving.config.ServingConfig`, shared by ``fabricsim infer``,
``fabricsim validate`` and the web app's infer job, so each serves the same model.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 1}\\n"
...                         "training: {model: llama3-8b, layers: 16, tp: 8}\\n"
...                         "inference: {tp: 2}")
>>> m, cfg, notes = serving_job(sc)
>>> m.layers, cfg.tp, "tp" in notes[0]
(16, 2, True)
"""

from __future__ import annotations

from typing import Any

from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import (
    EXTRA_FIELDS,
    serving_from_section,
    training_from_section,
)
from fabricsim.workloads.models import MODEL_FIELDS, TransformerSpec, get_model
from fabricsim.workloads.serving.config import ServingConfig

__all__ = ["serving_job"]

#: The model served when a scenario names none anywhere.
DEFAULT_SERVED_MODEL = "llama3-70b"


def _training_model(section: dict[str, Any] | None, flag: str | None
                    ) -> tuple[TransformerSpec, list[str]]:
    """The model a ``training:`` section (shape overrides included) and ``--model``
    name, and a note naming the section's fields serving does not use."""
    data = dict(section or {})
    if flag is not None:
        data["model"] = flag
    elif not data.get("model") and not any(k in MODEL_FIELDS for k in data):
        data["model"] = DEFAULT_SERVED_MODEL
    m, cfg, extra = training_from_section(data)
    unused = sorted({*cfg.model_fields_set}
                    | {k for k, v in extra.items()
                       if v is not None and k in EXTRA_FIELDS and k != "model"}
                    | ({"from_megatron"} if "from_megatron" in data else set()))
    notes = [f"the scenario's training fields {', '.join(unused)} describe a training "
             f"run and are not used here: serving takes its layout from the inference: "
             f"section or --tp, --pp, --ep and --precision"] if unused else []
    return m, notes


def serving_job(sc: Scenario, flag_model: str | None = None,
                flags: dict[str, Any] | None = None
                ) -> tuple[TransformerSpec, ServingConfig, list[str]]:
    """The served model, its :class:`ServingConfig` and notes.

    The layout is the ``inference:`` section with ``flags`` (ServingConfig fields, e.g.
    ``fabricsim infer``'s) over it. The model is that section's when it names one (a
    preset and shape fields; ``flag_model`` replaces the preset, keeping the shape
    fields), else the ``training:`` section's (with ``flag_model`` likewise), else the
    default; the training section's fields that serving does not use are noted.
    """
    if flag_model is not None:
        get_model(flag_model, field="--model")  # an unknown name is the flag's error
    section = dict(sc.inference or {})
    flags = dict(flags or {})
    if "model" in section or any(k in MODEL_FIELDS for k in section):
        if flag_model is not None:
            section["model"] = flag_model
        m, cfg = serving_from_section({**section, **flags})
        return m, cfg, []
    base, notes = _training_model(sc.training, flag_model)
    m, cfg = serving_from_section({**section, **flags}, model=base)
    return m, cfg, notes
