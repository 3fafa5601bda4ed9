#!/usr/bin/env python3
"""gen-rnnd.conf.5.py RNND OUT: writes the rnnd.conf(5) man page (roff).

The OPTIONS section is made from `RNND --dump-config`, which the daemon
prints from its one settings table, so the page lists every setting with the
same help, choices and default as --help and config/rnnd.conf.
"""
import re
import subprocess
import sys

HEAD = r""".TH RNND.CONF 5 "" "rnnd @VERSION@" "File Formats"
.SH NAME
rnnd.conf \- settings of the rnnd model server
.SH SYNOPSIS
.I /etc/rnnd/rnnd.conf
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
On SIGHUP the daemon reads the file again and applies it without dropping a
request, except the settings marked
.I fixed
below, which keep their value until a restart (a warning is logged).
.SH OPTIONS
"""

TAIL = r""".SH FILES
.TP
.I /etc/rnnd/rnnd.conf
The installed settings; model_repository is /var/lib/rnnd/models.
.SH SEE ALSO
.BR rnnd (8),
.BR systemd.service (5)
"""

# daemon/reload.c's fixed_settings: what SIGHUP cannot change.
FIXED = {"listen", "grpc_listen", "grpc_max_message_bytes", "grpc_max_streams", "grpc_max_header_bytes",
         "grpc_threads", "threads", "connection_limit", "connection_timeout", "per_connection_memory",
         "per_address_limit", "log_format"}


def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s.startswith((".", "'")) else s


def main():
    rnnd, out = sys.argv[1], sys.argv[2]
    text = subprocess.run([rnnd, "--dump-config"], check=True, capture_output=True, text=True).stdout
    version = subprocess.run([rnnd, "--version"], check=True, capture_output=True, text=True).stdout.split()[-1]
    blocks = text.split("\n\n")[1:]  # the first block is the file's own header
    body = []
    for b in blocks:
        lines = b.strip("\n").split("\n")
        m = re.match(r"^([a-z_]+) = (.*)$", lines[-1])
        if not m:
            continue
        key = m.group(1)
        comments = [l[2:] if l.startswith("# ") else l[1:] for l in lines[:-1]]
        default = [c for c in comments if c.startswith(("Default:", "One of:"))]
        help_text = " ".join(c for c in comments if c not in default)
        body.append(".TP\n.B %s\n%s\n" % (roff(key), roff(help_text)))
        extra = " ".join(default)
        if key in FIXED:
            extra += " Fixed: a reload keeps the running value."
        body.append(".br\n%s\n" % roff(extra.strip()))
    with open(out, "w") as f:
        f.write(HEAD.replace("@VERSION@", version))
        f.write("".join(body))
        f.write(TAIL)


if __name__ == "__main__":
    main()
