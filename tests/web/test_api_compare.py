"""The API's point evidence and GET /api/compare: verdicts that know the noise."""

from django.contrib.auth.models import Group, User

from runs.models import ApiToken, Point
from runs.tokens import new_token
from tests.web.test_compare_export import CONFIGS, make_sweep


def viewer_auth():
    user = User.objects.create_user("reader", password="pw-reader-12345")
    user.groups.add(Group.objects.get(name="viewer"))
    token, digest = new_token()
    ApiToken.objects.create(user=user, name="ci", prefix=token[:12], key_hash=digest)
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_points_carry_their_verdict_sample_size_and_intervals(catalog, client):
    sweep = make_sweep("s", CONFIGS[:1], points_per_run=1)
    point = Point.objects.get(run__sweep=sweep)
    Point.objects.filter(pk=point.pk).update(
        validity="invalid", completed=7, simulated_time_scale=0.02,
        validity_reasons=[{"code": "below_resolution", "message": "38 % of chunk gaps under 0.1 ms (limit 5 %)"}],
        intervals={"decode_tok_s": [90.0, 110.0], "median_itl_ms": [1.0, 1.5]},
    )
    auth = viewer_auth()
    data = client.get(f"/api/points/{point.pk}", **auth).json()
    assert data["validity"] == "invalid" and data["n"] == 7 and data["simulated_time_scale"] == 0.02
    assert data["validity_reasons"] == [{"code": "below_resolution",
                                         "message": "38 % of chunk gaps under 0.1 ms (limit 5 %)"}]
    assert data["decode_tok_s_ci"] == [90.0, 110.0] and data["median_itl_ms_ci"] == [1.0, 1.5]
    assert data["median_ttft_ms_ci"] is None and data["stop_reason"] == ""
    listed = client.get(f"/api/points?sweep={sweep.pk}", **auth).json()["items"]
    assert listed == [data]


def test_compare_answers_rows_with_verdicts(catalog, client):
    base = make_sweep("base", CONFIGS, decode=100.0, requests_per_point=20, spread=0.03, seed=1)
    faster = make_sweep("faster", CONFIGS, decode=130.0, requests_per_point=20, spread=0.03, seed=2)
    same = make_sweep("same", CONFIGS, decode=100.0, requests_per_point=20, spread=0.03, seed=3)
    few = make_sweep("few", CONFIGS, decode=130.0, requests_per_point=3, spread=0.03, seed=4)
    runs = [s.runs.get(position=0).pk for s in (base, faster, same, few)]
    auth = viewer_auth()
    data = client.get(f"/api/compare?run={runs[0]}&run={runs[1]}&metric=decode_tok_s", **auth).json()
    assert data["metric"] == "decode_tok_s" and data["alpha"] == 0.05 and data["min_requests"] == 5
    assert len(data["rows"]) == 2
    row = data["rows"][0]
    assert row["verdict"] == "better" and row["p_value"] < 0.05
    assert row["baseline"] == 100.0 and row["value"] == 130.0 and abs(row["diff_pct"] - 30.0) < 1e-9
    assert row["point"]["run"] == runs[1] and row["point"]["n"] == 20 and row["point"]["validity"] == "valid"
    assert row["baseline_point"]["run"] == runs[0] and row["basis"] == "requests"
    assert {"label", "group", "ratio_ci", "reason"} <= set(row)

    reverse = client.get(f"/api/compare?run={runs[1]}&run={runs[0]}", **auth).json()
    assert [r["verdict"] for r in reverse["rows"]] == ["worse", "worse"]
    latency = client.get(f"/api/compare?run={runs[0]}&run={runs[1]}&metric=median_e2el_ms", **auth).json()
    assert [r["verdict"] for r in latency["rows"]] == ["better", "better"]  # shorter requests
    three = client.get(f"/api/compare?run={runs[0]}&run={runs[2]}&run={runs[3]}", **auth).json()
    assert [(r["group"].split()[0], r["verdict"]) for r in three["rows"]] == [
        (f"#{same.pk}/{runs[2]}", "same"), (f"#{few.pk}/{runs[3]}", "insufficient")] * 2
    assert three["rows"][1]["reason"] == "20 vs 3 requests: at least 5 on each side are needed"
    assert three["rows"][0]["reason"].startswith("within noise: ±")
    throughput = client.get(f"/api/compare?run={runs[0]}&run={runs[1]}&metric=output_throughput", **auth).json()
    assert throughput["rows"][0]["verdict"] is None  # neither point has a throughput
    itself = client.get(f"/api/compare?run={runs[0]}&run={runs[0]}", **auth).json()
    assert [r["verdict"] for r in itself["rows"]] == ["same", "same"]


def test_compare_bad_input_is_a_4xx_that_says_what_is_wrong(catalog, client):
    one = make_sweep("one", CONFIGS)
    run = one.runs.get(position=0).pk
    auth = viewer_auth()
    missing = client.get(f"/api/compare?run={run}&run=999999", **auth)
    assert missing.status_code == 404 and missing.json() == {"detail": "No run #999999"}
    for query, field in ((f"run={run}", "run"), ("", "run"), (f"run={run}&run={run + 1}&metric=status", "metric"),
                         ("run=x&run=2", "run")):
        response = client.get(f"/api/compare?{query}", **auth)
        assert response.status_code == 422, query
        assert field in str(response.json()["detail"]), query
    assert client.get(f"/api/compare?run={run}&run={run + 1}").status_code == 401
