"""Each family's config section reaches training field by field: every field of the section has a
reader (the network, the recipe, the number of seeds or the starting weights), every `Recipe`
field a source (no default a config could miss), a recipe field named like a section field
follows it, and a checkpoint's recipe reads back as it was trained, written before a field existed
or not."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import FEAT

from tpurank.core.collections import KINDS
from tpurank.core.config import Config, config_fields
from tpurank.core.config_build import from_dict
from tpurank.core.declared import starting_points
from tpurank.gnn.families import baseline
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.recipe import ModelSpec, Recipe

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py

SPECS = [gnn_model.SPEC, baseline.SPEC]
COLLECTION_OF = {"layout": "layout:xla:random", "tile": "tile:xla"}
# recipe fields fed by a section field of another name: the user's key stays as the config names it
RENAMED = {"gnn": {"clip_norm": "grad_clip"}, "baseline": {}}


class Reads:
    """A config section that records each field read of it."""

    def __init__(self, section: Any) -> None:
        self.section = section
        self.names: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.names.add(name)
        return getattr(self.section, name)


def fields_read(spec: ModelSpec, section: Any) -> tuple[set[str], set[str]]:
    """The fields of the family's `section` that building its network and recipe (for each kind),
    counting its seeds and finding its starting weights read; and all the section's fields."""
    reads = Reads(section)
    cfg = SimpleNamespace(**{spec.section: reads}, collections={})  # {}: the overrides applied
    for kind in KINDS:
        spec.new_network(cfg, kind, FEAT)
        spec.recipe(cfg, kind)
        starting_points(cfg, spec.section, [COLLECTION_OF[kind]])
    spec.seeds(cfg)
    return reads.names, {f.name for f in dataclasses.fields(section)}


def small_section(spec: ModelSpec) -> Any:
    return spec.settings(from_dict({spec.section: {"hidden": 16}}))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_field_of_a_family_section_has_a_reader(spec: ModelSpec) -> None:
    read, fields = fields_read(spec, small_section(spec))
    assert len(fields) > 10
    assert sorted(fields - read) == []


def test_a_field_added_to_the_section_and_read_by_nothing_is_found() -> None:
    """The check above is not vacuous: a section with one field its readers do not read fails it."""
    section = small_section(gnn_model.SPEC)
    extended = dataclasses.make_dataclass("Extended", [("unread_setting", int, 1)], bases=(type(section),))
    read, fields = fields_read(gnn_model.SPEC, extended(**dataclasses.asdict(section)))
    assert fields - read == {"unread_setting"}


def test_a_recipe_has_no_defaults_so_each_family_names_every_field() -> None:
    """A field with a default could be missed by a family's `section_recipe` and train with it."""
    for f in dataclasses.fields(Recipe):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name
    with pytest.raises(TypeError, match="missing 1 required"):
        Recipe(
            **{
                k: v
                for k, v in dataclasses.asdict(gnn_model.SPEC.recipe(Config(), "tile")).items()
                if k != "lr"
            }
        )


def other_value(spec: ModelSpec, name: str, value: object) -> object:
    """A valid value of the section field `name` unlike `value`."""
    choices = config_fields().get(f"{spec.section}.{name}").metadata.get("choices")
    if choices:
        return next(c for c in choices if c != value and c != "auto")
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return 0.5 if value != 0.5 else 0.25
    assert isinstance(value, int), name
    return value * 2 if value else 7


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("kind", KINDS)
def test_a_recipe_field_named_like_a_section_field_follows_it(spec: ModelSpec, kind: str) -> None:
    section = spec.settings(Config())
    renamed = RENAMED[spec.section]
    sources = {f.name: renamed.get(f.name, f.name) for f in dataclasses.fields(Recipe)}
    followed = {field: source for field, source in sources.items() if hasattr(section, source)}
    assert len(followed) > 10 and "clip_norm" in followed
    for field, source in followed.items():
        if kind == "tile" and field == "configs_per_graph" and getattr(section, "tile_all_configs", False):
            continue  # gnn.tile_all_configs: every config of a tile graph
        changed = other_value(spec, source, getattr(section, source))
        recipe = spec.recipe(from_dict({spec.section: {source: changed}}), kind)
        assert getattr(recipe, field) == changed, (field, source)


def test_a_saved_recipe_reads_back_whole() -> None:
    for spec in SPECS:
        for kind in KINDS:
            r = spec.recipe(Config(), kind)
            assert Recipe.from_saved(dataclasses.asdict(r)) == r
    with pytest.raises(TypeError, match="unexpected keyword argument 'final_lr'"):
        Recipe.from_saved({**dataclasses.asdict(gnn_model.SPEC.recipe(Config(), "tile")), "final_lr": 0.0})


def test_a_recipe_saved_before_the_fields_added_later_reads_back_as_it_trained() -> None:
    """A checkpoint written before warm-up, GST, the node budget and the rest existed trained
    without them: each reads back off (`ADDED_LATER`), the fields it holds as it holds them."""
    r = gnn_model.SPEC.recipe(from_dict({"gnn": {"lr": 0.02, "grad_clip": 0.5}}), "layout")
    old = {k: v for k, v in dataclasses.asdict(r).items() if k not in Recipe.ADDED_LATER}
    assert set(Recipe.ADDED_LATER) < {f.name for f in dataclasses.fields(Recipe)}
    assert len(old) == len(dataclasses.fields(Recipe)) - len(Recipe.ADDED_LATER)
    back = Recipe.from_saved(old)
    assert (back.lr, back.clip_norm, back.loss) == (0.02, 0.5, "listmle")
    assert {k: getattr(back, k) for k in Recipe.ADDED_LATER} == Recipe.ADDED_LATER
    assert (back.segment_nodes, back.warmup_steps, back.max_batch_nodes, back.dim_features) == (
        0,
        0,
        0,
        False,
    )
    with pytest.raises(TypeError, match="missing 1 required"):
        Recipe.from_saved({k: v for k, v in old.items() if k != "margin"})  # there from the start
