"""Build `bundled:tiny-hybrid-gguf`: `bundled:tiny-hybrid`'s recipe (shape, seed, weights) as a GGUF that llama.cpp
serves (`nemotron_h`), written with `gguf` and numpy, SmolLM2's tokenizer copied from the bundled GGUF; the same numpy
and seed give the same bytes. Tokens that are not printable UTF-8 get zero output-head rows (logit 0 against a top of
about +60: never chosen): an answer holding U+FFFD makes some llama.cpp releases answer HTTP 500.
"""

from __future__ import annotations

from pathlib import Path

from evalctl.servers.build_tiny_hybrid import CONFIG, LM_HEAD_STD, MIN_DECAY_A, PATTERN, SEED
from evalctl.servers.requantize import copy_field, write_out
from evalctl.servers.vocabulary import BYTE_CHARS

VERSION = 1  # part of the cache folder's name: a change to what is written here builds the file afresh
HIDDEN, FFN, CONTEXT = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["max_position_embeddings"]
ATTENTION_HEADS, KV_HEADS, HEAD_DIM = CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"], CONFIG["head_dim"]
SSM_HEADS, SSM_HEAD_DIM, SSM_STATE = CONFIG["mamba_num_heads"], CONFIG["mamba_head_dim"], CONFIG["ssm_state_size"]
SSM_GROUPS, CONV_KERNEL = CONFIG["n_groups"], CONFIG["conv_kernel"]
INIT_STD = 0.02  # transformers' initializer_range: embeddings, attention, MLP, Mamba output
NORM_EPS = 1e-5


def printable_tokens(tokens: list[str], types: list[int]) -> list[bool]:
    """Whether each normal token's bytes are printable UTF-8 text (spaces included, newlines and controls not)."""
    decoder = {char: byte for byte, char in BYTE_CHARS.items()}
    keep = []
    for token, kind in zip(tokens, types):
        try:
            text = bytes(decoder[c] for c in token).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            text = ""
        keep.append(kind == 1 and text != "" and text.isprintable())  # 1: llama.cpp's NORMAL token type
    return keep


def build(tokenizer_gguf: Path, out: Path) -> Path:
    """Write the model to `out` (a .gguf file) and return it."""
    from gguf import GGUFReader, GGUFWriter

    fields = GGUFReader(tokenizer_gguf).fields
    tokens, types = fields["tokenizer.ggml.tokens"].contents(), fields["tokenizer.ggml.token_type"].contents()
    writer = GGUFWriter(str(out), "nemotron_h")
    _write_hparams(writer, len(tokens))
    for key, field in fields.items():
        if key.startswith("tokenizer."):
            copy_field(writer, field)
    for name, array in _tensors(printable_tokens(tokens, types)):
        writer.add_tensor(name, array)
    return write_out(writer, out)


def _write_hparams(writer, vocab: int) -> None:
    from gguf import LlamaFileType

    writer.add_name("evalctl tiny-hybrid-gguf")
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(len(PATTERN))
    writer.add_vocab_size(vocab)
    # Per layer: a layer with neither KV heads nor a feed-forward width is a Mamba layer (llama.cpp's rule).
    writer.add_feed_forward_length([FFN if kind == "-" else 0 for kind in PATTERN])
    writer.add_head_count(ATTENTION_HEADS)
    writer.add_head_count_kv([KV_HEADS if kind == "*" else 0 for kind in PATTERN])
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_layer_norm_eps(NORM_EPS)  # older releases read this one, newer ones the RMS key
    writer.add_layer_norm_rms_eps(NORM_EPS)
    writer.add_ssm_conv_kernel(CONV_KERNEL)
    writer.add_ssm_inner_size(SSM_HEADS * SSM_HEAD_DIM)
    writer.add_ssm_state_size(SSM_STATE)
    writer.add_ssm_time_step_rank(SSM_HEADS)
    writer.add_ssm_group_count(SSM_GROUPS)


def _tensors(keep: list[bool]):
    """(name, float32 array) of every tensor, drawn in a fixed order from SEED; numpy shapes are ggml's reversed."""
    import numpy as np

    rng = np.random.default_rng(SEED)

    def normal(std: float, *shape: int) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def ones(*shape: int) -> np.ndarray:
        return np.ones(shape, dtype=np.float32)

    vocab, d_inner = len(keep), SSM_HEADS * SSM_HEAD_DIM
    conv_channels = d_inner + 2 * SSM_GROUPS * SSM_STATE
    yield "token_embd.weight", normal(INIT_STD, vocab, HIDDEN)
    yield "output_norm.weight", ones(HIDDEN)
    head = normal(LM_HEAD_STD, vocab, HIDDEN)
    head[~np.array(keep)] = 0.0
    yield "output.weight", head
    for i, kind in enumerate(PATTERN):
        blk = f"blk.{i}"
        yield f"{blk}.attn_norm.weight", ones(HIDDEN)
        if kind == "M":
            # in_proj's rows: gate z, then x B C (through the convolution), then one dt per head.
            yield f"{blk}.ssm_in.weight", normal(HIDDEN**-0.5, d_inner + conv_channels + SSM_HEADS, HIDDEN)
            yield f"{blk}.ssm_conv1d.weight", normal(0.5, conv_channels, CONV_KERNEL)
            yield f"{blk}.ssm_conv1d.bias", np.zeros(conv_channels, dtype=np.float32)
            # dt between 0.001 and 0.1 (transformers' initialisation), stored as softplus's inverse.
            dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), SSM_HEADS))
            yield f"{blk}.ssm_dt.bias", (dt + np.log(-np.expm1(-dt))).astype(np.float32)
            # A = -exp(A_log), from -MIN_DECAY_A to -1: slow decays; D = 0: no skip path past the state.
            yield f"{blk}.ssm_a", -np.linspace(MIN_DECAY_A, 1.0, SSM_HEADS, dtype=np.float32).reshape(SSM_HEADS, 1)
            yield f"{blk}.ssm_d", np.zeros((SSM_HEADS, 1), dtype=np.float32)
            yield f"{blk}.ssm_norm.weight", ones(SSM_GROUPS, d_inner // SSM_GROUPS)
            yield f"{blk}.ssm_out.weight", normal(INIT_STD, HIDDEN, d_inner)
        elif kind == "*":
            yield f"{blk}.attn_q.weight", normal(INIT_STD, ATTENTION_HEADS * HEAD_DIM, HIDDEN)
            yield f"{blk}.attn_k.weight", normal(INIT_STD, KV_HEADS * HEAD_DIM, HIDDEN)
            yield f"{blk}.attn_v.weight", normal(INIT_STD, KV_HEADS * HEAD_DIM, HIDDEN)
            yield f"{blk}.attn_output.weight", normal(INIT_STD, HIDDEN, ATTENTION_HEADS * HEAD_DIM)
        else:
            yield f"{blk}.ffn_up.weight", normal(INIT_STD, FFN, HIDDEN)
            yield f"{blk}.ffn_down.weight", normal(INIT_STD, HIDDEN, FFN)
