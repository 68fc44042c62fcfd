# Stand-in (bench/peers.py, vLLM bench serve without the engine): vllm.logger's *_once(scope="local"/"global") helpers import these
# lazily to log only on the first rank. The real functions return True when
# torch.distributed is not initialised -- always the case for the benchmark client.
def is_local_first_rank() -> bool:
    return True


def is_global_first_rank() -> bool:
    return True
