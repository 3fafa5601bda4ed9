#!/usr/bin/env python3
"""gen-rnnd.8.py RNND IN OUT SYSCONFDIR REPOSITORY: writes rnnd(8) from man/rnnd.8.in.

Replaces @VERSION@, @sysconfdir@ and @repository@ (the installed paths, as
the units and rnnd.conf(5) have them) and @FIXED@, the settings a reload
keeps, from what `RNND --dump-config` marks Fixed (daemon/options.c's
RNND_OPT_FIXED rows, which daemon/reload.c keeps), so that SIGHUP's list
cannot drift from the code.
"""
import sys

from rnndconf import roff, settings, substitute, version


def main():
    rnnd, src, out, sysconfdir, repository = sys.argv[1:6]
    fixed = [roff(s["key"]) for s in settings(rnnd) if s["fixed"]]
    if not fixed:
        raise SystemExit("%s --dump-config marks no setting Fixed" % rnnd)
    with open(src) as f:
        text = f.read()
    text = substitute(text, {
        "VERSION": version(rnnd),
        "sysconfdir": roff(sysconfdir),
        "repository": roff(repository),
        "FIXED": ", ".join(fixed[:-1]) + " and " + fixed[-1] if len(fixed) > 1 else fixed[0],
    })
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
