"""A run of the suite without pytest: the ``--gost-*`` options, what they resolve to on this
machine, what the run holds as it goes, its outcome rules, resume, the summary's lines and
the report writer. The plugin wires these to pytest; the command line uses them too."""
