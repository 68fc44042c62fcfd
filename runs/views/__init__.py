"""The pages, one module each (their URLs are in runs.urls); logic lives below them in
runs.lifecycle and runs.results."""
