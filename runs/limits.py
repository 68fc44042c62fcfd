"""Request body limits: a request larger than its endpoint takes is refused from its
Content-Length, before anything reads its body (README "Limits").

Django itself refuses a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only once something reads
it (the CSRF check reads a form's fields), and then with an empty HTML 400; a multipart
upload's file parts it never bounds, streaming them to a temporary file of any size. This
middleware, placed before the CSRF check, answers first: the API with JSON (``{"detail"}``,
413), a page that says how it wants to be told (a view's ``too_large``) with that page, any
other with a 413 page; each names the size and the limit.
"""

from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render

from sweepcore.importers import MAX_FILE_BYTES

#: The endpoints that take a result file: its limit plus room for the form's other fields
#: and the multipart framing.
UPLOAD_VIEWS = frozenset({"import-new", "api:import_results"})
UPLOAD_FORM_MARGIN = 1 << 20


def body_limit(view_name):
    """The most bytes a request to the view named ``view_name`` may carry."""
    if view_name in UPLOAD_VIEWS:
        return MAX_FILE_BYTES + UPLOAD_FORM_MARGIN
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def content_length(request):
    """The body's declared size (0 when absent or not a number: Django then reads nothing)."""
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def too_large_text(size, limit, view_name):
    what = "an import (a result file and its form)" if view_name in UPLOAD_VIEWS else "a request to Sweeplab"
    return (f"the request is {size:,} bytes; {what} may be up to {limit:,} bytes ({limit / (1 << 20):g} MiB, "
            f"Sweeplab's limit)")


class RequestBodyLimitMiddleware:
    """Refuses a request whose Content-Length is over its view's limit (``body_limit``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        size, limit = content_length(request), body_limit(match.view_name)
        if size <= limit:
            return None
        message = too_large_text(size, limit, match.view_name)
        if "api" in match.namespaces:
            return JsonResponse({"detail": message}, status=413)
        too_large = getattr(view_func, "too_large", None)
        if too_large is not None:
            return too_large(request, message)
        return render(request, "413.html", {"message": message}, status=413)
