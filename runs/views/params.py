"""GET parameters shared by the pages' JSON endpoints."""

from runs.results import points_table as points_table_lib


def chart_choice(query):
    """?family=ID or ?chart=ID (runs.results.charts.build_charts): the overview when neither."""
    return {"family": query.get("family") or None, "chart": query.get("chart") or None}


class BadQuery(ValueError):
    pass


def int_param(query, name, default=None, minimum=0, maximum=None):
    try:
        return points_table_lib.int_param(query, name, default, minimum=minimum, maximum=maximum)
    except points_table_lib.TableQueryError as exc:
        raise BadQuery(str(exc)) from None


def id_list(values):
    ids = []
    for value in values:
        value = value.strip()
        if not value.isdigit():
            raise ValueError(f"“{value}” is not an id")
        if int(value) not in ids:
            ids.append(int(value))
    return ids
