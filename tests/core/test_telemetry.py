"""NVML readings, with a stand-in for the NVML library, and the real one on this machine
(whichever kind it is: with an NVIDIA driver or without)."""

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweepcore import telemetry


class FakeNVMLError(Exception):
    pass


def fake_nvml(gpus=2, processes=None, power_supported=True):
    processes = processes or {}
    calls = {"init": 0, "shutdown": 0}

    def power(handle):
        if not power_supported:
            raise FakeNVMLError("Not Supported")
        return 312_500  # milliwatts

    return calls, SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_SM=1,
        nvmlInit=lambda: calls.__setitem__("init", calls["init"] + 1),
        nvmlShutdown=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        nvmlDeviceGetCount=lambda: gpus,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=40 * 1024**3, total=141 * 1024**3),
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=87),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetTemperature=lambda h, kind: 61,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetComputeRunningProcesses=lambda h: processes.get(h, []),
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [],
    )


def test_a_sample_is_in_mib_watts_and_percent(monkeypatch):
    calls, nvml = fake_nvml()
    monkeypatch.setattr(telemetry, "pynvml", nvml)
    with telemetry.Nvml() as session:
        sample = session.sample(1)
        assert session.describe(0) == {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"}
    assert (sample.gpu_index, sample.memory_used_mib, sample.memory_total_mib) == (1, 40 * 1024, 141 * 1024)
    assert (sample.utilization_pct, sample.power_w, sample.temperature_c, sample.sm_clock_mhz) == (87.0, 312.5, 61.0, 1980.0)
    assert calls == {"init": 1, "shutdown": 1}


def test_a_reading_the_gpu_does_not_support_is_none_not_zero(monkeypatch):
    monkeypatch.setattr(telemetry, "pynvml", fake_nvml(power_supported=False)[1])
    with telemetry.Nvml() as session:
        assert session.sample(0).power_w is None


def test_busy_gpus_lists_foreign_processes(monkeypatch):
    procs = {1: [SimpleNamespace(pid=4242, usedGpuMemory=2 * 1024**3), SimpleNamespace(pid=77, usedGpuMemory=None)]}
    monkeypatch.setattr(telemetry, "pynvml", fake_nvml(processes=procs)[1])
    busy = telemetry.busy_gpus([0, 1], allowed_pids=[77])
    assert busy == [telemetry.GpuProcess(1, 4242, 2048.0)]
    with pytest.raises(telemetry.NvmlUnavailable, match="GPU 2 does not exist: NVML sees 2 GPU"):
        telemetry.busy_gpus([2])


def nvidia_driver_loaded():
    """Whether this machine runs an NVIDIA kernel driver, seen without NVML: the kernel
    module publishes its version here (in containers given GPUs too)."""
    return Path("/proc/driver/nvidia/version").is_file()


def test_the_real_nvml_reads_the_gpus_where_a_driver_is_loaded_and_says_why_not_elsewhere():
    if not nvidia_driver_loaded():
        # A CPU host, the simulator's machine, a container without GPUs.
        with pytest.raises(telemetry.NvmlUnavailable, match="NVML could not start|not installed"):
            with telemetry.Nvml():
                pass
        return
    # A GPU host, what this tool is for: NVML starts and reads real numbers.
    with telemetry.Nvml() as nvml:
        count = nvml.count()
        assert count >= 1
        gpu = nvml.describe(0)
        assert gpu["index"] == 0 and gpu["name"] and gpu["compute_capability"]
        sample = nvml.sample(count - 1)
        assert sample.gpu_index == count - 1
        assert 0 <= sample.memory_used_mib <= sample.memory_total_mib and sample.memory_total_mib > 0
        assert isinstance(nvml.processes(0), list)
    assert telemetry.busy_gpus([], allowed_pids=[]) == []
    with pytest.raises(telemetry.NvmlUnavailable, match=f"GPU {count} does not exist: NVML sees {count} GPU"):
        telemetry.busy_gpus([count])


def test_the_sampler_hands_batches_to_its_sink_until_stopped(monkeypatch):
    monkeypatch.setattr(telemetry, "pynvml", fake_nvml()[1])
    batches = []
    sampler = telemetry.Sampler([0, 1], batches.append, interval_s=0.01)
    sampler.start()
    deadline = time.monotonic() + 5
    while len(batches) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert not sampler.is_alive() and sampler.error is None
    assert len(batches) >= 3 and [s.gpu_index for s in batches[0]] == [0, 1]


def test_gpu_groups_join_nvlink_peers_and_gpus_under_one_pcie_switch(monkeypatch):
    # An 8-GPU host: 0-3 NVLinked; 4-5 and 6-7 each under one PCIe switch; across, the CPU.
    nvlink = {frozenset(p) for p in [(0, 1), (1, 2), (2, 3), (0, 3)]}
    switch = {frozenset(p) for p in [(4, 5), (6, 7)]}

    def p2p(a, b, index):
        assert index == 2
        return 0 if frozenset((a, b)) in nvlink else 3  # OK / not supported

    def ancestor(a, b):
        return 20 if frozenset((a, b)) in switch else 50  # MULTIPLE / SYSTEM

    _, nvml = fake_nvml(gpus=8)
    nvml.NVML_P2P_CAPS_INDEX_NVLINK, nvml.NVML_P2P_STATUS_OK, nvml.NVML_TOPOLOGY_MULTIPLE = 2, 0, 20
    nvml.nvmlDeviceGetP2PStatus = p2p
    nvml.nvmlDeviceGetTopologyCommonAncestor = ancestor
    monkeypatch.setattr(telemetry, "pynvml", nvml)
    assert telemetry.gpu_groups(8) == [frozenset({4, 5}), frozenset({6, 7}), frozenset({0, 1, 2, 3})]


def test_gpu_groups_say_nothing_when_nvml_cannot_tell(monkeypatch):
    _, nvml = fake_nvml(gpus=4)
    nvml.NVML_P2P_CAPS_INDEX_NVLINK, nvml.NVML_P2P_STATUS_OK, nvml.NVML_TOPOLOGY_MULTIPLE = 2, 0, 20

    def unsupported(*args):
        raise FakeNVMLError("Not Supported")

    nvml.nvmlDeviceGetP2PStatus = nvml.nvmlDeviceGetTopologyCommonAncestor = unsupported
    monkeypatch.setattr(telemetry, "pynvml", nvml)
    assert telemetry.gpu_groups(4) == []
