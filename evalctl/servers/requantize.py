"""Re-quantise a GGUF's Q4_1 matrices to Q8_0: the bundled model's llama.cpp prefill, twice as fast on CPU.

llama.cpp's fast CPU matrix kernels take Q4_0, Q8_0 and floats, not Q4_1: the bundled SmolLM2-135M prefills at about 75
tokens/s a core as Q4_1, 130-155 as Q8_0 (`scripts/bench_bundled_quant.py`), and prefill is what a cache-off cell costs.
A Q8_0 block has 255 levels over the span of a Q4_1 block's 16, so each value moves by at most 1/254 of its block's
largest: the bfloat16 rounding the vLLM and SGLang copies already carry. Needs `gguf` (the `cpu` extra). Its GGUF field
copy and write serve the tiny-hybrid GGUF builder too.
"""

from __future__ import annotations

from pathlib import Path

from evalctl.extras import require


def requantize(source: Path, target: Path) -> Path:
    """Write `source` with its Q4_1 tensors as Q8_0 to `target` (a new file), every other tensor and metadata key as
    they are but the file type; ConfigError without gguf."""
    require("gguf", "re-quantising the bundled model for llama.cpp")
    import gguf
    from gguf import GGMLQuantizationType as Quant

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if not name.startswith("GGUF.") and name != "general.architecture":  # the header's own fields: the writer adds them
            copy_field(writer, field, int(gguf.LlamaFileType.MOSTLY_Q8_0) if name == "general.file_type" else None)
    for tensor in reader.tensors:
        data, kind = tensor.data, tensor.tensor_type
        if kind == Quant.Q4_1:
            data, kind = gguf.quantize(gguf.dequantize(data, kind), Quant.Q8_0), Quant.Q8_0
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    return write_out(writer, target)


def copy_field(writer, field, value: object = None) -> None:
    """Add a GGUFReader `field` to a GGUFWriter under its own types, with `value` (if not None) in place of its own."""
    kind, item = field.types[0], field.types[-1] if len(field.types) > 1 else None
    writer.add_key_value(field.name, field.contents() if value is None else value, kind, sub_type=item)


def write_out(writer, target: Path) -> Path:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target
