"""rnndconf.py: the settings as `rnnd --dump-config` prints them, for the man page generators.

The daemon prints them from its one settings table (daemon/options.c), so the pages say
what --help and config/rnnd.conf say: each setting's help, its range, choices and
default, and whether a reload (SIGHUP) keeps its running value ("Fixed:").
"""
import re
import subprocess

# Comment lines that are facts about the value, not help text.
FACTS = ("Range:", "Default:", "One of:", "Fixed:")


def roff(s):
    """s as roff text: backslashes and hyphens escaped, a leading control character guarded."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s.startswith((".", "'")) else s


def run(rnnd, *args):
    return subprocess.run([rnnd, *args], check=True, capture_output=True, text=True).stdout


def version(rnnd):
    return run(rnnd, "--version").split()[-1]


def settings(rnnd):
    """[{key, help, facts, fixed}] in the table's order."""
    blocks = run(rnnd, "--dump-config").split("\n\n")[1:]  # the first block is the header
    out = []
    for b in blocks:
        lines = b.strip("\n").split("\n")
        m = re.match(r"^([a-z_]+) = (.*)$", lines[-1])
        if not m:
            continue
        comments = [l[2:] if l.startswith("# ") else l[1:] for l in lines[:-1]]
        facts = [c for c in comments if c.startswith(FACTS)]
        out.append({
            "key": m.group(1),
            "help": " ".join(c for c in comments if c not in facts),
            "facts": " ".join(facts),
            "fixed": any(c.startswith("Fixed:") for c in facts),
        })
    return out


def substitute(text, values):
    """text with each @NAME@ of values replaced; an @NAME@ left over is an error."""
    for k, v in values.items():
        text = text.replace("@%s@" % k, v)
    left = re.findall(r"@[A-Za-z_]+@", text)
    if left:
        raise SystemExit("unsubstituted %s" % ", ".join(sorted(set(left))))
    return text
