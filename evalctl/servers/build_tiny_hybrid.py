"""Build `bundled:tiny-hybrid`: a seeded, randomly initialised NemotronH (Mamba2 + attention) model.

Runs in the engine's venv (`python build_tiny_hybrid.py TOKENIZER_GGUF OUT_DIR`; torch and transformers imported only
by `build`); the same torch build and seed give the same bytes. Random weights give near-uniform logits, on which greedy
decoding hangs on near-ties, so the output head is untied and sharp (LM_HEAD_STD); D = 0 and slow decays make each Mamba
layer's output its memory of the prefix, so a lost state changes what follows (docs/hybrid-cpu.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SEED = 20240601
LM_HEAD_STD = 2.0
MIN_DECAY_A = 0.01
# M = Mamba2 mixer, * = attention, - = MLP (NemotronH's layer pattern letters).
PATTERN = "M*-M*-"
CONFIG = dict(
    hidden_size=64,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,  # the smallest head size vLLM's CPU attention kernels take
    intermediate_size=128,
    mamba_num_heads=8,
    mamba_head_dim=16,
    ssm_state_size=16,
    n_groups=1,
    conv_kernel=4,
    expand=2,
    chunk_size=128,
    max_position_embeddings=8192,
    tie_word_embeddings=False,
    use_mamba_kernels=False,
)


def build(tokenizer_gguf: Path, out: Path) -> dict:
    import torch
    from transformers import AutoTokenizer, NemotronHConfig, NemotronHForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_gguf.parent, gguf_file=tokenizer_gguf.name)
    torch.manual_seed(SEED)
    config = NemotronHConfig(
        vocab_size=len(tokenizer),
        hybrid_override_pattern=PATTERN,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        **CONFIG,
    )
    model = NemotronHForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, LM_HEAD_STD)
        for layer in model.model.layers:
            if hasattr(layer.mixer, "A_log"):
                # No skip path (D = 0): a Mamba layer's output is its state read out, and slow
                # decays (A from MIN_DECAY_A up to 1) make that state remember the whole prefix.
                layer.mixer.D.zero_()
                # Unit-scale inputs, so the state is far above the gated norm's epsilon (at the
                # default std of 0.02 the state is ~1e-8 and the layer's output is ~0).
                layer.mixer.in_proj.weight.normal_(0.0, CONFIG["hidden_size"] ** -0.5)
                layer.mixer.conv1d.weight.normal_(0.0, 0.5)
                layer.mixer.A_log.copy_(torch.linspace(MIN_DECAY_A, 1.0, layer.mixer.A_log.numel()).log())
    margin = _greedy_margin(model, tokenizer)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    facts = {
        "architecture": "NemotronHForCausalLM",
        "pattern": PATTERN,
        "layers": len(PATTERN),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": SEED,
        "lm_head_std": LM_HEAD_STD,
        "torch": torch.__version__,
        **margin,
    }
    (out / "tiny_hybrid.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts


def _greedy_margin(model, tokenizer) -> dict:
    """Top-1 minus top-2 logit over a greedy continuation of a fixed text: how decisive greedy decoding is."""
    import torch

    ids = tokenizer(
        "Question: Natalia sold clips to 48 of her friends in April. How many clips did she sell?\nAnswer:", return_tensors="pt"
    ).input_ids
    margins = []
    with torch.no_grad():
        for _ in range(32):
            logits = model(ids).logits[0, -1]
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    margins.sort()
    return {"margin_min": margins[0], "margin_median": margins[len(margins) // 2], "logit_std": float(logits.std())}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_tiny_hybrid.py TOKENIZER_GGUF OUT_DIR")
    print(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]))))
