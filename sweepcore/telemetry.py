"""GPU telemetry through NVML (nvidia-ml-py, `import pynvml`).

Without NVML (a CPU host, the simulator, a driver-less container) every entry point says
so with the reason; nothing here ever invents a number."""

import threading
import time
from dataclasses import dataclass

from sweepcore import gpus

try:
    import pynvml
except ImportError:  # the package is a requirement; a broken install is still reported
    pynvml = None

MIB = 1024 * 1024


class NvmlUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class GpuSample:
    gpu_index: int
    at: float  # epoch seconds
    memory_used_mib: float | None
    memory_total_mib: float | None
    utilization_pct: float | None
    power_w: float | None
    temperature_c: float | None
    sm_clock_mhz: float | None


@dataclass(frozen=True)
class GpuProcess:
    gpu_index: int
    pid: int
    used_mib: float | None


def _maybe(fn, *args):
    """One NVML reading, or None where this GPU does not support it."""
    try:
        return fn(*args)
    except pynvml.NVMLError:
        return None


class Nvml:
    """An NVML session: ``with Nvml() as nvml: nvml.sample(0)``."""

    def __enter__(self):
        if pynvml is None:
            raise NvmlUnavailable("nvidia-ml-py is not installed")
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML could not start: {exc}") from None
        return self

    def __exit__(self, *exc):
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass

    def count(self):
        return pynvml.nvmlDeviceGetCount()

    def describe(self, index):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        cc = _maybe(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
        return {
            "index": index,
            "name": name.decode() if isinstance(name, bytes) else name,
            "compute_capability": f"{cc[0]}.{cc[1]}" if cc else "",
        }

    def sample(self, index):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        memory = _maybe(pynvml.nvmlDeviceGetMemoryInfo, handle)
        util = _maybe(pynvml.nvmlDeviceGetUtilizationRates, handle)
        power = _maybe(pynvml.nvmlDeviceGetPowerUsage, handle)
        temp = _maybe(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
        clock = _maybe(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)
        return GpuSample(
            gpu_index=index,
            at=time.time(),
            memory_used_mib=memory.used / MIB if memory else None,
            memory_total_mib=memory.total / MIB if memory else None,
            utilization_pct=float(util.gpu) if util else None,
            power_w=power / 1000 if power is not None else None,
            temperature_c=float(temp) if temp is not None else None,
            sm_clock_mhz=float(clock) if clock is not None else None,
        )

    def processes(self, index):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        procs = list(_maybe(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or [])
        procs += list(_maybe(pynvml.nvmlDeviceGetGraphicsRunningProcesses, handle) or [])
        return [
            GpuProcess(index, p.pid, p.usedGpuMemory / MIB if getattr(p, "usedGpuMemory", None) else None)
            for p in procs
        ]


    def close(self, i, j):
        """Whether GPUs i and j talk fast: NVLink peer-to-peer, or one PCIe switch."""
        a, b = pynvml.nvmlDeviceGetHandleByIndex(i), pynvml.nvmlDeviceGetHandleByIndex(j)
        nvlink = _maybe(pynvml.nvmlDeviceGetP2PStatus, a, b, pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
        if nvlink == pynvml.NVML_P2P_STATUS_OK:
            return True
        level = _maybe(pynvml.nvmlDeviceGetTopologyCommonAncestor, a, b)
        return level is not None and level <= pynvml.NVML_TOPOLOGY_MULTIPLE

    def process_utilization(self, index):
        """{pid: SM utilisation %} over the driver's last sampling window; empty where
        the GPU or driver does not report per-process utilisation."""
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        samples = _maybe(pynvml.nvmlDeviceGetProcessUtilization, handle, 0) or []
        utils = {}
        for s in samples:
            utils[s.pid] = max(utils.get(s.pid, 0.0), float(s.smUtil))
        return utils


def gpu_groups(gpu_count):
    """The host's fast-interconnect groups for sweepcore.gpus.choose: GPUs linked by NVLink
    (peer-to-peer over NVLink reported OK) or under one PCIe switch (their closest common
    ancestor no further than NVML_TOPOLOGY_MULTIPLE). [] when it tells nothing to choose by."""
    with Nvml() as nvml:
        count = min(gpu_count, nvml.count())
        return gpus.groups_from_links(count, nvml.close)


def busy_gpus(indices, allowed_pids=()):
    """Processes other than ours holding any of these GPUs (preflight: are they idle?)."""
    with Nvml() as nvml:
        count = nvml.count()
        missing = [i for i in indices if i >= count]
        if missing:
            raise NvmlUnavailable(f"GPU {missing[0]} does not exist: NVML sees {count} GPU(s)")
        return [p for i in indices for p in nvml.processes(i) if p.pid not in set(allowed_pids)]


def wait_released(indices, timeout_s, interval_s=1.0):
    """After teardown: wait until no process holds these GPUs. Returns what is left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = busy_gpus(indices)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(interval_s)


class Sampler(threading.Thread):
    """Samples the given GPUs every `interval_s` and hands each batch to `sink` (which
    stores it), until stop(). Started only when NVML is available."""

    def __init__(self, indices, sink, interval_s=2.0):
        super().__init__(name="gpu-telemetry", daemon=True)
        self.indices = list(indices)
        self.sink = sink
        self.interval_s = interval_s
        self.stopped = threading.Event()
        self.error = None

    def run(self):
        try:
            with Nvml() as nvml:
                while not self.stopped.is_set():
                    self.sink([nvml.sample(i) for i in self.indices])
                    self.stopped.wait(self.interval_s)
        except Exception as exc:  # reported by the executor as a RunEvent, never raised in a thread
            self.error = f"{exc.__class__.__name__}: {exc}"

    def stop(self):
        self.stopped.set()
        self.join(timeout=self.interval_s + 5)
