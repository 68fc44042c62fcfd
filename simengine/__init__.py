"""simengine: a simulated SGLang server process for Sweeplab.

Launch it exactly like ``python -m sglang.launch_server``::

    python -m simengine --model-path Qwen/Qwen3.6-27B --tp-size 4 --port 30000

It imports nothing from the rest of the project.  See simengine/README.md.
"""

__version__ = "0.1.0"

# The SGLang version string the simulated server reports in /get_server_info.
SGLANG_VERSION = "0.5.6"
