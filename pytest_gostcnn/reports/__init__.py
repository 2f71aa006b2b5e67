"""Reading a written report (``--gost-report``): its schema, and the commands that check,
merge, resume from and draw it (docs/report.md)."""
