#!/usr/bin/env python3
"""test_connections.py: the hostile-client suite's connection abuse, against the
real rnnd (docs/TESTING.md, issue 18 items 4 and 5; the limits are in
docs/OPERATIONS.md):

- 1,100 connections that send half a request line and close leave no socket
  in CLOSE-WAIT (libmicrohttpd 0.9.75's epoll mode held them until
  connection_timeout) and refuse no client;
- 100 that send half a body and close leave none either, and no request in
  flight (issue 29);
- SIGTERM while keep-alive clients keep the HTTP threads busy exits 0, even with
  the main thread's epoll_ctl slowed (libmicrohttpd's quiesce race, issue 29);
- 400 idle connections from one address, past a connection_limit of 256, do
  not shut out a client from another address (the per-address limit, and
  the longest idle connections closed to make room);
- clients trickling header bytes are closed after header_timeout, while a
  keep-alive client asking every second is served throughout;
- per_address_limit: one address past it is refused, another is served, on the
  HTTP and on the gRPC listener alike.

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
"""

import http.client
import os
import resource
import socket
import sys
import threading
import time

import rnndtest  # the harness (tests/support)

check = rnndtest.check
DEMO = os.path.join(rnndtest.SRC, "config", "models")


# Seconds for the daemon to close connections whose clients left: the bug these checks
# guard against held them for connection_timeout (30 s); 10 s leaves room for a CI host
# busy with other suites (3 s once left 308 of 1,100 still queued).
CLOSE_WAIT_S = 10


def probe(port, source="127.0.0.2", conn=None):
    """GET /v2/health/live from another loopback address: (status or error, seconds)."""
    t0 = time.time()
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        c.request("GET", "/v2/health/live")
        r = c.getresponse()
        r.read()
        return r.status, time.time() - t0
    except OSError as e:
        return str(e), time.time() - t0
    finally:
        if conn is None:
            c.close()


def close_wait(port):
    """Sockets of the daemon's port in CLOSE-WAIT (state 08 of /proc/net/tcp)."""
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "08" and int(parts[1].split(":")[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


def closed_by_daemon(s, wait):
    """Whether the daemon closed s within wait seconds (a read sees the end, or a reset)."""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_abandoned():
    d = rnndtest.Daemon(repo=DEMO)
    try:
        for _ in range(1100):
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(b"GET /v2/hea")
            s.close()
        deadline = time.time() + CLOSE_WAIT_S
        while close_wait(d.port) > 0 and time.time() < deadline:
            time.sleep(0.1)
        left = close_wait(d.port)
        check(left == 0, "1,100 abandoned half request lines leave no CLOSE-WAIT socket", left)
        st, dt = probe(d.port)
        check(st == 200 and dt < 1, "a new client is served after them", (st, dt))
        d.stop()
    finally:
        d.close()


def in_flight(d, conn):
    """The daemon's requests in flight, scraped over conn: one kept-alive connection, since a
    scrape on a connection of its own leaves that socket in CLOSE-WAIT for a moment after."""
    st, _, text = d.request("GET", "/metrics", conn=conn)
    for line in text.decode().splitlines():
        if line.startswith("rnnd_http_requests_in_flight "):
            return int(float(line.split()[1]))
    return None


def test_half_body():
    """100 clients that send half a body and close: libmicrohttpd 0.9.75 never looks at the end
    of the stream while a body arrives, so each stayed in flight, its socket in CLOSE-WAIT,
    until connection_timeout (issue 29)."""
    d = rnndtest.Daemon(repo=DEMO)
    try:
        head = (b"POST /v2/models/digits_lstm/infer HTTP/1.1\r\nHost: t\r\n"
                b"Content-Length: 1000\r\n\r\n")
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(head + b"{" * 500)
            s.close()
        scrape = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        deadline = time.time() + CLOSE_WAIT_S
        while (close_wait(d.port) > 0 or in_flight(d, scrape) != 1) and time.time() < deadline:
            time.sleep(0.1)
        left, flying = close_wait(d.port), in_flight(d, scrape)
        scrape.close()
        check(left == 0, "100 clients gone after half a body leave no CLOSE-WAIT socket", left)
        check(flying == 1, "and no request in flight but the scrape itself", flying)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0 after them", (rc, d.stderr()[-2000:]))
    finally:
        d.close()


def test_stop_under_load(shim):
    """SIGTERM while keep-alive clients keep the HTTP threads busy, with the main thread's
    epoll_ctl(EPOLL_CTL_DEL) slowed by 100 ms (epoll-del-delay.c): libmicrohttpd 0.9.75's
    MHD_quiesce_daemon() raced its pool threads there and aborted (issue 29, the -6 at SIGTERM
    seen once in the sanitizer build); rnnd stops its own accept thread instead."""
    if not shim or not os.path.exists(shim) or os.environ.get("RNND_SANITIZED", "none") not in ("", "none"):
        print("test_stop_under_load: skipped (needs the shim and an unsanitized build)")
        return
    for _ in range(3):
        d = rnndtest.Daemon(repo=DEMO, env={"LD_PRELOAD": shim})
        stop = []

        def hammer():
            try:
                c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
                while not stop:
                    c.request("GET", "/v2/health/live")
                    c.getresponse().read()
            except (OSError, http.client.HTTPException):
                pass
        threads = [threading.Thread(target=hammer) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            time.sleep(0.2)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM under keep-alive load, epoll_ctl slowed: exit 0", (rc, d.stderr()[-1500:]))
        finally:
            stop.append(1)
            for t in threads:
                t.join()
            d.close()


def test_idle_and_slow():
    d = rnndtest.Daemon("--connection_limit=256", "--header_timeout=2", repo=DEMO)
    socks = []
    try:
        for _ in range(400):
            try:
                socks.append(socket.create_connection(("127.0.0.1", d.port)))
            except OSError:
                break
        time.sleep(0.3)
        st, dt = probe(d.port)
        check(st == 200 and dt < 2, "400 idle connections from one address past a limit of 256: "
              "a client from another address is served", (st, dt))
        for s in socks:
            s.close()
        socks = []
        time.sleep(0.5)

        # Slowloris: a header line every half second, never the end of the head.
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n")
            socks.append(s)
        keep = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5, source_address=("127.0.0.2", 0))
        served = 0
        t0 = time.time()
        while time.time() - t0 < 4:
            for s in socks:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
            if probe(d.port, conn=keep)[0] == 200:
                served += 1
            time.sleep(0.5)
        closed = sum(closed_by_daemon(s, 0.5) for s in socks)
        check(closed == 20, "clients trickling header bytes are closed after header_timeout (2 s)", closed)
        check(served >= 7, "a keep-alive client asking every half second is served throughout", served)
        keep.close()
        d.stop()
    finally:
        for s in socks:
            s.close()
        d.close()


def test_per_address():
    d = rnndtest.Daemon("--per_address_limit=10", repo=DEMO)
    socks = []
    try:
        # From an address of their own: the helper's readiness probes come from
        # 127.0.0.1, and one the daemon has not yet closed (a sanitizer build)
        # would count against the limit too.
        socks = [socket.create_connection(("127.0.0.1", d.port), source_address=("127.0.0.3", 0))
                 for _ in range(12)]
        time.sleep(1)  # however slowly the daemon accepts them (a sanitizer build)
        closed = sum(closed_by_daemon(s, 0.2) for s in socks)
        check(closed == 2, "12 connections from one address with a limit of 10: 2 refused", closed)
        st, dt = probe(d.port)
        check(st == 200, "another address is served", (st, dt))
        # gRPC counts its own connections the same way: a refused one is closed at once, an
        # accepted one gets the server's SETTINGS frame (type 4) first.
        gsocks = [socket.create_connection(("127.0.0.1", d.grpc_port), source_address=("127.0.0.4", 0))
                  for _ in range(12)]
        socks += gsocks
        time.sleep(1)
        closed = sum(closed_by_daemon(s, 0.2) for s in gsocks)
        check(closed == 2, "gRPC: 12 connections from one address with a limit of 10: 2 refused", closed)
        other = socket.create_connection(("127.0.0.1", d.grpc_port), source_address=("127.0.0.2", 0))
        socks.append(other)
        other.settimeout(5)
        head = other.recv(9)
        check(len(head) == 9 and head[3] == 4, "gRPC: another address is served (the server's SETTINGS)", head)
        d.stop()
        check("refused 0 connections past connection_limit, 2 past per_address_limit" in d.stderr(),
              "gRPC: the refusals are logged", d.stderr()[-600:])
    finally:
        for s in socks:
            s.close()
        d.close()


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    rnndtest.run_test(test_abandoned)
    rnndtest.run_test(test_half_body)
    rnndtest.run_test(test_stop_under_load, sys.argv[1] if len(sys.argv) > 1 else None)
    rnndtest.run_test(test_idle_and_slow)
    rnndtest.run_test(test_per_address)
    print("%d passed, %d failed" % (rnndtest.passed, rnndtest.failed))
    return 1 if rnndtest.failed else 0


if __name__ == "__main__":
    sys.exit(main())
