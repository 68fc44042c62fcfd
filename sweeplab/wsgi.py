import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")
if os.environ["DJANGO_SETTINGS_MODULE"] == "sweeplab.settings":
    # A web server started on its own (not through manage.py) finds its data folder and,
    # without SECRET_KEY in the environment, the key the workers share.
    from sweeplab.settings import prepare_data_dir

    prepare_data_dir()
application = get_wsgi_application()
