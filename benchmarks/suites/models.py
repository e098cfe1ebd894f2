"""The suites' model lists, as data.

Modelled on the three public suites PyTorch runs its compiler on (timm, Hugging Face,
torchvision): each entry is a model name and the batch size used on the GPU. On the CPU
(`--size cpu-small`) every model runs at batch 2, vision models at their own image size and
Hugging Face models with a small config (2 layers, width 64) and short sequences. Names are
spelt as the libraries' registries spell them; a name the installed library does not know is reported and skipped at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CPU_BATCH = 2
HF_SEQ = {"gpu": 512, "cpu-small": 32}


@dataclass(frozen=True)
class Entry:
    name: str
    gpu_batch: int
    # Hugging Face: config overrides at every size (defaults that would not fit a GPU step),
    # and extra overrides at cpu-small on top of the generic small config.
    config: dict[str, Any] = field(default_factory=dict)
    small: dict[str, Any] = field(default_factory=dict)
    # Hugging Face: the sequence length on the GPU where HF_SEQ["gpu"] does not fit the model
    seq: int = 0


def _entries(table: str) -> list[Entry]:
    rows = (line.split() for line in table.strip().splitlines())
    return [Entry(name, int(batch)) for name, batch in rows]


# timm: ~60 models and their GPU batch sizes
TIMM = _entries(
    """
    adv_inception_v3 128
    beit_base_patch16_224 128
    botnet26t_256 128
    cait_m36_384 4
    coat_lite_mini 128
    convit_base 64
    convmixer_768_32 32
    convnext_base 64
    convnext_tiny 128
    crossvit_9_240 256
    cspdarknet53 128
    deit_base_distilled_patch16_224 128
    dla102 128
    dm_nfnet_f0 128
    dpn107 32
    eca_botnext26ts_256 128
    eca_halonext26ts 128
    efficientnet_b0 128
    ese_vovnet19b_dw 256
    fbnetc_100 512
    fbnetv3_b 256
    gernet_l 128
    ghostnet_100 512
    gluon_inception_v3 256
    gmixer_24_224 128
    gmlp_s16_224 128
    hrnet_w18 128
    inception_v3 128
    jx_nest_base 128
    lcnet_050 256
    levit_128 1024
    mixer_b16_224 128
    mixnet_l 128
    mnasnet_100 512
    mobilenetv2_100 128
    mobilenetv3_large_100 512
    mobilevit_s 256
    nfnet_l0 128
    pit_b_224 64
    pnasnet5large 16
    poolformer_m36 64
    regnety_002 1024
    repvgg_a2 128
    res2net101_26w_4s 64
    res2net50_14w_8s 128
    res2next50 128
    resmlp_12_224 128
    resnest101e 64
    resnet50 128
    rexnet_100 256
    sebotnet33ts_256 64
    selecsls42b 128
    spnasnet_100 128
    swin_base_patch4_window7_224 64
    swsl_resnext101_32x16d 32
    tf_efficientnet_b0 128
    tf_mixnet_l 128
    tinynet_a 128
    tnt_s_patch16_224 128
    twins_pcpvt_base 64
    visformer_small 128
    vit_base_patch16_224 64
    volo_d1_224 64
    xcit_large_24_p8_224 16
    """
)

# torchvision: classification models, weights=None
TORCHVISION = _entries(
    """
    resnet18 256
    resnet50 128
    mobilenet_v2 128
    mobilenet_v3_large 256
    efficientnet_b0 128
    convnext_tiny 128
    vit_b_16 64
    swin_t 64
    regnet_y_400mf 256
    densenet121 64
    squeezenet1_1 256
    shufflenet_v2_x1_0 256
    """
)

# A "small config" for the models whose library defaults are several billion parameters.
_DECODER_GPU = {"num_hidden_layers": 8, "hidden_size": 1024, "intermediate_size": 2816,
                "num_attention_heads": 16, "num_key_value_heads": 8}  # fmt: skip

# Roberta-style position ids count from the pad id (1) on: 512 positions hold 510 tokens
_ROBERTA_SEQ = 510

# Hugging Face: transformers classes built from their config class with library defaults and
# random weights. Batch sizes for sequence length HF_SEQ["gpu"].
HUGGINGFACE = [
    Entry("AlbertForMaskedLM", 8),
    Entry("BartForCausalLM", 8),
    Entry("BertForMaskedLM", 16),
    Entry("BigBirdForCausalLM", 16, small={"attention_type": "original_full"}),
    Entry("BlenderbotSmallForCausalLM", 64),
    # its learned positions stop at 128 (max_position_embeddings); its cache is sized by
    # num_hidden_layers, which reads encoder_layers: both set alike
    Entry("BlenderbotForCausalLM", 16, config={"decoder_layers": 8, "encoder_layers": 8}, seq=128),
    Entry("CamembertForMaskedLM", 16, seq=_ROBERTA_SEQ),
    Entry("ConvBertForMaskedLM", 16),
    Entry("DebertaForMaskedLM", 16),
    Entry("DebertaV2ForMaskedLM", 8),
    Entry("DistilBertForMaskedLM", 64),
    Entry("ElectraForCausalLM", 32),
    Entry("ElectraForPreTraining", 32),
    Entry("GPT2ForSequenceClassification", 8, config={"pad_token_id": 0}),
    Entry("GPT2LMHeadModel", 8),
    Entry("GPTNeoForCausalLM", 16, small={"attention_types": [[["global", "local"], 1]]}),
    Entry("GPTJForCausalLM", 4, config={"n_layer": 4}, small={"rotary_dim": 8}),
    Entry("GPTNeoXForCausalLM", 8, config=dict(_DECODER_GPU)),
    Entry("LayoutLMForMaskedLM", 16),
    Entry("LlamaForCausalLM", 8, config=dict(_DECODER_GPU)),
    Entry("M2M100ForConditionalGeneration", 16),
    Entry("MarianForCausalLM", 16, small={"pad_token_id": 0, "decoder_start_token_id": 0}),
    Entry("MBartForCausalLM", 8),
    Entry("MegatronBertForCausalLM", 8),
    Entry("MistralForCausalLM", 8, config=dict(_DECODER_GPU)),
    Entry(
        "MobileBertForMaskedLM",
        64,
        small={"embedding_size": 64, "intra_bottleneck_size": 64, "true_hidden_size": 64},
    ),
    Entry("MT5ForConditionalGeneration", 8),
    Entry("OPTForCausalLM", 16),
    Entry("PegasusForCausalLM", 32),
    Entry("PLBartForCausalLM", 16),
    Entry("Qwen2ForCausalLM", 8, config=dict(_DECODER_GPU)),
    Entry("GemmaForCausalLM", 8, config={**_DECODER_GPU, "head_dim": 64}),
    Entry("RobertaForCausalLM", 16, seq=_ROBERTA_SEQ),
    Entry("T5ForConditionalGeneration", 8),
    Entry("TrOCRForCausalLM", 32),
    Entry("XGLMForCausalLM", 16),
    Entry("XLMRobertaForMaskedLM", 16, seq=_ROBERTA_SEQ),
    Entry("XLNetLMHeadModel", 8, small={"d_head": 16}),
]

# The generic small config at cpu-small; each key is applied where the config class takes it
# (directly or through its attribute_map).
HF_SMALL: dict[str, Any] = {
    "num_hidden_layers": 2, "encoder_layers": 2, "decoder_layers": 2, "num_decoder_layers": 2,
    "hidden_size": 64, "num_attention_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "d_ff": 128, "ffn_dim": 128,
    "n_inner": 128, "d_inner": 128, "hidden_dim": 128, "d_kv": 16, "head_dim": 16,
    "embedding_size": 64, "vocab_size": 1000, "max_position_embeddings": 128,
}  # fmt: skip

SUITES: dict[str, list[Entry]] = {
    "timm": TIMM,
    "huggingface": HUGGINGFACE,
    "torchvision": TORCHVISION,
}


def entries(suite: str, names: list[str] | None = None) -> list[Entry]:
    """The suite's entries, or those named (in the order given; unknown names are kept as
    entries with batch 0, so that the run reports them instead of dropping them)."""
    table = SUITES[suite]
    if not names:
        return list(table)
    by_name = {e.name: e for e in table}
    return [by_name.get(n, Entry(n, 0)) for n in names]


def shard(items: list[Entry], spec: str | None) -> list[Entry]:
    """`k/n`: every n-th entry starting at k (0 <= k < n)."""
    if not spec:
        return items
    k, n = (int(part) for part in spec.split("/"))
    if not 0 <= k < n:
        raise ValueError(f"shard {spec}: need 0 <= k < n")
    return items[k::n]
