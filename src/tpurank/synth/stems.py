"""File stems that look like the real ones: benchmark names for train/valid, 32 hex digits for test."""

from __future__ import annotations

import numpy as np

XLA_MODELS = (
    "resnet50",
    "resnet_v1_50_official",
    "unet_3d",
    "unet3d",
    "inception_v3",
    "efficientnet_b7",
    "mask_rcnn",
    "retinanet",
    "shapemask",
    "mnasnet_a1",
    "densenet",
    "mobilenet_v2",
    "vgg16",
    "alexnet_train_batch_32",
    "bert_pretraining",
    "transformer_tf2_dynamic_shape",
    "magenta",
    "ncf",
    "openai_v0_rnn_optimized",
    "brax_es",
    "mlperf_bert",
    "mlperf_ssd",
    "xception",
    "trax_lsh_attention",
    "dlrm",
    "deepvariant",
    "tf2_bert_pretrain_dynamic_batch_size",
)
XLA_SUFFIXES = (".4x4.fp16", ".4x4.bf16", ".2x2.fp32", ".8x16.fp16", ".4x2.bf16", "", "_batch_128_train")
NLP_MODELS = (
    "albert_en_base",
    "albert_en_large",
    "bert_en_cased_L-12_H-768_A-12",
    "bert_en_uncased_L-24_H-1024_A-16",
    "bert_multi_cased_L-12_H-768_A-12",
    "electra_base",
    "electra_small",
    "experts_bert_pubmed",
    "small_bert_bert_en_uncased_L-4_H-512_A-8",
    "talking-heads_base",
    "talking-heads_large",
    "lambert_en_uncased_L-24_H-1024_A-16",
    "mobilebert_en_uncased_L-24_H-128_B-512_A-4_F-4_OPT",
)


def benchmark_stem(rng: np.random.Generator, family: str) -> str:
    """A benchmark-like stem: `resnet50.4x4.fp16` (xla), `bert_..._batch_size_16_train` (nlp), or
    `<model>_<16 hex>` (tile; the hex sometimes negative, as in the real names)."""
    if family == "nlp":
        model = NLP_MODELS[int(rng.integers(len(NLP_MODELS)))]
        batch = (1, 2, 4, 8, 16, 32, 64)[int(rng.integers(7))]
        return f"{model}_batch_size_{batch}_{'train' if rng.random() < 0.5 else 'test'}"
    model = XLA_MODELS[int(rng.integers(len(XLA_MODELS)))]
    suffix = XLA_SUFFIXES[int(rng.integers(len(XLA_SUFFIXES)))]
    if family == "tile":
        sign = "-" if rng.random() < 0.3 else ""
        return f"{model}{suffix}_{sign}{rng.bytes(8).hex()}"
    return f"{model}{suffix}"


def unique_stems(
    rng: np.random.Generator, family: str, count: int, taken: set[str] | None = None
) -> list[str]:
    """`count` distinct benchmark-like stems (a `_v2`, `_v3`... suffix where a name repeats)."""
    taken = set() if taken is None else taken
    out = []
    for _ in range(count):
        stem = benchmark_stem(rng, family)
        base, k = stem, 2
        while stem in taken:
            stem, k = f"{base}_v{k}", k + 1
        taken.add(stem)
        out.append(stem)
    return out


def test_stems(rng: np.random.Generator, count: int) -> list[str]:
    """`count` distinct 32-hex stems."""
    out: list[str] = []
    while len(out) < count:
        s = rng.bytes(16).hex()
        if s not in out:
            out.append(s)
    return out
