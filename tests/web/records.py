"""Request records of a known distribution for the tests of comparisons, charts and history:
each request's decode speed is ``speed`` times a seeded log-normal factor of sigma
``spread``, so two points drawn with the same speed and spread come from one distribution,
and a 30 % faster point really is faster."""

import numpy as np

from runs.models import RequestRecord

OUTPUT_TOKENS = 65
TTFT_S = 0.05


def add_records(point, speed, n=20, seed=1, spread=0.03, ttft_s=TTFT_S):
    """``n`` completed RequestRecords of ``point``; returns their decode speeds."""
    rng = np.random.default_rng(seed)
    speeds = speed * rng.lognormal(0.0, spread, n)
    RequestRecord.objects.bulk_create(
        RequestRecord(point=point, index=k, send_time=1.7e9 + k,
                      chunk_offsets=[ttft_s, ttft_s + (OUTPUT_TOKENS - 1) / float(s)], chunk_tokens=[1, OUTPUT_TOKENS - 1],
                      prompt_tokens=1000, output_tokens=OUTPUT_TOKENS, finish_reason="length", http_status=200)
        for k, s in enumerate(speeds)
    )
    return [float(s) for s in speeds]
