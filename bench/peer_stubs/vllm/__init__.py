# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real vllm/__init__.py imports vllm.env_override (torch) and
# lazily exposes engine classes. The benchmark client needs none of that.
__version__ = "0.34.0"
__version_tuple__ = (0, 34, 0)
