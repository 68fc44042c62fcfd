"""The worker side of a run: the executor (orchestration) and its database writes."""
