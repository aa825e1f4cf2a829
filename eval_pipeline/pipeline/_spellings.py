"""How the user spells each model, kept in the store for what reads it without the suite (the viewer)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from eval_pipeline.store import StateFolder, fetch, write_rows

__all__ = ["store_spellings"]


def store_spellings(
    layout: StateFolder, models: Iterable[str], label: Callable[[str], str]
) -> None:
    """Keep each model's spelling (`label`) in `model_spellings` where it differs from the one
    stored last, or, with none stored, from the model id: an unchanged evaluation writes
    nothing, and a spelling the user dropped is replaced by the id."""
    wanted = {model: label(model) for model in models}
    _, rows = fetch(
        layout,
        "SELECT model, spelling FROM model_spellings_latest WHERE list_contains(?, model)",
        [list(wanted)],
    )
    stored = {model: spelling for model, spelling in rows}
    changed = [
        {"model": model, "spelling": spelling}
        for model, spelling in wanted.items()
        if spelling != stored.get(model, model)
    ]
    if changed:
        write_rows(layout, "model_spellings", changed)
