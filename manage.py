#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")
    if os.environ["DJANGO_SETTINGS_MODULE"] == "sweeplab.settings":
        # Settings create no files on import; every command (migrate, serve, the worker)
        # finds the data folder, the secret key and the broker's folders there.
        from sweeplab.settings import prepare_data_dir

        prepare_data_dir()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
