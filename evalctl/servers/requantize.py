"""Re-quantise a GGUF's Q4_1 matrices to Q8_0: the bundled model's llama.cpp prefill, twice as fast on CPU.

llama.cpp's fast CPU matrix kernels (repacked, llamafile) take Q4_0, Q8_0 and floats, not Q4_1: the bundled
SmolLM2-135M's Q4_1 file prefills at about 75 tokens/s a core on AVX2, its Q8_0 at 130-155
(`scripts/bench_bundled_quant.py`). Prefill is what a cache-off cell costs: sweeps and tests take half the engine time.

The weights hardly move: a Q4_1 block of 32 holds 16 levels, a Q8_0 block 255 over the same span, so each value
shifts by at most 1/254 of its block's largest, the bfloat16 rounding the vLLM and SGLang copies already carry.
Other tensors are copied byte for byte, and every metadata key but the file type (Q8_0) is kept. Needs `gguf` (the `cpu` extra).
"""

from __future__ import annotations

from pathlib import Path

from evalctl.extras import require


def requantize(source: Path, target: Path) -> None:
    """Write `source` with its Q4_1 tensors as Q8_0 to `target` (a new file); ConfigError without gguf."""
    require("gguf", "re-quantising the bundled model for llama.cpp")
    import gguf
    from gguf import GGMLQuantizationType as Quant

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":  # the header's own fields; the writer adds them
            continue
        value = int(gguf.LlamaFileType.MOSTLY_Q8_0) if name == "general.file_type" else field.contents()
        kind = field.types[0]
        writer.add_key_value(name, value, kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        if tensor.tensor_type == Quant.Q4_1:
            values = gguf.dequantize(tensor.data, Quant.Q4_1)
            data, kind = gguf.quantize(values, Quant.Q8_0), Quant.Q8_0
        else:
            data, kind = tensor.data, tensor.tensor_type
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
