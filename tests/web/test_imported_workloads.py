"""What an import makes cannot decide what a host runs or reads: its engine (an empty command
line) is not offered nor launched, and its workload's dataset path, the uploaded file's word,
is read only inside the host's data roots (sweepcore.files, issue 33)."""

import json

from django.contrib.auth.models import Group, User
from django.urls import reverse

from benchmarks.catalog import load_catalog
from benchmarks.models import Engine, Host, Sweep, Workload
from runs.imports import import_file
from runs.lifecycle import create_sweep, launch_refusal
from runs.models import ApiToken
from runs.tokens import new_token
from sweepcore.spec import validate
from tests.import_samples import vllm_detailed

SPEC = {"name": "on-an-upload", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1], "methods": ["autoregressive"]}


def operator_token():
    user = User.objects.create_user("otto", password="pw-otto-12345")
    user.groups.add(Group.objects.get(name="operator"))
    token, digest = new_token()
    ApiToken.objects.create(user=user, name="ci", prefix=token[:12], key_hash=digest)
    return user, {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_an_imported_files_dataset_path_is_information_until_a_host_roots_it(catalog, client):
    text = vllm_detailed(20, dataset_name="uploaded-set", dataset_path="/etc/shadow")
    import_file("bench.json", text.encode(), host="sim-8x-rtxpro6000", model="Qwen/Qwen3.6-27B")
    workload = Workload.objects.get(name="uploaded-set")
    assert (workload.kind, workload.dataset_path, workload.imported) == ("dataset", "/etc/shadow", True)
    _, auth = operator_token()
    spec = {**SPEC, "workloads": ["uploaded-set"]}
    refused = client.post("/api/sweeps", json.dumps(spec), content_type="application/json", **auth)
    assert refused.status_code == 400
    assert refused.json()["errors"] == [{
        "path": "workloads[0]",
        "message": "workload 'uploaded-set' was made by an import: its dataset path is information only, outside "
                   "host 'sim-8x-rtxpro6000''s data roots (none are set); an admin sets a host's data roots, or "
                   "makes the workload",
    }]
    assert not Sweep.objects.filter(name="on-an-upload").exists()
    Host.objects.filter(name="sim-8x-rtxpro6000").update(data_roots=["/etc"])  # the host's admin chose so
    accepted = client.post("/api/sweeps", json.dumps(spec), content_type="application/json", **auth)
    assert accepted.status_code == 201, accepted.content


def test_an_engine_an_import_made_is_neither_offered_nor_launched(catalog, client):
    Engine.objects.filter(kind="vllm").delete()  # the demo's CPU vLLM engine: the import makes its own
    import_file("bench.json", vllm_detailed(20).encode(), host="sim-8x-rtxpro6000", model="Qwen/Qwen3.6-27B")
    assert Engine.objects.get(kind="vllm").name == "imported-vllm"
    operator, auth = operator_token()
    client.force_login(operator)
    page = client.get(reverse("sweep-new")).content.decode()
    assert 'value="sglang-sim"' in page and "imported-vllm" not in page
    refused = client.post("/api/sweeps", json.dumps({**SPEC, "workloads": ["fibonacci"], "engine": "imported-vllm"}),
                          content_type="application/json", **auth)
    assert refused.status_code == 400
    assert refused.json()["errors"] == [{
        "path": "engine",
        "message": "engine 'imported-vllm' has no command line to launch (an import made it to file results); an "
                   "admin gives it one, or pick another engine",
    }]
    # A draft made before its engine lost its command line is refused at launch, saying why.
    sweep, _ = create_sweep(validate({**SPEC, "workloads": ["fibonacci"]}, load_catalog()))
    Engine.objects.filter(name="sglang-sim").update(argv_template=[])
    assert launch_refusal(Sweep.objects.get(pk=sweep.pk)) == ("engine 'sglang-sim' has no command line to launch (an import made it to file "
                                     "results); an admin gives it one, or pick another engine")
    launched = client.post(f"/api/sweeps/{sweep.pk}/launch", **auth)
    assert launched.status_code == 409 and "no command line" in launched.json()["detail"]
    sweep.refresh_from_db()
    assert sweep.status == "draft"
