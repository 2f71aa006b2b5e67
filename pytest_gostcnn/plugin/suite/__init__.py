"""The conformance suite ``pytest --gost-backend=NAME`` runs when given no test paths."""
