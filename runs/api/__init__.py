"""The JSON API under /api/ (django-ninja: typed endpoints, the OpenAPI schema at
/api/openapi.json built from the same types, so the schema cannot drift from the code).

Authentication: ``Authorization: Bearer <token>`` (an ApiToken, made in the admin or by
``manage.py create_api_token``) for scripts and CI, or the browser's session (with CSRF on
unsafe methods). A bad token (unknown, revoked, expired) is a 401; a read-only token is a 403
on anything but GET, HEAD and OPTIONS; an address with too many bad tokens or failed logins
is locked out for a while, a 429. The roles of the pages apply, to this schema too: reading
needs a role (viewer, operator or curator: 403 without one);
creating and planning sweeps needs ``benchmarks.add_sweep``; launching, cancelling and
resuming ``benchmarks.launch_sweep``.
Errors are JSON: ``{"detail": "..."}``, or ``{"errors": [{"path", "message"}]}`` for an
invalid spec, with the messages of the CLI; a body larger than its endpoint takes is a 413
(README "Limits"), and even an unexpected failure answers JSON.
"""

import logging
from functools import wraps

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import JsonResponse
from ninja import NinjaAPI
from ninja.errors import HttpError

from runs.api import compare, imports, results, sweeps
from runs.api.auth import RoleSessionAuth, TokenAuth


class SweeplabAPI(NinjaAPI):
    """The NinjaAPI, with operation ids that do not depend on the module of an endpoint."""

    def get_openapi_operation_id(self, operation):
        # The ids the schema had when the API was one module (runs_api_<function>), so
        # clients generated from it keep their names whatever module an endpoint lives in.
        return f"runs_api_{operation.view_func.__name__}"


AUTH = [TokenAuth(), RoleSessionAuth()]


def for_readers(view):
    """The schema's view, for the callers the API itself answers (a token or a session, with
    a role): the schema names every operation, which is no business of a caller without one."""

    @wraps(view)
    def checked(request, *args, **kwargs):
        try:
            if not any(auth(request) for auth in AUTH):
                return JsonResponse({"detail": "Unauthorized"}, status=401)
        except HttpError as exc:
            return JsonResponse({"detail": str(exc)}, status=exc.status_code)
        return view(request, *args, **kwargs)

    return checked


api = SweeplabAPI(
    title="Sweeplab API",
    version="1",
    description=__doc__,
    auth=AUTH,
    docs_url=None,  # Swagger UI would load from a CDN; the schema is at /api/openapi.json
    docs_decorator=for_readers,
    urls_namespace="api",
)


# What Django raises on a request it will not read (a body over DATA_UPLOAD_MAX_MEMORY_SIZE,
# too many fields, a malformed multipart body) and, in the end, anything unexpected: the
# API answers each in JSON, never with Django's HTML 400 or 500 page.
log = logging.getLogger(__name__)


@api.exception_handler(RequestDataTooBig)
def body_too_big(request, exc):
    return api.create_response(request, {"detail": f"the request body is too large: {exc}"}, status=413)


@api.exception_handler(SuspiciousOperation)
def refused_request(request, exc):
    return api.create_response(request, {"detail": f"the request cannot be read: {exc}"}, status=400)


@api.exception_handler(PermissionDenied)
def denied(request, exc):
    return api.create_response(request, {"detail": str(exc) or "forbidden"}, status=403)


@api.exception_handler(Exception)
def internal_error(request, exc):
    log.exception("API %s %s failed", request.method, request.path)
    return api.create_response(request, {"detail": f"internal error ({exc.__class__.__name__}); it is logged on the "
                                                   f"server"}, status=500)


api.add_router("", sweeps.router)
api.add_router("", results.router)
api.add_router("", imports.router)
api.add_router("", compare.router)
