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
