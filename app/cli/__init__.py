"""The command line: `engram <group> <verb>`; app.cli.main builds the parser."""
