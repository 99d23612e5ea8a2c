"""Engram's memory for other apps on this machine: an OpenAI-compatible endpoint and an MCP server."""
