"""What every bench result records about its run: the machine, the date and how busy the machine was."""
from __future__ import annotations

import os
import platform
import time


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def stamp(name: str) -> dict:
    """The header of a bench's JSON. The load average shows whether other work shared the cores meanwhile."""
    return {"bench": name, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average_1m_at_start": round(os.getloadavg()[0], 2)}
