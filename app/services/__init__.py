"""What the CLI and the window share: the wiring of store, models and jobs, errors in words, platform probes."""
