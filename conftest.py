"""The repository root's conftest.py, kept empty on purpose.

pytest loads a root conftest.py in every run from the checkout, a user's run of the shipped
suite included, so it defines nothing; the project's fixtures are in tests/conftest.py.
"""
