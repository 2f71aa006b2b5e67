"""The pytest plugin, the only part that imports pytest: the ``--gost-*`` options, the hooks,
the suite's items, the terminal summary and the report writer."""
