"""`engram serve`, `engram mcp`, and `engram clients grant|list|revoke|log`: the memory for other apps (issue 39 §2).

Both servers are off until the user runs them, and serve only clients the user granted by name.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve", help="serve an OpenAI-compatible API on 127.0.0.1 (granted clients only)")
    serve.add_argument("--port", type=_port, default=8741, help="the port on 127.0.0.1 (default 8741)")
    serve.set_defaults(func=cmd_serve, lasting=True)
    mcp = subparsers.add_parser("mcp", help="speak MCP on stdin/stdout for a granted client (token in ENGRAM_TOKEN)")
    mcp.set_defaults(func=cmd_mcp, lasting=True)
    clients = subparsers.add_parser("clients", help="the apps allowed to use your memory, and what they did")
    commands = clients.add_subparsers(dest="action", metavar="ACTION", required=True)
    grant = commands.add_parser("grant", help="allow an app, and print its token (shown once)")
    grant.add_argument("name")
    grant.add_argument("--write", action="store_true", help="also let it add, edit and forget memories")
    grant.set_defaults(func=cmd_grant)
    commands.add_parser("list", help="the apps allowed").set_defaults(func=cmd_list)
    revoke = commands.add_parser("revoke", help="take an app's access away")
    revoke.add_argument("name")
    revoke.set_defaults(func=cmd_revoke)
    log = commands.add_parser("log", help="what the apps read and wrote, newest first")
    log.add_argument("--limit", type=int, default=30)
    log.set_defaults(func=cmd_log)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, not {text!r}")
    return int(text)


def _registry(services: Any) -> Any:
    from core.clients import AccessLog, ClientRegistry
    return ClientRegistry(services.data_dir, time.time), AccessLog(services.data_dir, time.time)


def cmd_grant(args: argparse.Namespace, services: Any) -> int:
    registry, _ = _registry(services)
    token = registry.grant(args.name, "write" if args.write else "read")
    print(f"{args.name.strip()} may now {'read and change' if args.write else 'read'} your memory. Its token "
          f"(shown only now):\n{token}")
    return 0


def cmd_list(args: argparse.Namespace, services: Any) -> int:
    registry, _ = _registry(services)
    found = registry.clients()
    if not found:
        print("no app may use your memory (`engram clients grant NAME [--write]`)")
    for client in found:
        print(f"{client.name}: {'read and write' if client.can_write else 'read only'}, since "
              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(client.granted_at))}")
    return 0


def cmd_revoke(args: argparse.Namespace, services: Any) -> int:
    registry, _ = _registry(services)
    registry.revoke(args.name)
    print(f"{args.name} may no longer use your memory")
    return 0


def cmd_log(args: argparse.Namespace, services: Any) -> int:
    _, log = _registry(services)
    entries = log.recent(max(1, min(args.limit, 10_000)))
    if not entries:
        print("no app has used your memory yet")
    for entry in entries:
        print(entry.describe())
    return 0


def cmd_serve(args: argparse.Namespace, services: Any) -> int:
    from app.serve.openai_api import HOST, ChatService, make_server
    registry, log = _registry(services)
    if not registry.clients():
        print("engram: no app may use your memory yet; grant one first: `engram clients grant NAME`",
              file=sys.stderr)
        return 2
    service = ChatService(lambda: services.assistant(), registry, log,
                          model_id=f"engram/{services.settings.chat_model or 'model'}").start()
    try:
        server = make_server(service, args.port)
    except OSError as exc:
        print(f"engram: cannot listen on {HOST}:{args.port} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    print(f"Serving your memory on http://{HOST}:{server.server_address[1]}/v1 to "
          f"{', '.join(c.name for c in registry.clients())}; Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
        service.close()
    return 0


def cmd_mcp(args: argparse.Namespace, services: Any) -> int:
    from app.serve.mcp_server import build_server
    from core.memory.client_tools import ClientTools
    registry, log = _registry(services)
    client = registry.authenticate(os.environ.get("ENGRAM_TOKEN"))
    if client is None:
        log.record("unknown", "refused", 0, "MCP without a valid token")
        print("engram: this app has no valid token in ENGRAM_TOKEN (the user grants one with "
              "`engram clients grant NAME`)", file=sys.stderr)
        return 2
    tools = ClientTools(services.db, services.embedder, client, log)
    build_server(tools, client).run("stdio")
    return 0
