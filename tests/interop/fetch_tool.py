"""fetch_tool.py: the path of an interop tool that tools.sh fetches, or why not."""

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def fetch_tool(name, src):
    """(path, None) when tools.sh NAME gives one; (None, (exit status, its reason)) when not."""
    r = subprocess.run(["sh", os.path.join(HERE, "tools.sh"), name], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=dict(os.environ, RNND_SRC=src), timeout=600)
    out = r.stdout.strip().splitlines()
    if r.returncode != 0 or not out:
        return None, (r.returncode, out[-1] if out else "tools.sh %s failed" % name)
    return out[-1], None
