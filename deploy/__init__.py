"""Deployment: a plan becomes step models over one arena, run and measured. Its subpackages
follow the flow, each importing only those before it:

steps -> runtime -> ort -> tensorrt -> backends -> checks -> build -> profile -> run

deploy may import explorer's model (never explorer.cli). docs/architecture.md has the map;
tests/test_imports.py holds each package to the `May import:` line of its docstring.
"""
