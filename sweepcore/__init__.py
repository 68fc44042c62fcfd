"""Sweeplab's measurement core: everything that measures and decides, with no Django.

Nothing here imports django, benchmarks or runs (an import-linter contract in
``.importlinter`` enforces it), so the core runs and is tested on its own.
"""
