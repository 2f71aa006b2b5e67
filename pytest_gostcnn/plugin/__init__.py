"""The pytest plugin, the only part that imports pytest: the hooks, the session object they
delegate to (start-up, checkpoints, rendering), the suite and what each of its items does."""
