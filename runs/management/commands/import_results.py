"""``manage.py import_results FILE [--format vllm|sglang|sglang-one-batch] [--host NAME --model NAME]``

Imports a result file of ``vllm bench serve --save-result``, SGLang ``bench_serving`` or
SGLang ``bench_one_batch_server`` as an imported sweep (runs.imports).  A problem -- a
malformed file, an unknown host or model -- is one line on stderr and exit status 1
(CommandError), never a traceback, and nothing is stored.  Importing the same file again
stores nothing and says which sweep already holds it.
"""

from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from runs.imports import import_file
from sweepcore.files import FileProblem, open_bytes
from sweepcore.importers import FORMATS, MAX_FILE_BYTES, ImportRefused


class Command(BaseCommand):
    help = "Import a vLLM or SGLang benchmark result file as a sweep."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the result file (.json / .jsonl)")
        parser.add_argument("--format", choices=FORMATS, dest="fmt", help="the file's format (detected when not given)")
        parser.add_argument("--host", help="the host that ran the benchmark (a Host of the catalog)")
        parser.add_argument("--model", help="the model (an LLM of the catalog); default: the file's model")
        parser.add_argument("--engine", help="the engine (default: the only engine of the file's kind)")
        parser.add_argument("--tp", type=int, help="tensor-parallel size when the file does not say (default 1)")
        parser.add_argument("--workload", help="file the points under this workload instead of the file's dataset")
        parser.add_argument("--owner", help="username of the sweep's owner")

    def handle(self, *args, file, fmt=None, host=None, model=None, engine=None, tp=None, workload=None,
               owner=None, **options):
        path = Path(file)
        try:
            source = open_bytes(path, "a result file", MAX_FILE_BYTES)
        except FileProblem as exc:
            raise CommandError(str(exc)) from None
        with source:
            self._import(path, source, fmt, host, model, engine, tp, workload, owner)

    def _import(self, path, source, fmt, host, model, engine, tp, workload, owner):
        try:
            user = None
            if owner:
                user = get_user_model().objects.filter(username=owner).first()
                if user is None:
                    raise CommandError(f"--owner: no user named {owner!r}")
            result = import_file(path.name, source, fmt=fmt, host=host, model=model, user=user, engine=engine,
                                 tp=tp, workload=workload)
        except ImportRefused as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:
            raise CommandError(
                f"the database is not ready ({exc.__class__.__name__}: {exc}); run `python manage.py migrate`"
            ) from None
        self.stdout.write(result.message)
        self.stdout.write(f"{settings.SWEEPLAB_BASE_URL}{result.sweep.get_absolute_url()}")
