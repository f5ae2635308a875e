"""The command-line interface (typer + rich). Computes nothing itself."""
