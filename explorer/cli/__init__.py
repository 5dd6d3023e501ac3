"""The `explore` command: main.py parses and dispatches; one module per subcommand, each
with add_arguments(parser) and run(args). The one place of explorer that reaches deploy.

May import: explorer, deploy, csdf, sdf3, memtrade.
"""
