"""Stand-in (bench/peers.py, SGLang's benchmark clients without the engine): the wheel's
sglang/__init__.py imports the engine (sglang.lang.api, the transformers patches: torch).
The benchmark clients use none of it; the version is the wheel's own file."""
from sglang.version import __version__  # noqa: F401
