"""Figures of docs/scale.md (and their echoes in README and docs/data.md): bench/runs/bench_scale.py's
all-five run at the CPU budget and its partial modes, and the speed of a scoring pass's attention
without a padding mask (bench/runs/bench_attention.py). The GPU profiles' PROJECTION: figures_gpu.py."""

from __future__ import annotations

from figure_kit import GB, Figure, Source, figure, gb, results, span, table
from step_names import (
    ENSEMBLE_AND_REPORT,
    FEATURES,
    PREDICT_GNN_VALID,
    PREPARE,
    TESTS,
    TRAIN_GNN,
    TRAIN_LGBM,
    VALID_OTHERS,
)

ALL5 = "scale_all.json"  # every step of `all` on the five full-scale synthetic collections, CPU budget
TWO = "scale.json"  # the same on tile:xla and layout:xla:random
LGBM_QUIET = "scale_lgbm_default_quiet.json"  # features + LightGBM at the default config, quiet
LGBM_LOADED = "scale_lgbm_default.json"  # the same, four collections, loaded
LGBM_NLP = "scale_lgbm_nlp_default.json"  # the same, layout:nlp:default alone
SYNTH_TREE = "synth_full_tree.json"  # bench_synth.py --tree: the full-scale tree's generation
ATTENTION = "attention.json"  # bench_attention.py: a scoring pass's attention with a mask and without
BUDGET = "budget.json"  # xla:random's training peak with its layers kept (xla-speed) or recomputed
REAL_NPZ_GB = 7  # the real dataset's npz, as its documentation gives it (no full real run here)
SHORT = {"tile:xla": "tile", "layout:xla:default": "xla:default", "layout:xla:random": "xla:random"}
SHORT |= {"layout:nlp:default": "nlp:default", "layout:nlp:random": "nlp:random"}


def stage(run: dict, name: str) -> dict:
    return next(s for s in run["stages"] if s["stage"] == name)


def layers_kept() -> tuple[Source, str, str]:
    """xla:random's training peak with its layers kept for the backward pass (bench_budget's
    `xla-speed` row) and recomputed (`before-speed`, run back to back with it)."""

    def picked(r: dict) -> bool:
        return r["row"] in ("xla-speed", "before-speed")

    runs = [r for r in results(BUDGET) if picked(r)]
    kept = span(r["train_peak_rss_gb"] for r in runs if r["row"] == "xla-speed")
    recomputed = span(r["train_peak_rss_gb"] for r in runs if r["row"] == "before-speed")
    return Source(BUDGET, records=picked), kept, recomputed


def gnn_slices(run: dict) -> list[float]:
    return [s["peak_rss"] / GB for s in run["gnn_slice"].values()]


def features_lgbm_s(run: dict) -> float:
    return stage(run, FEATURES)["seconds"] + stage(run, TRAIN_LGBM)["seconds"]


@figure("scale_where_it_stands")
def where_it_stands() -> Figure:
    r = results(ALL5)
    src, kept, recomputed = layers_kept()
    top = max(r["stages"], key=lambda s: s["peak_rss"])
    text = f"""
- The prepared cache is {r["cache"]["ratio"]:.3f}x the npz ({r["real_sample_cache"]["ratio"]:.3f}x on the real sample).
- `prepare` takes {stage(r, "prepare")["seconds"] / r["decompress"]["seconds"]:.2f}x the time of decompressing every input array once.
- Features + LightGBM take {features_lgbm_s(r) / 60:.1f} min; the steps of `all` {r["all_seconds"] / 60:.1f} min in total.
- No stage goes above {gb(top["peak_rss"], GB)} ({top["stage"]}); GNN training peaks at {gb(stage(r, TRAIN_GNN)["peak_rss"], GB)}.
- The `cpu` profile recomputes xla:random's layers in the backward pass, as this run did: kept, its
  training process peaks at {kept} GB, against {recomputed} GB when it recomputes them
  ([validation](evidence/validation.md#the-cpu-profiles-gnn-recipe-change-by-change)).
- Short GNN slices at width 64 and 64 configs per graph peak at {max(gnn_slices(r)):.2f} GB at most."""
    return Figure(text, (Source(ALL5), src))


@figure("scale_targets")
def targets() -> Figure:
    r, two = results(ALL5), results(TWO)
    rows = []
    for t in r["targets"]:
        if t["target"].startswith("GNN training"):
            continue
        measured = t["measured"]
        if t["target"].startswith("cache") and "full synthetic" in t["target"]:
            measured += f" ({gb(r['cache']['bytes'], GB)})"
        rows.append([t["target"], measured, "PASS" if t["pass"] else "FAIL"])
    gnn = [t for t in r["targets"] if t["target"].startswith("GNN training")]
    rows.insert(
        3,
        [
            "GNN training <= 4 GB peak RSS, each of the five collections, at width 64 and 64 configs per graph",
            f"{span(gnn_slices(r))} GB",
            "PASS" if all(t["pass"] for t in gnn) else "FAIL",
        ],
    )
    (last,) = [t for t in two["targets"] if t["target"].startswith("all --collections")]
    both = f"{last['measured']} for those two; {r['all_seconds'] / 60:.1f} min for all five"
    rows.append([last["target"], both, "PASS" if last["pass"] and r["submission_valid"] else "FAIL"])
    return Figure(table(["target", "measured", ""], rows), (Source(ALL5), Source(TWO)))


@figure("scale_all_dataset")
def all5_dataset() -> Figure:
    r = results(ALL5)
    c = r["counts"]
    text = (
        f"{r['dataset']['files']:,} files, {r['dataset']['npz_bytes'] / GB:.2f} GB of npz (the real data has "
        f"~{REAL_NPZ_GB} GB: the synthetic nlp collections are larger), {c['configs'] / 1e6:.2f}M configs, "
        f"{c['unique_configs'] / 1e6:.2f}M unique"
    )
    return Figure(text, (Source(ALL5),))


def stage_row(r: dict, label: str, names: list[str], io: bool = True) -> list[str]:
    """A row of the all-five table: the stages' walls joined, the highest peak, bytes read and written."""
    s = [stage(r, n) for n in names]
    joiner = " / " if len(s) > 1 else ""
    wall = joiner.join(f"{x['seconds']:.1f}" for x in s) + " s"
    peak = gb(max(x["peak_rss"] for x in s), GB)
    read = gb(sum(x["read_bytes"] for x in s), GB) if io else ""
    wrote = gb(sum(x["written_bytes"] for x in s), GB) if io else ""
    return [label, wall, peak, read, wrote]


@figure("scale_all_stages")
def all5_stages() -> Figure:
    r = results(ALL5)
    d = r["decompress"]
    rows = [
        [
            f"decompress every input array once ({d['jobs']} processes; the yardstick)",
            f"{d['seconds']:.1f} s",
            "",
            "",
            "",
        ]
    ]
    rows += [stage_row(r, n, [n]) for n in (PREPARE, FEATURES, TRAIN_LGBM)]
    rows.append(stage_row(r, "train gnn (5 collections, 10-minute budget each)", [TRAIN_GNN]))
    rows.append(stage_row(r, "predict random / heuristic / lgbm valid", VALID_OTHERS, io=False))
    rows.append(stage_row(r, "predict gnn valid (every config of every valid graph)", [PREDICT_GNN_VALID]))
    rows.append(
        stage_row(
            r,
            "train ensemble / predict ensemble valid / validate",
            ENSEMBLE_AND_REPORT,
            io=False,
        )
    )
    rows.append(stage_row(r, "predict lgbm / gnn / ensemble test", TESTS, io=False))
    rows.append(["**the steps of `all`, in total**", f"**{r['all_seconds'] / 60:.1f} min**", "", "", ""])
    sl = r["gnn_slice"]
    names = " / ".join(SHORT[c] for c in sl)
    rows.append(
        [
            f"train gnn, 10 steps at width 64, 64 configs per graph, 3 seed members: {names}",
            " / ".join(f"{s['seconds']:.0f}" for s in sl.values()) + " s",
            " / ".join(f"{s['peak_rss'] / GB:.2f}" for s in sl.values()) + " GB",
            "",
            "",
        ]
    )
    return Figure(table(["stage", "wall", "peak RSS (tree)", "read", "written"], rows), (Source(ALL5),))


@figure("scale_all_gnn_stops")
def all5_gnn_stops() -> Figure:
    g = {k.removeprefix("gnn "): v for k, v in results(ALL5)["gnn_budget"].items()}
    patience = [
        f"{c} ({v['steps_run']} steps, {v['seconds']:.0f} s)"
        for c, v in g.items()
        if v["stopped_by"] == "patience"
    ]
    budget = [f"{c} ({v['steps_run']} steps)" for c, v in g.items() if v["stopped_by"] == "time budget"]
    passed = "passed" if results(ALL5)["submission_valid"] else "FAILED"
    text = (
        f"The ensemble's test CSV {passed} `check-submission --partial`. Patience stopped the budgeted GNN "
        f"on {' and '.join(patience)}; the 10-minute budget stopped it on {', '.join(budget)}."
    )
    return Figure(text, (Source(ALL5),))


@figure("scale_cpu_profile")
def cpu_profile() -> Figure:
    r = results(ALL5)
    src, kept, _ = layers_kept()
    g = {k.removeprefix("gnn "): v for k, v in r["gnn_budget"].items()}
    per = ", ".join(
        f"{SHORT[c]} {v['seconds'] / 60:.1f}" + (" (patience)" if v["stopped_by"] == "patience" else "")
        for c, v in g.items()
    )
    first = (PREPARE, FEATURES, TRAIN_LGBM, TRAIN_GNN)
    rest = [s for s in r["stages"] if s["stage"] not in first]
    top = max(s["peak_rss"] for s in r["stages"])
    rows = [
        ["`prepare`", f"{stage(r, PREPARE)['seconds'] / 60:.1f}", gb(stage(r, PREPARE)["peak_rss"], GB)],
        [
            "`features` + LightGBM",
            f"{stage(r, FEATURES)['seconds'] / 60:.1f} + {stage(r, TRAIN_LGBM)['seconds'] / 60:.1f}",
            gb(max(stage(r, n)["peak_rss"] for n in (FEATURES, TRAIN_LGBM)), GB),
        ],
        [
            f"GNN training: {per}",
            f"{stage(r, TRAIN_GNN)['seconds'] / 60:.1f}",
            f"{gb(stage(r, TRAIN_GNN)['peak_rss'], GB)} ({kept} GB with xla:random's layers kept)",
        ],
        [
            f"predictions, ensemble, report (GNN valid predictions {stage(r, PREDICT_GNN_VALID)['seconds'] / 60:.1f})",
            f"{sum(s['seconds'] for s in rest) / 60:.1f}",
            gb(max(s["peak_rss"] for s in rest), GB),
        ],
        ["all steps", f"{r['all_seconds'] / 60:.1f}", gb(top, GB)],
    ]
    return Figure(table(["stage", "minutes", "peak RSS"], rows), (Source(ALL5), src))


def disk_figures() -> dict[str, str]:
    """The measured ratios and sizes of the disk a run keeps (docs/scale.md's disk table, docs/data.md)."""
    r, loaded, nlp = results(ALL5), results(LGBM_LOADED), results(LGBM_NLP)
    after = [s for s in r["stages"] if s["stage"] not in (PREPARE, FEATURES)]
    default_tables = sum(
        c["features"]["written_bytes"] for run in (loaded, nlp) for c in run["per_collection"].values()
    )
    ratios = (r["cache"]["ratio"], r["real_sample_cache"]["ratio"])
    return {
        "cache": f"{ratios[0]:.3f}x",
        "cache_real": f"{ratios[1]:.3f}x",
        "cache_gb": gb(r["cache"]["bytes"], GB),
        "npz_gb": gb(r["cache"]["npz_bytes"], GB),
        "real_cache_kb": f"{r['real_sample_cache']['cache_bytes'] / 1e3:.0f} KB",
        "real_npz_mb": f"{r['real_sample_cache']['npz_bytes'] / 1e6:.1f} MB",
        "real_cache_gb": f"{REAL_NPZ_GB * ratios[0]:.1f} to {REAL_NPZ_GB * ratios[1]:.1f} GB",
        "tables": gb(stage(r, "features")["written_bytes"], GB),
        "tables_default": gb(default_tables, GB),
        "out": gb(sum(s["written_bytes"] for s in after), GB),
        "prepare_written": gb(stage(r, "prepare")["written_bytes"], GB),
    }


@figure("scale_disk")
def disk() -> Figure:
    d = disk_figures()
    npz = f"about {REAL_NPZ_GB} GB of npz"
    rows = [
        [
            "`--data-dir`",
            "the npz files as Kaggle ships them",
            f"about {REAL_NPZ_GB} GB; while `download` unpacks, its zip sits beside them (deleted once unpacked; its size was not measured)",
            "",
        ],
        [
            "`--work-dir` (else `--out-dir`): `features/prepared/`",
            "the prepared cache",
            f"about {d['real_cache_gb']}: {d['cache']} to {d['cache_real']} of the npz",
            f"{d['cache']} on the full-scale synthetic data ({d['cache_gb']} from {d['npz_gb']}); {d['cache_real']} on the real sample ({d['real_cache_kb']} from {d['real_npz_mb']})",
        ],
        [
            "`--work-dir`: `features/tabular/`",
            "LightGBM's feature tables",
            f"about {d['tables']} (it follows the number of graphs and the configs kept per graph, not the npz size)",
            f"{d['tables']} written by `features` on the full-scale synthetic data, which has the real file counts, at the `cpu` profile's 500 configs per train graph; {d['tables_default']} at the default 1000",
        ],
        [
            "`--out-dir`",
            "`models/`, `predictions/`, `submissions/`, `reports/`",
            f"about {d['out']}",
            f"every stage after `features` wrote {d['out']} in all in the all-five run (one GNN seed of width 32 per collection: the `gpu` profile's wider GNN and more seeds write larger model files, not measured)",
        ],
    ]
    header = ["folder", "what", f"size for the real data ({npz})", "measured"]
    return Figure(table(header, rows), (Source(ALL5), Source(LGBM_LOADED), Source(LGBM_NLP)))


@figure("scale_prepare_written")
def prepare_written() -> Figure:
    d = disk_figures()
    text = f"`prepare` wrote {d['prepare_written']} in all while it built that run's {d['cache_gb']} cache"
    return Figure(text, (Source(ALL5),))


@figure("data_disk")
def data_disk() -> Figure:
    """docs/data.md's summary of the disk a real run keeps."""
    d = disk_figures()
    text = (
        f"the prepared cache, {d['cache']} the npz on full-scale synthetic data and {d['cache_real']} on the "
        f"real sample (about {d['real_cache_gb']} for the real data), and LightGBM's feature tables, "
        f"{d['tables']} on full-scale synthetic data with the real file counts. Models, predictions, "
        f"submissions and reports under `--out-dir` took {d['out']} in the same run"
    )
    return Figure(text, (Source(ALL5),))


def load_word(name: str) -> str:
    """`quiet` or `loaded`, as the results file's provenance says of its machine."""
    return {True: "quiet", False: "loaded"}.get(results(name)["provenance"].get("quiet"), "load not recorded")


@figure("lgbm_default_summary")
def lgbm_default_summary() -> Figure:
    loaded, nlp = results(LGBM_LOADED), results(LGBM_NLP)
    four = loaded["measured_seconds"]
    text = (
        f"{len(loaded['per_collection'])} collections took {four / 60:.1f} min on a {load_word(LGBM_LOADED)} "
        f"machine, so the figure is pessimistic. layout:nlp:default took {nlp['measured_seconds'] / 60:.1f} min "
        f"on a {load_word(LGBM_NLP)} machine. That is **{(four + nlp['measured_seconds']) / 60:.1f} min for all "
        f"five**, inside 60 minutes. Tile dominates: its train graphs give "
        f"{loaded['per_collection']['tile:xla']['train_rows'] / 1e3:.0f}k rows after deduplication."
    )
    return Figure(text, (Source(LGBM_LOADED), Source(LGBM_NLP)))


@figure("lgbm_default_table")
def lgbm_default_table() -> Figure:
    """Each collection from its quiet run where there is one, else from the loaded run."""
    rows = []
    for c in (
        "tile:xla",
        "layout:xla:default",
        "layout:xla:random",
        "layout:nlp:random",
        "layout:nlp:default",
    ):
        name = next(n for n in (LGBM_QUIET, LGBM_NLP, LGBM_LOADED) if c in results(n)["per_collection"])
        m = results(name)["per_collection"][c]
        time = f"{m['features']['seconds']:.1f} + {m['train_lgbm']['seconds']:.1f} s ({load_word(name)})"
        rows.append([c, f"{m['train_rows']:,}", time])
    sources = (Source(LGBM_QUIET), Source(LGBM_LOADED), Source(LGBM_NLP))
    return Figure(table(["collection", "train rows", "features + train lgbm"], rows), sources)


@figure("data_cache_size")
def data_cache_size() -> Figure:
    """docs/data.md's prepared cache: its size against the npz, measured and applied to the real data."""
    d = disk_figures()
    text = (
        f"the cache is {d['cache']} the npz on the full-scale synthetic data ({d['cache_gb']} from {d['npz_gb']}) "
        f"and {d['cache_real']} on the real sample files ({d['real_cache_kb']} from {d['real_npz_mb']}): about "
        f"{d['real_cache_gb']} for the real data's {REAL_NPZ_GB} GB"
    )
    return Figure(text, (Source(ALL5),))


@figure("data_synth_full")
def data_synth_full() -> Figure:
    """docs/data.md's generation time of the full-scale synthetic tree."""
    t = results(SYNTH_TREE)
    text = f"{t['minutes']:.1f} min for all {t['files']:,} files ({t['npz_gb']} GB) with `--jobs {t['jobs']}`"
    return Figure(text, (Source(SYNTH_TREE),))


@figure("scale_attention_unmasked")
def scale_attention_unmasked() -> Figure:
    """How much faster torch's attention runs without a padding mask, at the most configs a pass
    measured and over every shape, and how far the two outputs differ."""
    r = results(ATTENTION)
    most = max(row["configs"] for row in r["rows"])
    at_most = [row["ratio"] for row in r["rows"] if row["configs"] == most]
    text = (
        f"{span(at_most, '{:.1f}')}x as fast at {most} configs a pass "
        f"({span((row['ratio'] for row in r['rows']), '{:.1f}')}x over every shape measured); the outputs "
        f"differ by at most {max(row['max_abs_diff'] for row in r['rows']):.1e}"
    )
    return Figure(text, (Source(ATTENTION),))


GNN_PACE = "gnn_pace.json"
GNN_PACE_LANES = "gnn_pace_lanes.json"  # one thread a pass, passes side by side (bench_gnn_pace.py --lanes)


def _pace_row(what: str, s: dict) -> list[str]:
    """One row of the pace table: configs/s (share of the peak, sys/user) of both sides, the speed-ups."""
    cells = [
        f"{m['configs_per_s']:,.0f} ({100 * m['share_of_peak']:.1f}%, sys/user {m['sys_over_user']:.2f})"
        for m in (s["median"]["head"], s["median"]["against"])
    ]
    return [what, *cells, span(s["speedups"])]


@figure("scale_gnn_pace")
def scale_gnn_pace() -> Figure:
    """The GNN's scoring and training against the machine's matmul peak, HEAD beside the earlier
    commit of the same run: configs/s, share of the peak, the kernel's share of the CPU time and
    the speed-up per alternating pair."""
    r = results(GNN_PACE)
    against, lanes = r["against"][:7], results(GNN_PACE_LANES)
    rows = [
        _pace_row(what, r["summary"][part]) for part, what in (("score", "scoring"), ("train", "training"))
    ]
    one_thread = (
        f"scoring, one thread a pass, {lanes['lanes']} passes side by side (theirs: one after another)"
    )
    rows.append(_pace_row(one_thread, lanes["summary"]["score"]))
    peak = r["matmul_gflops"]
    text = (
        f"The machine's FP32 matmul peak: {peak['peak_2t']:.0f} GFLOP/s on 2 threads. Configs per second "
        "(share of that peak; the kernel's system time over user time), on 2 threads, and as `predict` "
        "scores a model trained on one thread (small data) on 2 cores:\n\n"
        + table(["", "this version", f"commit {against}", "speed-up per pair"], rows)
    )
    return Figure(text, (Source(GNN_PACE), Source(GNN_PACE_LANES)))
