"""The forms that read the JSON endpoints' GET parameters (runs.queryparams, runs.forms):
defaults for what is left out, one message naming the first bad parameter, and a 400
(never a 500) for ids the database cannot hold."""


import pytest
from django.http import QueryDict
from django.urls import reverse

from benchmarks.models import LLM, Engine, Host, Sweep
from runs.forms import CompareForm, HistoryQueryForm, RunSelectionForm, SelectionForm, chart_choice
from runs.models import Run
from runs.queryparams import (
    MAX_ID,
    FlagParam,
    IdListParam,
    IntegerParam,
    NumberParam,
    QueryError,
    QueryForm,
    TextParam,
)
from runs.results.points_table import DEFAULT_COLUMNS, TableQueryError, parse_query


class Example(QueryForm):
    count = IntegerParam(7, minimum=2, maximum=9)
    ratio = NumberParam(0.5, above=0, below=1)
    name = TextParam("anyone", strip=True)
    verbose = FlagParam()
    ids = IdListParam("“{}” is not an id")


def q(text):
    return QueryDict(text)


def test_left_out_or_blank_parameters_are_their_defaults():
    expected = {"count": 7, "ratio": 0.5, "name": "anyone", "verbose": False, "ids": []}
    assert Example.parse(q("")) == expected
    assert Example.parse(q("count=%20&ratio=&name=%20%20&verbose=")) == expected


@pytest.mark.parametrize("query, message", [
    ("count=x", "count must be an integer, got 'x'"),
    ("count=4.0", "count must be an integer, got '4.0'"),
    ("count=1", "count must be at least 2 and at most 9, got 1"),
    ("count=10", "count must be at least 2 and at most 9, got 10"),
    ("ratio=abc", "ratio must be a number, got 'abc'"),
    ("ratio=%20", "ratio must be a number, got ' '"),
    ("ratio=1", "ratio must be > 0 and < 1, got 1"),
    ("ratio=nan", "ratio must be > 0 and < 1, got nan"),
    ("ids=1&ids=x", "“x” is not an id"),
    ("ids=", "“” is not an id"),
    ("ids=-3", "“-3” is not an id"),
    ("ids=%C2%B2", "“²” is not an id"),  # a digit to isdigit, not to int()
    (f"ids={MAX_ID + 1}", f"“{MAX_ID + 1}” is not an id"),
    # Several bad parameters: the first the form declares is the one named.
    ("ids=x&ratio=x&count=x", "count must be an integer, got 'x'"),
])
def test_a_bad_parameter_is_one_message_that_names_it(query, message):
    with pytest.raises(QueryError) as raised:
        Example.parse(q(query))
    assert str(raised.value) == message


def test_values_are_read_as_sent():
    values = Example.parse(q(f"count=%209%20&ratio=0.25&name=%20x%20&verbose=yes&ids=3&ids=%203&ids=1&ids={MAX_ID}"))
    assert values == {"count": 9, "ratio": 0.25, "name": "x", "verbose": True, "ids": [3, 1, MAX_ID]}
    for off in ("0", "no", "false", "True"):
        assert Example.parse(q(f"verbose={off}"))["verbose"] is False
    # A plain dict works too (the points table is asked without a request).
    assert Example.parse({"count": 3})["count"] == 3


def test_the_points_table_parameters_raise_its_own_error():
    assert parse_query(q("sort=%20-decode_tok_s%20&status=ok&page=2")) == {
        "sort": "-decode_tok_s", "status": "ok", "workload": "", "method": "", "tp": None, "run": None,
        "validity": "", "valid_only": False, "q": "", "cols": list(DEFAULT_COLUMNS),
        "page": 2, "per_page": 100,
    }
    with pytest.raises(TableQueryError, match="^unknown sort column 'x'.*prefix - for descending"):
        parse_query(q("sort=-x&page=0"))


def test_the_points_table_columns_are_chosen_once_each_in_table_order_and_blank_means_none():
    assert parse_query(q("cols=p99_itl_ms&cols=decode_tok_s,p99_itl_ms"))["cols"] == ["p99_itl_ms", "decode_tok_s"]
    # The chooser sends a blank value beside its boxes: with none ticked, no measured column.
    assert parse_query(q("cols="))["cols"] == []
    assert parse_query(q("cols=&cols=accept_length"))["cols"] == ["accept_length"]
    with pytest.raises(TableQueryError, match="^unknown column 'reason': choose among decode_tok_s, "):
        parse_query(q("cols=decode_tok_s,reason"))


def test_history_parameters_carry_the_series_and_config_overrides_method_and_params():
    values = HistoryQueryForm.parse(q("model=m&method=a&params=%7B%7D&tp=2&config=ddtree:%7B%22budget%22:8%7D"))
    assert values["series"] == {
        "model": "m", "engine": "", "method": "ddtree", "params": '{"budget":8}', "tp": 2, "workload": "",
        "prompt_tokens": None, "concurrency": None, "gpu": "",
    }
    assert (values["metric"], values["window"], values["show_excluded"], values["valid_only"]) == (
        "decode_tok_s", 5, False, False)
    assert HistoryQueryForm.parse(q("config=autoregressive"))["series"]["params"] == "{}"
    with pytest.raises(QueryError, match="^unknown metric 'reason': expected one of "):
        HistoryQueryForm.parse(q("metric=reason&window=x"))
    with pytest.raises(QueryError, match=r"^window must be at least 3 and at most 100, got 101$"):
        HistoryQueryForm.parse(q("window=101"))


def test_compare_keeps_the_metric_asked_for_and_names_the_bad_id():
    form = CompareForm(q("sweep=1&sweep=x&run=y&metric=status"))
    assert not form.is_valid()
    assert form.selection_error() == "“x” is not an id"
    assert form.asked_metric() == "status" and form.errors["metric"][0].startswith("Unknown metric “status”")
    form = CompareForm(q("sweep=2&sweep=1"))
    assert form.is_valid() and form.asked_metric() == "decode_tok_s" and form.cleaned_data["sweep"] == [2, 1]
    assert SelectionForm(q("")).is_valid() and SelectionForm(q("")).selection_error() == ""


def test_chart_choice_is_the_overview_unless_asked():
    assert chart_choice(q("")) == {"family": None, "chart": None}
    assert chart_choice(q("family=latency&chart=")) == {"family": "latency", "chart": None}


# --- through the views --------------------------------------------------------------------


@pytest.fixture
def viewer(catalog, make_user):
    return make_user("vera", "viewer")


@pytest.fixture
def runs(viewer):
    sweep = Sweep.objects.create(name="s", spec={}, host=Host.objects.first(), engine=Engine.objects.first(),
                                 llm=LLM.objects.first())
    return [Run.objects.create(sweep=sweep, position=i, method="autoregressive", params={}, tp=1 + i)
            for i in range(2)]


def test_run_selection_returns_the_runs_in_the_order_given(runs, django_assert_num_queries):
    first, second = runs
    with django_assert_num_queries(1):
        chosen = RunSelectionForm.parse(q(f"runs={second.pk},{first.pk},,{second.pk}"))["runs"]
        assert [r.pk for r in chosen] == [second.pk, first.pk] and chosen[0].sweep.name == "s"
    with pytest.raises(QueryError, match=rf"^no run #{second.pk + 100}$"):
        RunSelectionForm.parse(q(f"runs={first.pk}&runs={second.pk + 100}"))
    with pytest.raises(QueryError, match=r"^no runs selected: give run ids like \?runs=1,2,3$"):
        RunSelectionForm.parse(q("runs=%20,"))


@pytest.mark.parametrize("bad", ["%C2%B2", str(MAX_ID + 1)])
def test_ids_no_database_holds_are_a_400_not_a_crash(runs, viewer, client, bad):
    client.force_login(viewer)
    shown = QueryDict(f"x={bad}")["x"]
    response = client.get(reverse("run-selection-charts-data") + f"?runs={bad}")
    assert response.status_code == 400
    assert response.json() == {"error": f"Cannot chart this selection: “{shown}” is not a run id: give ids like "
                                        "?runs=1,2,3."}
    response = client.get(reverse("selection-export", args=["points.json"]) + f"?sweep={bad}")
    assert response.status_code == 400 and response.json() == {"error": f"bad selection: “{shown}” is not an id"}
    response = client.get(reverse("compare") + f"?sweep={bad}&sweep={runs[0].sweep_id}")
    assert response.status_code == 400 and response.context["errors"] == [f"Bad selection: “{shown}” is not an id."]
