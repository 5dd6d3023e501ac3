"""The explorer: applications, the memory model, the search and its outputs, and the
`explore` command. Its subpackages follow the flow, each importing only those before it:

app -> memory -> throughput -> plan -> search -> tiling -> primitives -> report -> cli

(docs/architecture.md has the map; tests/test_imports.py holds each package to the
`May import:` line of its docstring.)
"""
