"""The database side of specs and plans: the catalog a spec is checked against and the
quarantines a plan honours, as the pure types of sweepcore.spec and sweepcore.plan."""

from benchmarks.models import LLM, Engine, Host, KnownFailure, Workload
from sweepcore.plan import Quarantine
from sweepcore.spec import Catalog, EngineInfo, HostInfo, ModelInfo, WorkloadInfo


def load_catalog():
    return Catalog(
        hosts={
            h.name: HostInfo(h.name, h.gpu_count, h.compute_capability, h.gpu_model, tuple(h.data_roots))
            for h in Host.objects.order_by("name")
        },
        engines={
            e.name: EngineInfo(e.name, e.kind, tuple(e.methods), bool(e.argv_template))
            for e in Engine.objects.order_by("name")
        },
        models={m.name: ModelInfo(m.name, m.context_length) for m in LLM.objects.order_by("name")},
        workloads={
            w.name: WorkloadInfo(w.name, w.kind, w.dataset_path, w.imported) for w in Workload.objects.order_by("name")
        },
    )


def active_quarantines(engine, llm, host):
    """Active KnownFailures for this engine kind, model and GPU kind."""
    rows = KnownFailure.objects.filter(
        engine_kind=engine.kind, llm=llm, compute_capability=host.compute_capability, active=True
    ).order_by("id")
    return [
        Quarantine(kf.method, kf.params, kf.tp, kf.failure_kind, kf.signature, kf.id) for kf in rows
    ]
