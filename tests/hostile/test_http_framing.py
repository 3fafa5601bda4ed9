#!/usr/bin/env python3
"""test_http_framing.py: the hostile-client suite's HTTP framing cases, against
the real rnnd (docs/TESTING.md, issue 18 items 8 and 9).  Each request goes
out as raw bytes on its own socket, so nothing between the test and the
daemon can repair it:

- a NUL in the URL (%00) is a 400, never the route the truncated path names
  (libmicrohttpd decoded it and the path ended there: /v2/models/m%00x was m);
- Content-Length headers that disagree are a 400 and the connection closes
  (RFC 9112 §6.3; a proxy that frames by the other one is a smuggling vector);
- a Transfer-Encoding other than chunked is a 501 at once (it waited for the
  connection timeout);
- a NUL byte in the request line's method or URI is a 400 naming it, and the
  connection closes (libmicrohttpd 0.9.75 cut the line there: /v2/health/live\0x
  was served as /v2/health/live, and a keep-alive client waited for the header
  deadline); a line that starts with one is dropped by libmicrohttpd, and the
  connection closes at header_timeout (issue 29);
- a Content-Length libmicrohttpd cannot read (-1, abc, past 64 bits) is one
  answer, 400 (413 past 64 bits), not libmicrohttpd's header block twice;
- a whole request followed by a half-close (nc -N) is answered 200 or the
  connection closes; never the 499 that only the log may say;
- answers compressed as Accept-Encoding asks (gzip, deflate, q-values), JSON and binary,
  decompressing to the same bytes; small ones, and refused codings, as they are;
- Expect: 100-continue over max_body_bytes is a 413 before any of the body is invited, and
  within it the body is invited, then served;
- the daemon still serves afterwards;
- compressed bodies (Content-Encoding gzip, deflate: docs/HTTP.md "Compressed requests and
  answers"): the digits example gzip'd and deflated is served as itself; 64 MB of zeros in 64 KB of gzip is
  a 413 naming max_body_bytes, at once, with RSS flat; corrupt or cut-short gzip is a 400; an
  encoding rnnd does not take (br) is a 415 naming it;
- outputs bounded (item 7): with max_response_bytes at 64K, eight images asking
  for every output as JSON (up to ~100 KB) are a 400 naming the limit, the same
  as binary (~20 KB) is served, and RSS does not grow.

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
"""

import os
import socket
import sys
import time

import rnndtest  # the harness (tests/support)

check = rnndtest.check
DEMO = os.path.join(rnndtest.SRC, "config", "models")
BODY = open(os.path.join(DEMO, "digits_lstm", "example.json"), "rb").read()
INFER = b"/v2/models/digits_lstm/infer"


def raw(port, data, wait=5.0):
    """Sends data; returns (seconds until the daemon closed or wait passed, bytes, closed)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    t0, out, closed = time.time(), b"", False
    s.sendall(data)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            out += d
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return time.time() - t0, out, closed


def status_of(out):
    try:
        return int(out.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def post(path, headers, body=BODY):
    return b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def small_quarantine():
    """The environment of a daemon whose RSS a test reads.  Under AddressSanitizer freed
    memory waits in a quarantine (256 MB) before it is reused, so RSS grows with every
    connection's 32K memory pool (a malloc, where a pool over 32K is an mmap), or every
    refused 4 MB decompressed body, whatever the daemon keeps: the quarantine is made
    small, for that daemon only."""
    if "address" in os.environ.get("RNND_SANITIZED", ""):
        return {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1"}
    return None


def test_output_limit():
    import json
    ts = json.load(open(os.path.join(DEMO, "digits_lstm", "test_set.json")))
    inputs = [{"name": "input", "datatype": "FP32", "shape": [8, 8, 8], "data": ts["x"][:8]}]
    d = rnndtest.Daemon("--max_response_bytes=64K", repo=DEMO, env=small_quarantine())
    try:
        path = "/v2/models/digits_lstm/infer"
        st, _, b = d.json("POST", path, body=json.dumps({"inputs": inputs}))
        check(st == 400 and "max_response_bytes" in b.get("error", ""),
              "every output as JSON past max_response_bytes: 400 naming it", (st, b))
        outs = [{"name": n, "parameters": {"binary_data": True}} for n in ("output", "h_n", "c_n", "scores")]
        body = json.dumps({"inputs": inputs, "outputs": outs}).encode()
        st, h, raw = d.request("POST", path, body=body,
                               headers={"Inference-Header-Content-Length": str(len(body))})
        check(st == 200 and "inference-header-content-length" in h,
              "the same outputs as binary fit: 200", (st, raw[:200]))
        st, _, b = d.json("POST", path, body=json.dumps({"inputs": inputs, "outputs": [{"name": "scores"}]}))
        check(st == 200, "scores alone as JSON: 200", (st, b))
        before = rss_kb(d.proc.pid)
        for _ in range(200):
            d.json("POST", path, body=json.dumps({"inputs": inputs}))
        grew = rss_kb(d.proc.pid) - before
        check(grew < 8192, "200 refused output bombs leave RSS flat (KiB grown)", grew)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0 after the output bombs", (rc, d.stderr()[-3000:]))
    finally:
        d.close()


def status_lines(out):
    return out.count(b"HTTP/1.1 ") + out.count(b"HTTP/1.0 ")


def test_nul(d):
    for line, what in ((b"GET /v2/health/live\0x HTTP/1.1", "after the path"),
                       (b"GET /v2/he\0alth/live HTTP/1.1", "inside the path"),
                       (b"GET /v2/health/live?a=\0 HTTP/1.1", "in the query"),
                       (b"GET /\0 HTTP/1.1", "after /"),
                       (b"G\0ET /v2/health/live HTTP/1.1", "in the method")):
        dt, out, closed = raw(d.port, line + b"\r\nHost: t\r\n\r\n")
        check(status_of(out) == 400 and b"NUL" in out and b"X-Request-Id" in out and closed and dt < 2,
              "a NUL byte %s of the request line: 400 naming it, and the connection closes" % what,
              (dt, out[:300]))
    # libmicrohttpd takes a line that starts with a NUL for an empty one and waits for
    # the request line: nothing to answer; header_timeout (2 s here) closes it.
    dt, out, closed = raw(d.port, b"\0GET /v2/health/live HTTP/1.1\r\n\r\n", wait=6)
    check(out == b"" and closed and dt < 4,
          "a request line that starts with a NUL: closed at header_timeout, unanswered", (dt, out[:200]))


def test_bad_length(d):
    for cl, want in ((b"-1", 400), (b"abc", 400), (b"1 2", 400), (b"", 400),
                     (b"99999999999999999999999", 413)):
        dt, out, closed = raw(d.port, post(INFER, [b"Content-Length: " + cl], b""))
        check(status_of(out) == want and status_lines(out) == 1 and b"Content-Length" in out
              and b"X-Request-Id" in out and closed and dt < 2,
              "Content-Length '%s': one answer, %d naming it, and the connection closes"
              % (cl.decode(), want), (dt, out[:400]))


def test_half_close(d):
    """A whole request, then shutdown(SHUT_WR): the client still reads; it may count as gone
    (docs/HTTP.md), but a 499 never reaches the wire."""
    req = post(INFER, [b"Content-Length: %d" % len(BODY)])
    seen = {}
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", d.port))
        s.settimeout(5)
        s.sendall(req)
        s.shutdown(socket.SHUT_WR)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        s.close()
        st = status_of(out)
        seen[st] = seen.get(st, 0) + 1
    check(set(seen) <= {200, 0}, "40 requests then a half-close: each 200 or closed, never 499", seen)


def requests_total(d):
    """{(model, code): count} from /metrics."""
    import re
    _, _, text = d.request("GET", "/metrics")
    return {(m, c): int(n) for m, c, n in
            re.findall(rb'^rnnd_requests_total\{model="([^"]*)",version="[^"]*",code="(\d+)"\} (\d+)$', text, re.M)}


def test_smuggling(d):
    """RFC 9112 §6.1/§6.3: a body framed two ways is refused and the connection closed, so
    that the bytes after it are never read as a request (a proxy in front may frame them
    otherwise: the way requests are smuggled)."""
    smuggled = b"0\r\n\r\nGET /v3/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    dt, out, closed = raw(d.port, post(INFER, [b"Content-Length: %d" % len(smuggled),
                                               b"Transfer-Encoding: chunked"], smuggled))
    check(status_of(out) == 400 and status_lines(out) == 1 and b"Transfer-Encoding and Content-Length" in out
          and b"smuggled" not in out and closed and dt < 2,
          "Content-Length and Transfer-Encoding: one 400 naming both, the connection closes", (dt, out[:400]))
    for tes in ((b"chunked", b"gzip"), (b"gzip", b"chunked"), (b"chunked", b"chunked")):
        dt, out, closed = raw(d.port, post(INFER, [b"Transfer-Encoding: " + te for te in tes],
                                           b"5\r\nhello\r\n0\r\n\r\n"))
        check(status_of(out) == 501 and status_lines(out) == 1 and b"2 Transfer-Encoding headers" in out
              and closed and dt < 2,
              "Transfer-Encoding %s then %s: one 501, the connection closes" % (tes[0].decode(), tes[1].decode()),
              (dt, out[:300]))


def test_counted(d):
    """What libmicrohttpd answers itself (a malformed chunked body: 400, a chunk too large:
    413) and what rnnd answers before routing (an unreadable Content-Length) are counted
    under their status and logged, never as 499 (docs/HTTP.md: the client left)."""
    before = requests_total(d)
    for body, want in ((b"zz\r\nhello\r\n0\r\n\r\n", 400), (b"fffffffffffffffffffff\r\nx\r\n0\r\n\r\n", 413)):
        dt, out, closed = raw(d.port, post(INFER, [b"Transfer-Encoding: chunked"], body))
        check(status_of(out) == want and closed, "a bad chunk: %d from libmicrohttpd" % want, out[:200])
    for cl in (b"abc", b"99999999999999999999999"):
        raw(d.port, post(b"/v2/other", [b"Content-Length: " + cl], b""))
    time.sleep(0.3)
    after = requests_total(d)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after
            if after.get(k, 0) != before.get(k, 0) and k != (b"", b"200")}  # the scrape itself
    check(grew == {(b"digits_lstm", b"400"): 1, (b"digits_lstm", b"413"): 1, (b"", b"400"): 1, (b"", b"413"): 1},
          "each counted under its status, none as 499", grew)
    log = d.stderr()
    check("answered by libmicrohttpd" in log and "invalid Content-Length 'abc'" in log
          and "- /v2/other 413" in log,
          "each has its access line", log[-1500:])


def test_log_lines(d):
    """A client's bytes never make a log line of their own (text format): a newline in a
    URL, a method or a name quoted in an error is written escaped."""
    raw(d.port, b"GET /v3/x%0a<2>FORGED1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    raw(d.port, b"POST /v2/x%0a<2>FORGED2 HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n")
    body = (b'{"inputs":[{"name":"x\\n<2>FORGED3","datatype":"FP32","shape":[1,8,8],"data":[' +
            b",".join([b"0"] * 64) + b"]}]}")
    raw(d.port, post(INFER, [b"Content-Length: %d" % len(body), b"Connection: close"], body))
    raw(d.port, b"G\x1b[31mE\nT /v2 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    time.sleep(0.3)
    log = d.stderr()
    forged = [l for l in log.splitlines() if "FORGED" in l and not l.startswith("<5>")]
    check(log.count("FORGED") >= 3 and not forged and "\\n<2>FORGED3" in log,
          "client bytes stay inside their line, escaped", (forged, log[-1500:]))


def test_compressed():
    import gzip
    import json
    import zlib
    d = rnndtest.Daemon("--max_body_bytes=4M", repo=DEMO, env=small_quarantine())
    try:
        path = "/v2/models/digits_lstm/infer"
        st, _, want = d.json("POST", path, body=BODY)
        check(st == 200, "the example, uncompressed: 200", st)
        for enc, body in (("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)),
                          ("GZIP", gzip.compress(BODY[:100]) + gzip.compress(BODY[100:]))):
            st, _, got = d.json("POST", path, body=body, headers={"Content-Encoding": enc})
            check(st == 200 and got == want, "the example as %s (%d bytes): served as itself" % (enc, len(body)),
                  (st, str(got)[:200]))
        bomb = gzip.compress(b"\0" * (64 << 20))
        before = rss_kb(d.proc.pid)
        t0 = time.time()
        for _ in range(20):
            st, _, b = d.json("POST", path, body=bomb, headers={"Content-Encoding": "gzip"})
        dt = time.time() - t0
        check(st == 413 and "max_body_bytes" in b.get("error", ""),
              "64 MB of zeros in %d KB of gzip: 413 naming max_body_bytes" % (len(bomb) // 1024), (st, b))
        grew = rss_kb(d.proc.pid) - before
        check(grew < 16384, "20 bombs leave RSS flat (KiB grown)", grew)
        check(dt < 20, "20 bombs refused within the limit's work, not 64 MB each (s)", dt)
        gz = gzip.compress(BODY)
        for body, what in ((gz[:len(gz) // 2], "cut short"), (gz[:20] + b"x" * 50 + gz[70:], "corrupt"),
                           (BODY, "not gzip at all")):
            st, _, b = d.json("POST", path, body=body, headers={"Content-Encoding": "gzip"})
            check(st == 400 and "Content-Encoding gzip" in b.get("error", ""),
                  "gzip %s: 400 naming Content-Encoding" % what, (st, b))
        st, _, b = d.json("POST", path, body=gz, headers={"Content-Encoding": "br"})
        check(st == 415 and "'br'" in b.get("error", ""), "Content-Encoding br: 415 naming it", (st, b))
        st, _, got = d.json("POST", path, body=BODY, headers={"Content-Encoding": "identity"})
        check(st == 200 and got == want, "Content-Encoding identity: served", st)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0 after the compressed bodies", (rc, d.stderr()[-3000:]))
    finally:
        d.close()


def test_json_memory():
    """max_json_memory: JSON that would parse into far more memory than its text (empty
    arrays, 45 times) is a 400 naming the limit before any tree is built, and RSS stays
    flat; a TF Serving body within it is served."""
    import json
    d = rnndtest.Daemon("--max_json_memory=16M", repo=DEMO)
    try:
        ex = json.loads(BODY)
        before = rss_kb(d.proc.pid)
        for extra in ('"parameters":{"x":[%s]}', '"foo":[%s]'):
            body = json.dumps(ex)[:-1] + "," + extra % ",".join(["[]"] * 2000000) + "}"
            st, _, b = d.json("POST", "/v2/models/digits_lstm/infer", body=body)
            check(st == 400 and "max_json_memory (16 MiB)" in b.get("error", ""),
                  "%.1f MB of empty arrays: 400 naming max_json_memory" % (len(body) / 1e6), (st, b))
        grew = rss_kb(d.proc.pid) - before
        check(grew < 32768, "RSS after them grew less than 32 MiB (KiB)", grew)
        inst = [[[0.5] * 8 for _ in range(8)] for _ in range(64)]
        st, _, b = d.json("POST", "/v1/models/digits_lstm:predict", body=json.dumps({"instances": inst}))
        check(st == 200 and len(b.get("predictions", [])) == 64, "a 64-image :predict is served", st)
    finally:
        d.close()


def test_expect(d):
    """Expect: 100-continue (curl sends it for bodies over 1 MiB): a body over max_body_bytes is
    a 413 before any of it is sent, never a 100 Continue that invites it; a body within it is
    invited, then served."""
    big = b"Content-Length: %d" % (100 << 20)
    dt, out, closed = raw(d.port, post(INFER, [big, b"Expect: 100-continue"], b""))
    check(status_of(out) == 413 and b"100 Continue" not in out and b"max_body_bytes" in out
          and closed and dt < 2, "Expect: 100-continue with 100 MB: 413 at once, not invited", (dt, out[:300]))
    s = socket.create_connection(("127.0.0.1", d.port))
    s.settimeout(5)
    try:
        s.sendall(post(INFER, [b"Content-Length: %d" % len(BODY), b"Expect: 100-continue",
                               b"Connection: close"], b""))
        first = s.recv(65536)
        check(first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "a body within the limit is invited", first[:200])
        s.sendall(BODY)
        out = first[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
        check(status_of(out) == 200 and b"outputs" in out, "then served: 200", out[:200])
    finally:
        s.close()


def test_compressed_answers(d):
    """Accept-Encoding (docs/HTTP.md "Compressed requests and answers"): gzip or deflate as
    asked, q-values read, the body the same bytes once decompressed, JSON and binary (whose
    Inference-Header-Content-Length stays the JSON header's own length), with Vary; small
    answers and a refused coding go as they are."""
    import json
    import zlib
    ts = json.load(open(os.path.join(DEMO, "digits_lstm", "test_set.json")))
    inputs = [{"name": "input", "datatype": "FP32", "shape": [8, 8, 8], "data": ts["x"][:8]}]
    path = "/v2/models/digits_lstm/infer"
    outs = [{"name": n, "parameters": {"binary_data": True}} for n in ("output", "h_n", "c_n", "scores")]
    binary = json.dumps({"inputs": inputs, "outputs": outs}).encode()
    bodies = ((json.dumps({"inputs": inputs}).encode(), {}, "JSON"),
              (binary, {"Inference-Header-Content-Length": str(len(binary))}, "binary"))
    for body, hdr, what in bodies:
        st, h0, plain = d.request("POST", path, body=body, headers=hdr)
        check(st == 200 and "content-encoding" not in h0 and len(plain) > 4096,
              "%s: without Accept-Encoding, as it is" % what, (st, h0))
        for ae, enc, wbits in (("gzip", "gzip", 31), ("deflate", "deflate", 15),
                               ("gzip;q=0.5, deflate", "deflate", 15), ("br, gzip;q=0.1", "gzip", 31)):
            st, h, z = d.request("POST", path, body=body, headers=dict(hdr, **{"Accept-Encoding": ae}))
            try:
                back = zlib.decompress(z, wbits)
            except zlib.error as e:
                back = repr(e).encode()
            check(st == 200 and h.get("content-encoding") == enc and h.get("vary") == "Accept-Encoding"
                  and back == plain and len(z) < len(plain)
                  and h.get("inference-header-content-length") == h0.get("inference-header-content-length"),
                  "%s, Accept-Encoding %r: %s, decompressing to the same answer" % (what, ae, enc),
                  (st, h, len(z), len(plain)))
        for ae in ("gzip;q=0", "br", "identity"):
            st, h, b = d.request("POST", path, body=body, headers=dict(hdr, **{"Accept-Encoding": ae}))
            check(st == 200 and "content-encoding" not in h and b == plain,
                  "%s, Accept-Encoding %r: as it is" % (what, ae), (st, h))
    tfs = json.dumps({"instances": ts["x"][:8]}).encode()
    st, h0, plain = d.request("POST", "/v1/models/digits_lstm:predict", body=tfs)
    st, h, z = d.request("POST", "/v1/models/digits_lstm:predict", body=tfs, headers={"Accept-Encoding": "gzip"})
    check(st == 200 and len(plain) > 1024 and h.get("content-encoding") == "gzip"
          and zlib.decompress(z, 31) == plain, "TF Serving :predict, Accept-Encoding gzip: gzip", (st, h))
    st, h, b = d.request("GET", "/v2/health/ready", headers={"Accept-Encoding": "gzip"})
    check(st == 200 and "content-encoding" not in h and "vary" not in h, "an empty answer: as it is", h)
    st, h, b = d.request("GET", "/v2/models/nope", headers={"Accept-Encoding": "gzip"})
    check(st == 404 and "content-encoding" not in h and b"nope" in b, "a short error: as it is", (st, h, b))
    st, h, b = d.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
    check(st == 200 and h.get("content-encoding") == "gzip" and b"rnnd_up 1" in zlib.decompress(b, 31),
          "/metrics to a scraper asking for gzip (Prometheus does): gzip", h)


def main():
    rnndtest.run_test(test_output_limit)
    rnndtest.run_test(test_json_memory)
    rnndtest.run_test(test_compressed)
    d = rnndtest.Daemon("--header_timeout=2", "--access_log=errors", repo=DEMO)
    length = b"Content-Length: %d" % len(BODY)
    try:
        for path, what in ((b"/v2/models/digits_lstm%00evil/infer", "a model name cut at %00"),
                           (b"/v2/models/digits_lstm/infer%00/../../x", "a route cut at %00")):
            dt, out, _ = raw(d.port, post(path, [length, b"Connection: close"]))
            check(status_of(out) == 400 and b"%00" in out and b"X-Request-Id" in out,
                  "%s: 400 naming %%00, never the truncated route" % what, out[:200])

        dt, out, closed = raw(d.port, post(INFER, [length, b"Content-Length: 5"]))
        check(status_of(out) == 400 and b"Content-Length" in out and closed and dt < 2,
              "Content-Length headers that disagree: 400 and the connection closes", (dt, out[:200]))
        dt, out, _ = raw(d.port, post(INFER, [length, length, b"Connection: close"]))
        check(status_of(out) == 200, "two equal Content-Length headers are one: 200", out[:120])

        for te in (b"gzip, chunked", b"identity"):
            dt, out, closed = raw(d.port, post(INFER, [b"Transfer-Encoding: " + te],
                                               b"5\r\nhello\r\n0\r\n\r\n"))
            check(status_of(out) == 501 and te in out and closed and dt < 2,
                  "Transfer-Encoding %s: 501 at once and the connection closes" % te.decode(),
                  (dt, out[:200]))
        # chunked itself is served.
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
        dt, out, _ = raw(d.port, post(INFER, [b"Transfer-Encoding: chunked", b"Connection: close"], chunked))
        check(status_of(out) == 200, "Transfer-Encoding chunked: 200", out[:120])

        # Headers live in the connection's pool (per_connection_memory, 16K).
        for size, want in ((12000, 200), (20000, 431)):
            dt, out, _ = raw(d.port, post(INFER, [length, b"X-Big: " + b"a" * size, b"Connection: close"]))
            check(status_of(out) == want, "%d bytes of headers: %d" % (size, want), out[:120])

        rnndtest.run_test(test_nul, d)
        rnndtest.run_test(test_bad_length, d)
        rnndtest.run_test(test_expect, d)
        rnndtest.run_test(test_compressed_answers, d)
        rnndtest.run_test(test_half_close, d)
        rnndtest.run_test(test_smuggling, d)
        rnndtest.run_test(test_counted, d)
        rnndtest.run_test(test_log_lines, d)
        st, _, _ = d.request("GET", "/v2/health/ready")
        check(st == 200, "the daemon still serves after the framing cases", st)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", (rc, d.stderr()[-3000:]))
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err, "no sanitizer report", err[-2000:])
    finally:
        d.close()
    print("%d passed, %d failed" % (rnndtest.passed, rnndtest.failed))
    return 1 if rnndtest.failed else 0


if __name__ == "__main__":
    sys.exit(main())
