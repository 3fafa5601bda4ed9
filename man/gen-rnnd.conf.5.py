#!/usr/bin/env python3
"""gen-rnnd.conf.5.py RNND OUT SYSCONFDIR REPOSITORY: writes the rnnd.conf(5) man page (roff).

The OPTIONS section is made from `RNND --dump-config`, which the daemon
prints from its one settings table, so the page lists every setting with the
same help, range, choices and default as --help and config/rnnd.conf.
SYSCONFDIR and REPOSITORY are the installed paths (meson's prefix, as
rnnd(8)'s): the config is SYSCONFDIR/rnnd/rnnd.conf, serving REPOSITORY.
"""
import sys

from rnndconf import roff, settings, substitute, version

HEAD = r""".TH RNND.CONF 5 "" "rnnd @VERSION@" "File Formats"
.SH NAME
rnnd.conf \- settings of the rnnd model server
.SH SYNOPSIS
.I @sysconfdir@/rnnd/rnnd.conf
.SH DESCRIPTION
.BR rnnd (8)
reads its settings from defaults, then the file given with
.BR \-\-config ,
then its command line, where every key is also a flag
.BR \-\-key=value .
RNND_BACKEND=cpu in the environment overrides
.BR backend .
.PP
The file holds
.B key = value
lines; a
.B #
starts a comment at the start of a line or after a blank; a value may be
"double quoted".  Unknown and repeated keys are errors.
.B rnnd \-\-dump\-config
prints the settings in effect in this format.
.PP
A numeric setting takes the values of its
.IR Range ;
sizes are bytes or take a K, M, G or T suffix (powers of 1024), durations
are seconds or take an s, m or h suffix.
.PP
On SIGHUP the daemon reads the file again and applies it without dropping a
request, except the settings marked
.I Fixed
below, which keep their value until a restart (a warning is logged).
.SH OPTIONS
"""

TAIL = r""".SH FILES
.TP
.I @sysconfdir@/rnnd/rnnd.conf
The installed settings, whose model_repository is
.I @repository@
(the demo models).
.SH SEE ALSO
.BR rnnd (8),
.BR systemd.service (5)
"""


def main():
    rnnd, out, sysconfdir, repository = sys.argv[1:5]
    body = []
    for s in settings(rnnd):
        body.append(".TP\n.B %s\n%s\n" % (roff(s["key"]), roff(s["help"])))
        body.append(".br\n%s\n" % roff(s["facts"]))
    values = {"VERSION": version(rnnd), "sysconfdir": roff(sysconfdir),
              "repository": roff(repository)}
    with open(out, "w") as f:
        f.write(substitute(HEAD, values))
        f.write("".join(body))
        f.write(substitute(TAIL, values))


if __name__ == "__main__":
    main()
