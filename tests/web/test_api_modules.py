"""The API in modules (runs/api/<area>.py) keeps the schema it had as one module."""

from runs.api import api

OPERATIONS = {
    "sweeps": ("list_sweeps", "get_sweep", "plan_sweep", "create", "launch", "cancel", "resume", "export"),
    "results": ("list_runs", "get_run", "list_points", "get_point", "list_requests", "list_request_records",
                "get_request_record", "compare"),
    "imports": ("import_results",),
}


def test_operation_ids_and_tags_are_those_of_the_one_module_api():
    schema = api.get_openapi_schema()
    found = {op["operationId"]: op["tags"] for path in schema["paths"].values() for op in path.values()}
    assert found == {f"runs_api_{name}": [tag] for tag, names in OPERATIONS.items() for name in names}
