"""The sweep builder drawn by the server: the form, the edits htmx posts back, the plan
preview partial with its errors placed on their fields."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.models import Sweep
from sweepcore import capacity
from sweepcore.spec import load_yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"


@pytest.fixture
def operator(catalog, make_user, client):
    """otto, logged in."""
    user = make_user("otto", "operator")
    client.force_login(user)
    return user


class FormValues(HTMLParser):
    """What a browser posts for the builder as drawn: text and hidden inputs, ticked boxes,
    selected options, the textarea (disabled or nameless controls are not drawn here)."""

    def __init__(self, html):
        super().__init__()
        self.values, self._select, self._textarea = [], None, None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and "name" in a and (a.get("type") != "checkbox" or "checked" in a):
            self.values.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and "selected" in a:
            self.values.append((self._select, a["value"]))
        elif tag == "textarea":
            self._textarea = a["name"]
            self.values.append((a["name"], ""))

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            name, text = self.values.pop()
            self.values.append((name, text + data))


def posted(html, **changes):
    """The builder's values as a browser posts them, with some changed (a list: ticked boxes)."""
    values = [(k, v) for k, v in FormValues(html).values if k not in changes and k != "csrfmiddlewaretoken"]
    for key, value in changes.items():
        values += [(key, v) for v in value] if isinstance(value, list) else [(key, value)]
    data = {}
    for key, value in values:
        data.setdefault(key, []).append(value)
    return data


def builder(client, **query):
    return client.get(reverse("sweep-new"), query).content.decode()


def preview(client, values):
    """The preview partial for the builder's values, as htmx posts them on every edit."""
    return client.post(reverse("sweep-builder-preview"), values).content.decode()


def edit(client, values):
    """The builder drawn again after an edit that changes it."""
    return client.post(reverse("sweep-builder-edit"), values).content.decode()


def builder_from(client, data):
    """The builder drawn for some data."""
    return edit(client, {"editor": "form", "spec_json": json.dumps(data)})


def slot(html, slot_id):
    """The inside of one error slot."""
    m = re.search(rf'<div class="field-errors" id="{re.escape(slot_id)}"[^>]*>(.*?)</div>', html, re.S)
    assert m, f"no slot {slot_id}"
    return m.group(1)


def test_the_form_is_drawn_by_the_server_with_the_plan_of_the_example(operator, client):
    html = builder(client)
    assert 'id="f-name" name="f-name" value="qwen3.6-27b-sm120-ddtree"' in html
    assert re.search(r'id="f-tp-4" value="4" checked', html) and re.search(r'id="f-tp-2" value="2">', html)
    assert 'id="f-method-2-budget" name="f-method-2-budget" value="8, 12, 15, 16, 32, 64"' in html
    assert 'id="f-exclude-0" name="f-exclude-0" value="method=ddtree budget=64 tp=1"' in html
    assert 'id="tab-form" aria-controls="spec-form" aria-selected="true"' in html
    # The plan preview is on the page already, with the cap's skips and no estimate yet.
    assert "<h2>23 runs, 161 points (23 skipped)</h2>" in html
    assert "long-context 32700 tokens x1 in 23 run(s)" in html and "No estimate of the duration yet" in html
    assert html.count('<span class="badge r-planned">') == 23
    # The YAML view holds the example as written, comments and all.
    assert "# Qwen3.6-27B on an 8x RTX PRO 6000" in html


def test_a_typed_value_brings_the_preview_back_with_its_errors_on_the_fields(operator, client):
    html = builder(client)
    answer = preview(client, posted(html, **{"f-method-2-budget": "8, x", "f-tp": ["1", "16"]}))
    assert "Fix the errors to see the plan." in answer
    # Each error goes out of band to the field it names, or to the nearest field above it.
    assert "expected a list of positive integers, got &#x27;8, x&#x27;" in slot(answer, "fe-methods-2-ddtree-budget")
    assert "<code>tp[1]</code> 16 is more than host" in slot(answer, "fe-tp")
    assert slot(answer, "fe-name") == "" and 'hx-swap-oob="true"' in answer
    assert re.search(r'<ul class="errors" id="spec-errors" hx-swap-oob="true">\s*</ul>', answer)
    fixed = preview(client, posted(html, **{"f-method-2-budget": "8, 15", "f-tp": ["1"]}))
    assert "<h2>4 runs, 28 points (4 skipped)</h2>" in fixed and slot(fixed, "fe-methods-2-ddtree-budget") == ""


def test_the_yaml_view_sends_its_text_and_its_errors_are_listed(operator, client):
    text = EXAMPLE.read_text().replace("tp: [1, 4, 8]", "tp: [1, 16]")
    answer = preview(client, {"editor": "yaml", "spec_yaml": text})
    assert "<li><code>tp[1]</code> 16 is more than host" in answer and "fe-" not in answer
    broken = preview(client, {"editor": "yaml", "spec_yaml": "name: [\n"})
    assert "The YAML does not parse: fix it to see the plan." in broken and "malformed YAML" in broken


def test_fields_left_alone_keep_the_data_as_written(operator, client):
    html = builder(client)
    base = json.loads(posted(html)["spec_json"][0])
    # The JSON preview reads the same post: an untouched form gives back the data it was drawn from.
    same = client.post(reverse("sweep-plan-preview"), posted(html)).json()
    assert same["data"] == base
    odd = {**base, "x-note": "kept", "concurrency": "1, two"}
    drawn = builder_from(client, odd)
    changed = client.post(reverse("sweep-plan-preview"), posted(drawn, **{"f-max_new_tokens": "64"})).json()
    assert changed["data"] == {**odd, "max_new_tokens": 64}
    assert list(changed["data"])[:3] == ["name", "host", "engine"]


def test_edits_that_change_the_form_draw_it_again(operator, client):
    html = builder(client)
    html = edit(client, posted(html, op="remove", list="methods", index="1", **{"f-method-2-budget": "8, 15"}))
    assert 'id="f-method-1-budget" name="f-method-1-budget" value="8, 15"' in html and "f-method-2" not in html
    assert html.count('class="form-row method-row"') == 2 and "block_size" not in html
    html = edit(client, posted(html, op="add", list="workloads"))
    assert 'aria-label="Workload 3"' in html
    # A method renamed gets the new method's parameters, with their defaults.
    html = edit(client, posted(html, **{"f-method-0": "ddtree"}))
    assert 'id="f-method-0-topk_cap" name="f-method-0-topk_cap" value="8"' in html
    assert 'id="f-method-0-budget" name="f-method-0-budget" value=""' in html
    required = '<p class="field-error">required (a list of positive integers)</p>'
    assert slot(html, "fe-methods-0-ddtree-budget") == required


def test_the_two_views_show_the_same_spec(operator, client):
    html = builder(client)
    # Nothing changed: the YAML view keeps the text as written.
    yaml_view = edit(client, posted(html, op="editor", to="yaml"))
    assert "# Qwen3.6-27B on an 8x RTX PRO 6000" in yaml_view and 'id="spec-form"' in yaml_view
    assert 'aria-selected="true"' in yaml_view.split('id="tab-yaml"')[1][:80] and "f-name" not in yaml_view
    # A change made in the form: the YAML view shows the data's own text.
    changed = edit(client, posted(html, op="editor", to="yaml", **{"f-max_new_tokens": "64"}))
    text = posted(changed)["spec_yaml"][0]
    assert "max_new_tokens: 64" in text and "#" not in text
    # Back to the form from a YAML edit; a text that does not parse keeps the YAML view.
    back = edit(client, posted(changed, op="editor", to="form", spec_yaml=text.replace("64", "32")))
    assert 'id="f-max_new_tokens" name="f-max_new_tokens" value="32"' in back
    stuck = edit(client, posted(changed, op="editor", to="form", spec_yaml="name: [\n"))
    assert "f-name" not in stuck and "The YAML must parse before the form can show it." in stuck


def _quarantine_budget_8():
    from django.utils import timezone

    from benchmarks.models import LLM, Engine, Host, KnownFailure

    host = Host.objects.get(name="sim-8x-rtxpro6000")
    KnownFailure.objects.create(
        engine_kind=Engine.objects.get(name="sglang-sim").kind, llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"),
        compute_capability=host.compute_capability, method="ddtree", params={"budget": 8, "topk_cap": 8}, tp=1,
        failure_kind="cuda_illegal_instruction", signature="an illegal instruction was encountered", active=True,
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )


@pytest.mark.parametrize("view", ["form", "yaml"])
def test_retry_anyway_ticked_in_the_plan_edits_the_spec(operator, client, view):
    _quarantine_budget_8()
    html = builder(client)
    if view == "yaml":
        html = edit(client, posted(html, op="editor", to="yaml"))
    assert html.count("(skipped)</span>") == 1 and html.count(" retry anyway</label>") == 1
    rule = {"method": "ddtree", "budget": 8, "topk_cap": 8, "tp": 1}
    ticked = edit(client, posted(html, op="retry", retry=[json.dumps(rule)]))
    assert "(will run)" in ticked
    text = posted(ticked)["spec_yaml"][0]
    assert load_yaml(text)["options"]["retry_quarantined"] == [rule]
    if view == "form":
        assert re.search(r'<option value="some" selected>', ticked)
    unticked = edit(client, posted(ticked, op="retry", retry=[]))
    assert "retry_quarantined" not in posted(unticked)["spec_yaml"][0] and "(skipped)" in unticked


def test_the_form_as_drawn_saves_the_sweep_it_shows(operator, client):
    html = builder(client)
    response = client.post(reverse("sweep-new"), posted(html, action="draft", **{"f-name": "drawn", "f-tp": ["1"]}))
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and sweep.name == "drawn" and sweep.spec["tp"] == [1]
    assert sweep.spec["methods"][2] == {"ddtree": {"budget": [8, 12, 15, 16, 32, 64], "topk_cap": 8}}


def test_the_builder_partials_take_what_the_builder_takes(catalog, make_user):
    viewer = make_user("vera", "viewer")
    client = Client()
    client.force_login(viewer)
    for name in ("sweep-builder-preview", "sweep-builder-edit"):
        assert client.post(reverse(name), {"editor": "yaml", "spec_yaml": "x"}).status_code == 403
    operator = make_user("otto", "operator")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    for name in ("sweep-builder-preview", "sweep-builder-edit"):
        assert strict.get(reverse(name)).status_code == 405
        assert strict.post(reverse(name), {"editor": "yaml", "spec_yaml": EXAMPLE.read_text()}).status_code == 403
    # With the page's token, as htmx posts it from the form.
    page = strict.get(reverse("sweep-new")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    ok = strict.post(reverse("sweep-builder-preview"), {**posted(page), "csrfmiddlewaretoken": token})
    assert ok.status_code == 200 and "23 runs, 161 points" in ok.content.decode()


def test_repeats_and_until_stable_are_set_in_the_form_and_their_errors_shown_on_their_fields(operator, client):
    html = builder(client)
    assert 'id="f-repeats"' in html and 'id="f-until_stable-metric"' in html
    changes = {"f-repeats": "3", "f-until_stable-metric": "decode_tok_s", "f-until_stable-rel_ci": "0.05",
               "f-until_stable-min_requests": "5", "f-until_stable-max_requests": "40"}
    data = client.post(reverse("sweep-plan-preview"), posted(html, **changes)).json()
    assert data["valid"], data["errors"]
    assert data["data"]["repeats"] == 3
    assert data["data"]["until_stable"] == {"metric": "decode_tok_s", "rel_ci": 0.05, "min_requests": 5,
                                            "max_requests": 40}
    # Drawn again from that data: the values show; turned off, the rule is gone.
    drawn = builder_from(client, data["data"])
    assert 'id="f-until_stable-max_requests" name="f-until_stable-max_requests" value="40"' in drawn
    off = client.post(reverse("sweep-plan-preview"), posted(drawn, **{"f-until_stable-metric": ""})).json()
    assert "until_stable" not in off["data"] and off["valid"]
    # A bad bound: the validator's message on the field it names.
    bad = preview(client, posted(drawn, **{"f-until_stable-max_requests": "2", "f-repeats": "0"}))
    assert "expected at least min_requests (5), got 2" in slot(bad, "fe-until_stable-max_requests")
    assert "expected a positive integer, got 0" in slot(bad, "fe-repeats")


def test_an_ngram_lookup_window_left_empty_takes_the_methods_defaults(operator, client):
    html = builder_from(client, {"name": "ngram", "host": "local-cpu", "engine": "vllm-cpu",
                                 "model": "SmolLM2-135M-Instruct-hf", "methods": ["autoregressive", "ngram"],
                                 "workloads": ["code-edit"]})
    # Its default in the empty field's placeholder, not an example of a list.
    assert re.search(r'id="f-method-1-prompt_lookup_max"[^>]*placeholder="4"', html)
    answer = preview(client, posted(html, **{"f-method-1-num_speculative_tokens": "2, 4",
                                             "f-method-1-prompt_lookup_max": "", "f-method-1-prompt_lookup_min": ""}))
    assert "<h2>3 runs, 3 points (0 skipped)</h2>" in answer, answer[:2000]
    assert "ngram num_speculative_tokens=4 prompt_lookup_max=4 prompt_lookup_min=2 TP1" in answer


# --- a host or engine that cannot run everything the spec asks --------------------------


def notes(html):
    """The notes of what the builder took out by itself."""
    return re.findall(r'<p class="field-note" role="status">(.*?)</p>', html)


def field_errors(html):
    return re.findall(r'<p class="field-error">(.*?)</p>', html)


def test_switching_to_the_cpu_host_keeps_tp_1_and_says_why(operator, client):
    html = builder(client)
    cpu = edit(client, posted(html, **{"f-host": "local-cpu"}))
    # TP 4 and 8 are gone from the data and from the choices, with a note at the field.
    assert json.loads(posted(cpu)["spec_json"][0])["tp"] == [1]
    assert re.search(r'id="f-tp-1" value="1" checked', cpu) and "f-tp-4" not in cpu and "f-tp-8" not in cpu
    assert notes(cpu) == ["removed TP4, TP8: a CPU host runs one server process per run, at TP 1"]
    assert '<span class="hint">TP 1 only on a CPU host</span>' in cpu
    assert '<span class="hint">CPU host, no GPUs</span>' in cpu and "0 ×" not in cpu and "GPU(s)" not in cpu
    # The plan is valid at once, and everything else is as it was.
    assert field_errors(cpu) == [] and "<h2>7 runs, 49 points (7 skipped)</h2>" in cpu
    assert 'id="f-method-2-budget" name="f-method-2-budget" value="8, 12, 15, 16, 32, 64"' in cpu
    assert 'id="f-exclude-0" name="f-exclude-0" value="method=ddtree budget=64 tp=1"' in cpu
    assert 'id="f-name" name="f-name" value="qwen3.6-27b-sm120-ddtree"' in cpu
    # The note is said once: the next edit draws the form without it.
    assert notes(edit(client, posted(cpu, op="add", list="workloads"))) == []


def test_switching_to_an_engine_removes_the_methods_it_cannot_run_and_says_why(operator, client):
    html = builder(client)
    cpu = edit(client, posted(html, **{"f-host": "local-cpu"}))
    llama = edit(client, posted(cpu, **{"f-engine": "llamacpp-cpu"}))
    data = json.loads(posted(llama)["spec_json"][0])
    assert data["methods"] == ["autoregressive"] and 'aria-label="Method 2"' not in llama
    assert notes(llama) == ["removed dflash, ddtree: llama.cpp cannot run them"]
    assert field_errors(llama) == [] and "<h2>1 runs, 7 points (1 skipped)</h2>" in llama
    assert data["workloads"] == json.loads(posted(html)["spec_json"][0])["workloads"]
    assert '<span class="hint">llama.cpp</span>' in llama
    # vLLM runs DFlash: only DDTree goes, and the DFlash block size stays.
    vllm = edit(client, posted(html, **{"f-engine": "vllm-cpu"}))
    assert notes(vllm) == ["removed ddtree: vLLM cannot run it"]
    assert 'id="f-method-1-block_size" name="f-method-1-block_size" value="16"' in vllm


def test_the_host_and_engine_changed_in_one_post_preview_a_valid_plan(operator, client):
    # What htmx's "input" post of the form sends while the builder is being drawn again.
    answer = preview(client, posted(builder(client), **{"f-host": "local-cpu", "f-engine": "llamacpp-cpu"}))
    assert "<h2>1 runs, 7 points (1 skipped)</h2>" in answer and field_errors(answer) == []
    data = data_of(client, posted(builder(client), **{"f-host": "local-cpu", "f-engine": "llamacpp-cpu"}))
    assert data["valid"] and data["data"]["tp"] == [1] and data["data"]["methods"] == ["autoregressive"]


def test_an_engine_that_runs_none_of_the_methods_gets_autoregressive(operator, client):
    html = builder_from(client, {**ONE_SHAPE, "methods": [{"ddtree": {"budget": [8], "topk_cap": 8}}]})
    llama = edit(client, posted(html, **{"f-engine": "llamacpp-cpu"}))
    assert json.loads(posted(llama)["spec_json"][0])["methods"] == ["autoregressive"]
    assert notes(llama) == ["removed ddtree: llama.cpp cannot run it; autoregressive instead"]
    assert field_errors(llama) == []


def test_an_engine_not_set_up_for_a_method_its_kind_runs_says_so(operator, client):
    from benchmarks.models import Engine, EngineKind

    Engine.objects.create(name="sglang-plain", kind=EngineKind.SGLANG, argv_template=["sglang"], method_args={})
    plain = edit(client, posted(builder(client), **{"f-engine": "sglang-plain"}))
    assert notes(plain) == ["removed dflash, ddtree: engine sglang-plain is not set up to run them"]


def test_a_smaller_gpu_host_keeps_the_sizes_it_has_in_correct_plurals(operator, client):
    from benchmarks.models import Host

    Host.objects.create(name="box-4", gpu_model="NVIDIA H200", gpu_count=4, compute_capability="9.0")
    Host.objects.create(name="box-1", gpu_model="NVIDIA H200", gpu_count=1, compute_capability="9.0")
    html = builder(client)
    assert "<span class=\"hint\">up to the host&#x27;s 8 GPUs</span>" in html
    assert "<span class=\"hint\">8 × NVIDIA RTX PRO 6000 Blackwell</span>" in html
    four = edit(client, posted(html, **{"f-host": "box-4"}))
    assert json.loads(posted(four)["spec_json"][0])["tp"] == [1, 4]
    assert notes(four) == ["removed TP8: host box-4 has 4 GPUs"]
    assert "<span class=\"hint\">4 × NVIDIA H200</span>" in four
    one = edit(client, posted(html, **{"f-host": "box-1"}))
    assert notes(one) == ["removed TP4, TP8: host box-1 has 1 GPU"]
    assert "<span class=\"hint\">up to the host&#x27;s 1 GPU</span>" in one
    # A spec at TP8 only keeps a size: the largest the host has.
    eight = builder_from(client, {**ONE_SHAPE, "tp": [8]})
    assert json.loads(posted(edit(client, posted(eight, **{"f-host": "box-4"})))["spec_json"][0])["tp"] == [4]
    assert notes(edit(client, posted(eight, **{"f-host": "box-4"}))) == [
        "removed TP8: host box-4 has 4 GPUs; TP4 instead"]


def test_a_host_left_as_it_was_changes_nothing_of_the_spec(operator, client):
    # TP sizes the host cannot give, typed in the YAML view, stay for the validator to name.
    html = builder_from(client, {**ONE_SHAPE, "host": "local-cpu", "tp": [1, 4]})
    answer = preview(client, posted(html, **{"f-max_new_tokens": "64"}))
    assert "4 is more than host &#x27;local-cpu&#x27; has" in slot(answer, "fe-tp")


# --- the load, the SLO and the capacity search ------------------------------------------

ONE_SHAPE = {"name": "load", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
             "tp": [1], "methods": ["autoregressive"], "workloads": ["fibonacci"]}
OPEN = {**ONE_SHAPE, "request_rate": [0.5, 1, 2.5], "burstiness": 0.5, "max_concurrency": 32, "duration_s": 30,
        "slo": {"ttft_p99_ms": 2000, "tpot_p99_ms": 200}, "options": {"cooldown_s": 0.5}}
SEARCH = {**ONE_SHAPE, "slo": {"ttft_p99_ms": 2000, "tpot_p99_ms": 200},
          "search": {"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 64}}}


def data_of(client, values):
    """The JSON preview of the builder's values: the spec data they make, and its errors."""
    return client.post(reverse("sweep-plan-preview"), values).json()


def selected(html, control_id):
    m = re.search(rf'<select id="{control_id}".*?<option value="([^"]*)" selected>', html, re.DOTALL)
    return m and m.group(1)


def test_an_open_loop_and_its_slo_are_drawn_from_the_spec(operator, client):
    html = builder_from(client, OPEN)
    assert selected(html, "f-loop") == "open" and 'id="f-concurrency"' not in html
    assert 'id="f-request_rate" name="f-request_rate" value="0.5, 1, 2.5"' in html
    assert 'id="f-burstiness" name="f-burstiness" value="0.5"' in html
    assert 'id="f-max_concurrency" name="f-max_concurrency" value="32"' in html
    assert 'id="f-duration_s" name="f-duration_s" value="30"' in html
    assert 'id="f-option-cooldown_s" name="f-option-cooldown_s" value="0.5"' in html
    # One row per limit: the latency and percentile as a choice, the milliseconds as a number.
    assert selected(html, "f-slo-0") == "ttft_p99_ms" and selected(html, "f-slo-1") == "tpot_p99_ms"
    assert '<option value="ttft_p99_ms" selected>p99 TTFT (ms)</option>' in html
    assert 'id="f-slo-0-ms" name="f-slo-0-ms" value="2000"' in html and 'value="200"' in html
    # A latency another row limits is not offered again.
    row_1 = html.split('id="f-slo-1"')[1].split("</select>")[0]
    assert "ttft_p99_ms" not in row_1 and "e2el_p90_ms" in row_1
    assert selected(html, "f-search-metric") == "" and 'id="f-search-low"' not in html
    assert "<h2>1 runs, 3 points (0 skipped)</h2>" in html


def test_a_closed_loop_is_drawn_without_the_open_loops_fields(operator, client):
    html = builder(client)
    assert selected(html, "f-loop") == "closed" and 'id="f-concurrency" name="f-concurrency" value="1"' in html
    assert not any(f'id="f-{key}"' in html for key in ("request_rate", "burstiness", "max_concurrency"))
    assert '<legend>SLO</legend>' in html and 'id="f-slo-0"' not in html and "+ Add limit" in html


def test_load_and_slo_edits_write_the_data(operator, client):
    html = builder_from(client, OPEN)
    data = data_of(client, posted(html, **{
        "f-request_rate": "1, 2", "f-burstiness": "", "f-max_concurrency": "64", "f-duration_s": "12.5",
        "f-slo-0": "e2el_p90_ms", "f-slo-0-ms": "9000", "f-slo-1-ms": "150.5", "f-option-cooldown_s": "1"}))
    assert data["valid"], data["errors"]
    unchanged = {k: v for k, v in OPEN.items() if k != "burstiness"}  # emptied: the default
    assert data["data"] == {**unchanged, "request_rate": [1, 2], "max_concurrency": 64, "duration_s": 12.5,
                            "slo": {"e2el_p90_ms": 9000, "tpot_p99_ms": 150.5}, "options": {"cooldown_s": 1}}
    # Fields left alone write nothing: the spec's own 2000.0 stays a float where it was one.
    normalised = {**OPEN, "slo": {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 200.0}}
    drawn = builder_from(client, normalised)
    assert 'id="f-slo-0-ms" name="f-slo-0-ms" value="2000"' in drawn
    assert data_of(client, posted(drawn))["data"] == normalised


def test_bad_load_and_slo_values_come_back_at_their_fields(operator, client):
    html = builder_from(client, OPEN)
    answer = preview(client, posted(html, **{
        "f-request_rate": "1, x", "f-burstiness": "0", "f-max_concurrency": "1.5", "f-duration_s": "nan",
        "f-slo-1-ms": "0", "f-option-cooldown_s": "-1"}))
    assert "expected a list of positive numbers (requests per second), got &#x27;1, x&#x27;" in slot(
        answer, "fe-request_rate")
    assert "expected a positive number, got 0" in slot(answer, "fe-burstiness")
    assert "expected a positive integer, got &#x27;1.5&#x27;" in slot(answer, "fe-max_concurrency")
    assert "expected a positive number, got &#x27;nan&#x27;" in slot(answer, "fe-duration_s")
    assert "expected a positive number of milliseconds, got 0" in slot(answer, "fe-slo-tpot_p99_ms")
    assert "expected a number of seconds &gt;= 0, got -1" in slot(answer, "fe-options-cooldown_s")
    assert re.search(r'<ul class="errors" id="spec-errors" hx-swap-oob="true">\s*</ul>', answer)


def test_switching_loops_leaves_no_key_of_the_other_loop(operator, client):
    html = builder_from(client, {**ONE_SHAPE, "concurrency": [1, 4]})
    opened = edit(client, posted(html, **{"f-loop": "open"}))
    data = json.loads(posted(opened)["spec_json"][0])
    assert "concurrency" not in data and data["request_rate"] == []
    # No rate is made up: the empty list is for the user to fill, and the validator asks for it.
    assert 'id="f-request_rate" name="f-request_rate" value=""' in opened and 'id="f-concurrency"' not in opened
    assert "expected a list of positive numbers (requests per second), got an empty list" in slot(
        opened, "fe-request_rate")
    typed = posted(opened, **{"f-request_rate": "2, 4", "f-burstiness": "0.8", "f-max_concurrency": "16"})
    assert data_of(client, typed)["valid"]
    # Emptied again, the field keeps the open loop (and says what it needs).
    assert data_of(client, posted(opened, **{"f-request_rate": ""}))["data"]["request_rate"] == []
    closed = edit(client, {**typed, "f-loop": ["closed"]})
    data = json.loads(posted(closed)["spec_json"][0])
    assert not set(data) & {"request_rate", "burstiness", "max_concurrency"} and "concurrency" not in data
    assert 'id="f-concurrency" name="f-concurrency" value=""' in closed and "<h2>1 runs, 1 points" in closed


def test_a_switch_keeps_what_belongs_to_neither_loop(operator, client):
    # until_stable stops a closed loop only: switching does not drop it, the validator says so at it.
    html = builder(client)
    opened = edit(client, posted(html, **{"f-loop": "open"}))
    assert 'id="f-until_stable-max_requests" name="f-until_stable-max_requests" value="40"' in opened
    answer = preview(client, posted(opened, **{"f-request_rate": "1, 2"}))
    assert "stops a closed loop once its figure is stable" in slot(answer, "fe-until_stable")


def test_the_slo_limits_are_added_and_removed(operator, client):
    html = builder_from(client, ONE_SHAPE)
    html = edit(client, posted(html, op="add", list="slo"))
    assert selected(html, "f-slo-0") == "ttft_p99_ms" and 'id="f-slo-0-ms" name="f-slo-0-ms" value=""' in html
    assert "expected a positive number of milliseconds, got nothing" in slot(html, "fe-slo-ttft_p99_ms")
    html = edit(client, posted(html, op="add", list="slo", **{"f-slo-0-ms": "1500"}))
    assert selected(html, "f-slo-1") == "tpot_p99_ms" and 'id="f-slo-0-ms" name="f-slo-0-ms" value="1500"' in html
    # Renamed and given its number in one post: the number goes with the row.
    html = edit(client, posted(html, **{"f-slo-1": "itl_p90_ms", "f-slo-1-ms": "80"}))
    assert json.loads(posted(html)["spec_json"][0])["slo"] == {"ttft_p99_ms": 1500, "itl_p90_ms": 80}
    html = edit(client, posted(html, op="remove", list="slo", index="0"))
    assert json.loads(posted(html)["spec_json"][0])["slo"] == {"itl_p90_ms": 80}
    html = edit(client, posted(html, op="remove", list="slo", index="0"))
    assert "slo" not in json.loads(posted(html)["spec_json"][0])
    # A key the spec does not know still shows, with the validator's guess at it.
    odd = builder_from(client, {**ONE_SHAPE, "slo": {"p99_ttft_ms": 2000}})
    assert selected(odd, "f-slo-0") == "p99_ttft_ms"
    assert "did you mean &#x27;ttft_p99_ms&#x27;?" in slot(odd, "fe-slo-p99_ttft_ms")


def test_a_search_is_drawn_from_the_spec_and_the_preview_says_what_each_run_does(operator, client):
    html = builder_from(client, SEARCH)
    assert selected(html, "f-search-metric") == "request_rate" and 'id="f-loop"' not in html
    assert 'id="f-search-low" name="f-search-low" value="0.25"' in html
    assert 'id="f-search-high" name="f-search-high" value="64"' in html
    assert re.search(r'id="f-search-resolution" name="f-search-resolution" value="" placeholder="0.1"', html)
    # The loads are the search's: no list, the open loop's own fields still there.
    assert "The capacity search picks the request rates" in html and 'id="f-request_rate"' not in html
    assert 'id="f-burstiness"' in html and 'id="f-concurrency"' not in html
    # saturation and max_probes are folded away while they hold nothing.
    assert '<details class="advanced"><summary>Advanced</summary>' in html and 'id="f-search-max_probes"' in html
    assert "<h2>1 runs, each a capacity search</h2>" in html and "0 points" not in html
    assert ("Capacity search over request rate 0.25–64 req/s, up to 12 probes per run (doubling from 0.25 while "
            "the SLO holds, then bisecting to within 10 %).") in html
    assert '<td class="num">up to 12</td>' in html
    fewer = preview(client, posted(html, **{"f-search-max_probes": "5", "f-search-resolution": "0.2"}))
    assert "up to 5 probes per run" in fewer and "within 20 %" in fewer
    over_concurrency = builder_from(client, {**SEARCH, "search": {"max_goodput": {
        "metric": "concurrency", "low": 1, "high": 128, "resolution": 2, "max_probes": 30}}})
    assert '<details class="advanced" open>' in over_concurrency
    bound = capacity.search_probes_bound(capacity.SearchSpec("concurrency", 1, 128, 2, max_probes=30))
    assert f"Capacity search over concurrency 1–128, up to {bound} probes per run" in over_concurrency
    assert "then bisecting to within 2)" in over_concurrency


def test_turning_a_search_on_and_off(operator, client):
    html = builder_from(client, {**OPEN, "duration_s": 30})
    on = edit(client, posted(html, **{"f-search-metric": "request_rate", "f-burstiness": "0.7"}))
    data = json.loads(posted(on)["spec_json"][0])
    # The search picks the rates: the list goes; the open loop's burstiness typed meanwhile stays.
    assert "request_rate" not in data and data["burstiness"] == 0.7 and data["max_concurrency"] == 32
    assert data["search"] == {"max_goodput": {"metric": "request_rate"}}
    assert "required (as in {metric: request_rate, low: 0.25, high: 64})" in slot(on, "fe-search-max_goodput-low")
    filled = posted(on, **{"f-search-low": "0.5", "f-search-high": "32"})
    assert data_of(client, filled)["valid"]
    # Over concurrency, a closed loop: the open loop's keys go, the bounds typed stay for the validator.
    closed = edit(client, {**filled, "f-search-metric": ["concurrency"]})
    data = json.loads(posted(closed)["spec_json"][0])
    assert not set(data) & {"burstiness", "max_concurrency", "request_rate", "concurrency"}
    assert data["search"]["max_goodput"] == {"metric": "concurrency", "low": 0.5, "high": 32}
    assert "expected a positive integer (a concurrency), got 0.5" in slot(closed, "fe-search-max_goodput-low")
    # Off again after a search over rates: still an open loop, its rates to be listed.
    off = edit(client, {**filled, "f-search-metric": [""]})
    data = json.loads(posted(off)["spec_json"][0])
    assert "search" not in data and data["request_rate"] == [] and data["burstiness"] == 0.7
    assert selected(off, "f-loop") == "open"


def test_search_mistakes_come_back_at_their_fields(operator, client):
    html = builder_from(client, SEARCH)
    answer = preview(client, posted(html, **{"f-search-high": "0.1", "f-search-max_probes": "1"}))
    assert "expected more than low (0.25), got 0.1" in slot(answer, "fe-search-max_goodput-high")
    assert "expected an integer &gt;= 2, got 1" in slot(answer, "fe-search-max_goodput-max_probes")
    no_slo = builder_from(client, {k: v for k, v in SEARCH.items() if k != "slo"})
    assert "give slo too" in slot(no_slo, "fe-search")
    two = builder_from(client, {**SEARCH, "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [3000]}}]})
    assert "runs on one workload at one prompt length; this spec has 2" in slot(two, "fe-search")
    # A list the search would pick shows, to be emptied where the validator says so.
    stale = builder_from(client, {**SEARCH, "request_rate": [1, 2]})
    assert "the search picks the request rates" in slot(stale, "fe-request_rate")
    assert data_of(client, posted(stale, **{"f-request_rate": ""}))["valid"]
    both = builder_from(client, {**OPEN, "concurrency": [4]})
    assert "not both" in slot(both, "fe-concurrency")
    assert data_of(client, posted(both, **{"f-concurrency": ""}))["valid"]


def test_a_spec_with_every_load_field_survives_form_yaml_form(operator, client, catalog):
    from benchmarks.catalog import load_catalog
    from sweepcore.spec import validate

    full = {**SEARCH, "max_concurrency": 48, "burstiness": 0.5, "duration_s": 20,
            "search": {"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 64, "resolution": 0.05,
                                       "saturation": 0.1, "max_probes": 16}},
            "options": {"cooldown_s": 0.5, "retries": 1}}
    normalised = validate(full, load_catalog()).to_dict()  # what a stored sweep's spec holds (clone)
    for data in (full, normalised):
        form = builder_from(client, data)
        assert data_of(client, posted(form))["data"] == data
        yaml_view = edit(client, posted(form, op="editor", to="yaml"))
        text = posted(yaml_view)["spec_yaml"][0]
        assert load_yaml(text) == data
        again = edit(client, posted(yaml_view, op="editor", to="form"))
        fields = {k: v for k, v in posted(form).items() if k.startswith("f-")}
        assert {k: v for k, v in posted(again).items() if k.startswith("f-")} == fields
        assert data_of(client, posted(again))["valid"]


def test_the_steady_state_shares_are_drawn_written_and_checked_at_their_fields(operator, client):
    html = builder_from(client, {**ONE_SHAPE, "steady_state": {"skip_first": 0.2}})
    assert 'id="f-steady_state-skip_first" name="f-steady_state-skip_first" value="0.2"' in html
    data = data_of(client, posted(html, **{"f-steady_state-skip_first": "0.25", "f-steady_state-skip_last": "0.1"}))
    assert data["valid"], data["errors"]
    assert data["data"]["steady_state"] == {"skip_first": 0.25, "skip_last": 0.1}
    emptied = data_of(client, posted(html, **{"f-steady_state-skip_first": ""}))
    assert "steady_state" not in emptied["data"]
    answer = preview(client, posted(html, **{"f-steady_state-skip_first": "1.5"}))
    assert "expected a share of the point&#x27;s requests, at least 0 and below 1 (0.2 for 20 %), got 1.5" in slot(
        answer, "fe-steady_state-skip_first")


def test_packing_is_a_choice_written_only_when_changed(operator, client):
    html = builder_from(client, ONE_SHAPE)
    assert selected(html, "f-option-packing") == "exclusive"
    assert "options" not in data_of(client, posted(html))["data"]  # left alone: nothing written
    data = data_of(client, posted(html, **{"f-option-packing": "pack"}))
    assert data["valid"] and data["data"]["options"] == {"packing": "pack"}
    packed = builder_from(client, {**ONE_SHAPE, "options": {"packing": "pack"}})
    assert selected(packed, "f-option-packing") == "pack"
    assert data_of(client, posted(packed, **{"f-option-packing": "exclusive"}))["data"]["options"] == {
        "packing": "exclusive"}
