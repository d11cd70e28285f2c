"""Convert a GGUF file to a safetensors model folder that vLLM loads (vLLM cannot load GGUF on CPU).

Runs as a script in the vLLM venv (`python gguf_to_hf.py GGUF OUT`), never imported by evalctl: it needs torch,
transformers, gguf and accelerate. The weights come out dense (dequantised on load, not re-quantised), as bfloat16.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)
    model = model.to(torch.bfloat16)
    # The weights are dense now: drop the GGUF quantizer (save_pretrained refuses a GGUF-quantized
    # model) and its config note (vLLM would look for a GGUF quantization method).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_to_hf.py GGUF_FILE OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
