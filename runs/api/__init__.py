"""The JSON API under /api/ (django-ninja: typed endpoints, the OpenAPI schema at
/api/openapi.json built from the same types, so the schema cannot drift from the code).

Authentication: ``Authorization: Bearer <token>`` (an ApiToken, created in the admin) for
scripts and CI, or the browser's session (with CSRF on unsafe methods). The roles of the
pages apply: reading needs a role (viewer, operator or curator: 403 without one);
creating and planning sweeps needs ``benchmarks.add_sweep``; launching, cancelling and
resuming ``benchmarks.launch_sweep``.
Errors are JSON: ``{"detail": "..."}``, or ``{"errors": [{"path", "message"}]}`` for an
invalid spec, with the messages of the CLI.
"""

from ninja import NinjaAPI

from runs.api import compare, imports, results, sweeps
from runs.api.auth import RoleSessionAuth, TokenAuth


class SweeplabAPI(NinjaAPI):
    """The NinjaAPI, with operation ids that do not depend on the module of an endpoint."""

    def get_openapi_operation_id(self, operation):
        # The ids the schema had when the API was one module (runs_api_<function>), so
        # clients generated from it keep their names whatever module an endpoint lives in.
        return f"runs_api_{operation.view_func.__name__}"


api = SweeplabAPI(
    title="Sweeplab API",
    version="1",
    description=__doc__,
    auth=[TokenAuth(), RoleSessionAuth()],
    docs_url=None,  # Swagger UI would load from a CDN; the schema is at /api/openapi.json
    urls_namespace="api",
)
api.add_router("", sweeps.router)
api.add_router("", results.router)
api.add_router("", imports.router)
api.add_router("", compare.router)
