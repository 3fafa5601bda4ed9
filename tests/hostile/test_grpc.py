#!/usr/bin/env python3
"""test_grpc.py: hostile HTTP/2 and gRPC input against the real rnnd (docs/DESIGN.md §11,
docs/HTTP.md "gRPC", tests/hostile/README.md).

The frames are crafted with the h2/hpack/hyperframe packages (PyPI, the venv tests/run.sh
makes).  Each case expects its gRPC status or its connection's end, and meanwhile a real
client (tritonclient.grpc, on its own connection) keeps sending inference that must all
be answered right: the daemon keeps serving and loses nothing it accepted.  The cases:
rapid reset (a flood of streams opened and reset at once), a header block that
decompresses to megabytes, SETTINGS and PING floods, CONTINUATION without end, a flow
control window that never opens, a 4 GiB length prefix, a message over
grpc_max_message_bytes, a connection past two windows of unhandled bytes, a request left
half-open (with and without grpc-timeout), grpc-timeout of centuries and malformed ones, a
malformed protobuf, compressed messages (gzip and deflate served; a bomb, corrupt data, an
encoding rnnd does not take, a flag without an encoding), a unary call without a message, a
stream of requests half-closed before any answer.

Exits 77 (SKIP) without the venv.  Environment: RNND_BIN, RNND_SRC.
"""

import socket
import struct
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
    import hpack
    import hyperframe.frame as hf
    import numpy as np
    import tritonclient.grpc as gc
    from tritonclient.grpc import service_pb2 as pb
except ImportError as e:
    print("test_grpc (hostile): SKIP: cannot import h2, hpack, tritonclient[grpc] (%s); "
          "tests/run.sh makes .venv-test with them" % e)
    sys.exit(77)

import rnndtest as th
from rnndtest import Daemon, check, run_test

INFER = "/inference.GRPCInferenceService/ModelInfer"
# Cases that send many requests use another model than the well-behaved client's (Load), which
# holds each answer bitwise to its first: batched with others, float sums may round otherwise.
OTHER = "gru_l1_uni_equal_h0"
TIMEOUT_S = 2  # the daemon's connection_timeout here


def infer_message(model=th.MODEL, steps=3, outputs=()):
    rq = pb.ModelInferRequest(model_name=model)
    rq.inputs.add(name="input", datatype="FP32", shape=[1, steps, 5])
    for name in outputs:
        rq.outputs.add(name=name)
    rq.raw_input_contents.append(np.zeros((1, steps, 5), np.float32).tobytes())
    body = rq.SerializeToString()
    return b"\0" + struct.pack(">I", len(body)) + body


class Conn:
    """One HTTP/2 client connection (h2), frames of our own when asked."""

    def __init__(self, port, settings=None):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.h = h2.connection.H2Connection(cfg)
        self.h.initiate_connection()
        if settings:
            self.h.update_settings(settings)
        self.flush()
        self.events = []
        self.closed = False

    def flush(self):
        data = self.h.data_to_send()
        if data:
            self.s.sendall(data)

    def data(self, sid, data, end=False):
        """DATA frames of at most 16 KB."""
        for k in range(0, max(len(data), 1), 16384):
            last = k + 16384 >= len(data)
            self.h.send_data(sid, data[k:k + 16384], end_stream=end and last)
        self.flush()

    def raw(self, data):
        self.s.sendall(data)

    def headers(self, sid, path=INFER, extra=(), end=False):
        self.h.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"),
                                  (":authority", "x"), ("content-type", "application/grpc"),
                                  ("te", "trailers")] + list(extra), end_stream=end)
        self.flush()

    def pump(self, until, timeout=5.0):
        """Reads events until until(events) or the timeout; returns whether it held."""
        deadline = time.time() + timeout
        while not until(self.events) and time.time() < deadline and not self.closed:
            self.s.settimeout(max(0.01, deadline - time.time()))
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                data = b""
            if not data:
                self.closed = True
                break
            try:
                self.events += self.h.receive_data(data)
            except Exception as e:  # the server broke the protocol? say so
                self.events.append(e)
                self.closed = True
            try:
                self.flush()
            except OSError:
                self.closed = True
        return until(self.events)

    def status(self, sid, timeout=5.0):
        """The grpc-status of stream sid (from trailers or a trailers-only answer), or None."""
        def found(evs):
            return any(isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived))
                       and e.stream_id == sid and "grpc-status" in dict(e.headers) for e in evs) or \
                any(isinstance(e, h2.events.StreamReset) and e.stream_id == sid for e in evs)
        self.pump(found, timeout)
        for e in self.events:
            if isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)) and e.stream_id == sid:
                d = dict(e.headers)
                if "grpc-status" in d:
                    return int(d["grpc-status"]), d.get("grpc-message", "")
            if isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                return "reset", e.error_code
        return None

    def goaway(self, timeout=5.0):
        self.pump(lambda evs: any(isinstance(e, h2.events.ConnectionTerminated) for e in evs), timeout)
        for e in self.events:
            if isinstance(e, h2.events.ConnectionTerminated):
                return e.error_code
        return "closed" if self.closed else None

    def close(self):
        self.s.close()


class Load(threading.Thread):
    """A well-behaved client (tritonclient.grpc) inferring all along: nothing it sends may fail."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url = "127.0.0.1:%d" % port
        self.stop = threading.Event()
        self.ok = self.bad = 0
        self.errors = []

    def run(self):
        c = gc.InferenceServerClient(self.url)
        x = np.ones((1, 4, 5), np.float32)
        i = gc.InferInput("input", list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        want = None
        while not self.stop.is_set():
            try:
                got = c.infer(th.MODEL, [i], client_timeout=30).as_numpy("h_n")
                want = got if want is None else want
                if np.array_equal(got, want):
                    self.ok += 1
                else:
                    self.bad += 1
            except Exception as e:
                self.bad += 1
                self.errors.append(str(e)[:200])
            time.sleep(0.01)
        c.close()


def served(d):
    """A fresh well-behaved call works."""
    c = gc.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    try:
        return c.is_server_ready()
    finally:
        c.close()


# ---------------------------------------------------------------- the cases

def test_rapid_reset(d):
    """Streams opened with a request and reset at once, by the thousand (CVE-2023-44487):
    the connection is told to go (GOAWAY) and the daemon does not run them all."""
    c = Conn(d.grpc_port)
    msg = infer_message(steps=50)
    burst = b""
    enc = c.h.encoder
    for k in range(2000):
        sid = 1 + 2 * k
        hdr = enc.encode([(":method", "POST"), (":path", INFER), (":scheme", "http"), (":authority", "x"),
                          ("content-type", "application/grpc")])
        f = hf.HeadersFrame(sid, hdr, flags=["END_HEADERS"])
        burst += f.serialize() + hf.DataFrame(sid, msg, flags=["END_STREAM"]).serialize()
        burst += hf.RstStreamFrame(sid, error_code=8).serialize()
    try:
        c.raw(burst)
    except OSError:
        pass
    code = c.goaway(10)
    check(code is not None, "rapid reset: the connection is ended (GOAWAY or closed)", code)
    c.close()
    check(served(d), "rapid reset: the daemon serves a new client")


def test_headers_over_limit(d):
    """20 KB of headers, past grpc_max_header_bytes (16K) though under nghttp2's own limits:
    the stream is reset, the connection goes on."""
    c = Conn(d.grpc_port)
    c.headers(1, extra=[("x-h%d" % k, "v" * 1000) for k in range(20)], end=True)
    st = c.status(1)
    check(st is not None and st[0] == "reset", "headers over grpc_max_header_bytes: the stream is reset", st)
    c.headers(3)
    c.data(3, infer_message(), end=True)
    check(c.status(3) == (0, ""), "the connection serves the next call")
    c.close()


def test_header_bomb(d):
    """One 4000-byte header indexed once, then referenced 1000 times: 4 MB decompressed."""
    c = Conn(d.grpc_port)
    enc = hpack.Encoder()
    big = ("x-big", "v" * 4000)
    base = [(":method", "POST"), (":path", INFER), (":scheme", "http"), (":authority", "x"),
            ("content-type", "application/grpc")]
    block = enc.encode(base + [big])  # indexes it
    c.raw(hf.HeadersFrame(1, block, flags=["END_HEADERS"]).serialize())
    block = enc.encode(base + [big] * 1000)  # one byte a reference
    check(len(block) < 10000, "the bomb is small on the wire (4 MB decompressed)", len(block))
    c.raw(hf.HeadersFrame(3, block, flags=["END_HEADERS", "END_STREAM"]).serialize())
    c.h = None  # our hpack state is not h2's now: read raw frames
    c.s.settimeout(5)
    data = b""
    deadline = time.time() + 5
    seen = {}
    while time.time() < deadline:
        try:
            chunk = c.s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
        off = 0
        while len(data) - off >= 9:
            n = int.from_bytes(data[off:off + 3], "big")
            if len(data) - off < 9 + n:
                break
            ftype, sid = data[off + 3], int.from_bytes(data[off + 5:off + 9], "big") & 0x7fffffff
            seen.setdefault(sid, []).append(ftype)
            off += 9 + n
        if 3 in seen.get(3, []) or 7 in seen.get(0, []):
            break
    check(3 in seen.get(3, []) or 7 in seen.get(0, []),
          "a header list of megabytes: its stream reset (or the connection ended)", seen)
    c.close()
    check(served(d), "header bomb: the daemon serves a new client")


def flood(d, frame, what):
    """Control frames in batches of 100, their ACKs read between, 3000 in well under a second:
    nghttp2's own limit (1000 ACKs queued unsent) never trips, rnnd's (1000 a second
    without DATA) does: GOAWAY ENHANCE_YOUR_CALM."""
    c = Conn(d.grpc_port)
    for b in range(30):
        try:
            c.raw(b"".join(frame(100 * b + k).serialize() for k in range(100)))
        except OSError:
            break
        c.pump(lambda evs: any(isinstance(e, h2.events.ConnectionTerminated) for e in evs), 0.01)
        if c.closed or any(isinstance(e, h2.events.ConnectionTerminated) for e in c.events):
            break
    code = c.goaway(10)
    check(code == 11, "a %s flood: GOAWAY ENHANCE_YOUR_CALM" % what, code)
    c.close()
    check(served(d), "%s flood: the daemon serves a new client" % what)


def test_ping_flood(d):
    flood(d, lambda k: hf.PingFrame(0, opaque_data=struct.pack(">Q", k)), "PING")


def test_settings_flood(d):
    flood(d, lambda k: hf.SettingsFrame(0, settings={4: 65535 + (k % 7)}), "SETTINGS")


def test_continuation_flood(d):
    """HEADERS without END_HEADERS, then CONTINUATION frames that never end the block."""
    c = Conn(d.grpc_port)
    enc = c.h.encoder
    block = enc.encode([(":method", "POST"), (":path", INFER), (":scheme", "http"), (":authority", "x")])
    frames = hf.HeadersFrame(1, block).serialize()
    frames += b"".join(hf.ContinuationFrame(1, enc.encode([("x-a%d" % k, "b")])).serialize() for k in range(200))
    try:
        c.raw(frames)
    except OSError:
        pass
    code = c.goaway(10)
    check(code is not None, "CONTINUATION without end: the connection is ended", code)
    c.close()
    check(served(d), "CONTINUATION flood: the daemon serves a new client")


def test_zero_window(d):
    """A client whose window never opens: its answer cannot go; the connection is closed after
    connection_timeout, and the request did run."""
    c = Conn(d.grpc_port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.pump(lambda evs: any(isinstance(e, h2.events.SettingsAcknowledged) for e in evs), 5)
    c.headers(1)
    c.h.send_data(1, infer_message(), end_stream=True)
    c.flush()
    t0 = time.time()
    code = c.goaway(TIMEOUT_S + 5)
    took = time.time() - t0
    check(code is not None and took >= TIMEOUT_S - 0.5, "a window that never opens: the connection is closed "
          "after connection_timeout", (code, took))
    c.close()
    check(served(d), "zero window: the daemon serves a new client")


def test_length_prefix(d):
    c = Conn(d.grpc_port)
    c.headers(1)
    c.h.send_data(1, b"\0\xff\xff\xff\xff" + b"x" * 100)
    c.flush()
    st = c.status(1)
    check(st is not None and st[0] == 8 and "over grpc_max_message_bytes" in st[1],
          "a 4 GiB length prefix: RESOURCE_EXHAUSTED at once", st)
    c.headers(3)  # the connection still takes calls
    c.h.send_data(3, infer_message(), end_stream=True)
    c.flush()
    st = c.status(3)
    check(st == (0, ""), "the same connection serves the next call", st)
    c.close()


def test_over_limit(d):
    c = Conn(d.grpc_port)
    big = infer_message(steps=4000)  # 80 KB > 64K
    c.headers(1)
    c.data(1, big[:60000])
    st = c.status(1)
    check(st is not None and st[0] == 8, "a message over grpc_max_message_bytes: RESOURCE_EXHAUSTED", st)
    c.close()


def send_flowed(c, sid, data, end=False):
    """DATA as the peer's flow control windows allow, waiting for its WINDOW_UPDATEs: "sent",
    "closed" (the peer ended the stream meanwhile) or "stalled"."""
    off = 0
    while off < len(data):
        try:
            w = min(c.h.local_flow_control_window(sid), c.h.max_outbound_frame_size)
            if w == 0:
                n = len(c.events)
                if not c.pump(lambda evs: len(evs) > n, 5):
                    return "stalled"
                continue
            chunk = data[off:off + w]
            off += len(chunk)
            c.h.send_data(sid, chunk, end_stream=end and off == len(data))
        except h2.exceptions.StreamClosedError:
            return "closed"
        c.flush()
    return "sent"


def test_connection_budget(d):
    """Three streams each holding most of a message (50 KB of 60): the connection's window is
    credited as bytes arrive, so all three can send, but a connection may hold at most twice
    grpc_max_message_bytes (64K) unhandled: the third stream is failed RESOURCE_EXHAUSTED, the
    first two, completed, are answered."""
    c = Conn(d.grpc_port)
    msg = infer_message(steps=3000, outputs=["h_n"])  # 60 KB; a short answer, which our window takes
    for sid in (1, 3):
        c.headers(sid)
        check(send_flowed(c, sid, msg[:50000]) == "sent", "stream %d: 50 KB sent as the windows allow" % sid)
    c.headers(5)
    send_flowed(c, 5, msg[:50000])  # failed on the way: "closed", or "sent" before the answer came
    st = c.status(5)
    check(st is not None and st[0] == 8 and "twice grpc_max_message_bytes" in st[1],
          "a third window of unhandled bytes on one connection: RESOURCE_EXHAUSTED", st)
    for sid in (1, 3):
        check(send_flowed(c, sid, msg[50000:], end=True) == "sent", "stream %d: the rest sent" % sid)
    for sid in (1, 3):
        st = c.status(sid)
        check(st == (0, ""), "stream %d, within the budget, is answered" % sid, st)
    c.close()


def test_half_open(d):
    """A request message that never ends: CANCELLED after connection_timeout, or
    DEADLINE_EXCEEDED at its grpc-timeout."""
    c = Conn(d.grpc_port)
    msg = infer_message()
    c.headers(1)
    c.h.send_data(1, msg[:10])
    c.headers(3, extra=[("grpc-timeout", "300m")])
    c.h.send_data(3, msg[:10])
    c.flush()
    t0 = time.time()
    st3 = c.status(3, 5)
    t3 = time.time() - t0
    check(st3 is not None and st3[0] == 4 and t3 < 1.5, "half-open with grpc-timeout 300m: DEADLINE_EXCEEDED "
          "at it", (st3, t3))
    st1 = c.status(1, TIMEOUT_S + 5)
    t1 = time.time() - t0
    check(st1 is not None and st1[0] == 1 and t1 >= TIMEOUT_S - 0.5,
          "half-open without a deadline: CANCELLED after connection_timeout", (st1, t1))
    c.close()


def test_bad_messages(d):
    c = Conn(d.grpc_port)
    cases = [(b"\0\0\0\0\x03\xff\xff\xff", 3, "not a inference.ModelInferRequest message"),
             (None, 3, "no request message")]
    for k, (body, want, text) in enumerate(cases):
        sid = 1 + 2 * k
        c.headers(sid, end=body is None)
        if body is not None:
            c.h.send_data(sid, body, end_stream=True)
            c.flush()
        st = c.status(sid)
        check(st is not None and st[0] == want and text in st[1], "%r: gRPC status %d saying %r" % (body, want, text),
              st)
    c.headers(99, path="/no.Such/Method", end=True)
    st = c.status(99)
    check(st is not None and st[0] == 12, "an unknown method: UNIMPLEMENTED", st)
    # Content types: protobuf's two names are served; JSON (gRPC's +json) was read as protobuf.
    for sid, ctype, want in ((101, "application/grpc+proto", 0), (103, "application/grpc; x=y", 0),
                             (105, "application/grpc+json", 12), (107, "application/grpcx", 12)):
        c.h.send_headers(sid, [(":method", "POST"), (":path", INFER), (":scheme", "http"), (":authority", "x"),
                               ("content-type", ctype), ("te", "trailers")])
        c.data(sid, infer_message(), end=True)
        st = c.status(sid)
        check(st is not None and st[0] == want and (want == 0 or "protobuf messages only" in st[1]),
              "content-type %s: gRPC status %d" % (ctype, want), st)
    c.close()


def answer_bytes(c, sid):
    return b"".join(e.data for e in c.events if isinstance(e, h2.events.DataReceived) and e.stream_id == sid)


def response_header(c, sid, name):
    for e in c.events:
        if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
            return dict(e.headers).get(name)
    return None


def test_compressed(d):
    """grpc-encoding gzip and deflate (tritonclient's compression_algorithm): the message served as
    itself; 16 MB of zeros in 16 KB of gzip RESOURCE_EXHAUSTED naming grpc_max_message_bytes;
    data that does not inflate INTERNAL, as gRPC's core says; an encoding rnnd does not take
    UNIMPLEMENTED naming it, and grpc-accept-encoding lists what it takes; the compressed flag
    without an encoding, or a flag other than 0 and 1, INTERNAL.  (rnnd answered every
    compressed message UNIMPLEMENTED.)"""
    import gzip
    import zlib
    plain = infer_message()
    body = plain[5:]

    def framed(payload, flag=1):
        return bytes([flag]) + struct.pack(">I", len(payload)) + payload

    c = Conn(d.grpc_port)
    c.headers(1)
    c.data(1, plain, end=True)
    st = c.status(1)
    want = answer_bytes(c, 1)
    check(st is not None and st[0] == 0 and len(want) > 5, "the message uncompressed: OK", st)
    bomb = gzip.compress(b"\0" * (16 << 20))
    gz = gzip.compress(body)
    cases = [(3, "gzip", framed(gz), 0, ""), (5, "deflate", framed(zlib.compress(body)), 0, ""),
             (7, "gzip", plain, 0, ""),  # the flag says per message: this one is not compressed
             (9, "gzip", framed(bomb), 8, "decompresses to more than grpc_max_message_bytes"),
             (11, "gzip", framed(gz[:20] + b"x" * 40 + gz[60:]), 13, "not valid gzip"),
             (13, "deflate", framed(gz), 13, "not valid deflate"),
             (15, "gzip", framed(gz[:len(gz) // 2]), 13, "ends early"),
             (17, "snappy", framed(gz), 12, "grpc-encoding 'snappy' is not supported"),
             (19, None, framed(gz), 13, "without grpc-encoding"),
             (21, "gzip", framed(gz, flag=2), 13, "flag is 2")]
    for sid, enc, data, code, text in cases:
        c.headers(sid, extra=[("grpc-encoding", enc)] if enc else [])
        c.data(sid, data, end=True)
        st = c.status(sid)
        what = "%s, %d bytes%s" % (enc, len(data), " (%s)" % text if text else "")
        check(st is not None and st[0] == code and text in st[1], "%s: gRPC status %d" % (what, code), st)
        if code == 0:
            check(answer_bytes(c, sid) == want, "%s: the answer is the uncompressed message's" % what)
        accepted = response_header(c, sid, "grpc-accept-encoding") or ""
        check("gzip" in accepted and "deflate" in accepted, "%s: grpc-accept-encoding lists gzip, deflate" % what,
              accepted)
    c.close()


def stream_answers(c, sid):
    """The ids (or error messages) of the ModelStreamInferResponses stream sid received."""
    data = b"".join(e.data for e in c.events if isinstance(e, h2.events.DataReceived) and e.stream_id == sid)
    ids, off = [], 0
    while off + 5 <= len(data):
        n = struct.unpack(">I", data[off + 1:off + 5])[0]
        r = pb.ModelStreamInferResponse.FromString(data[off + 5:off + 5 + n])
        ids.append(r.error_message or r.infer_response.id)
        off += 5 + n
    return ids


def test_stream_half_closed(d):
    """A ModelStreamInfer client that sends its requests and half-closes in one go, before any
    answer (as grpcio does with a short request iterator): each is answered, in order, then the
    call ends, OK, or INVALID_ARGUMENT when a piece of a message followed them.  (The call ended
    at once with every answer lost, counted 499; past the 64 a stream holds waiting, the
    answers came but the call never ended.)"""
    c = Conn(d.grpc_port)
    for sid, (n, tail, want) in zip(range(1, 100, 2), ((3, b"", 0), (100, b"", 0), (3, b"\0\0\0\0\x10abc", 3),
                                                       (100, b"\0\0", 3))):
        msgs = []
        for k in range(n):
            rq = pb.ModelInferRequest(model_name=OTHER, id="half-%d" % k)
            rq.inputs.add(name="input", datatype="FP32", shape=[1, 3, 5])
            rq.raw_input_contents.append(np.zeros((1, 3, 5), np.float32).tobytes())
            body = rq.SerializeToString()
            msgs.append(b"\0" + struct.pack(">I", len(body)) + body)
        c.headers(sid, path="/inference.GRPCInferenceService/ModelStreamInfer")
        c.data(sid, b"".join(msgs) + tail, end=True)
        st = c.status(sid, 10)
        ids = stream_answers(c, sid)
        check(st is not None and st[0] == want and (want == 0 or "ended inside a message" in st[1]) and
              ids == ["half-%d" % k for k in range(n)],
              "%d requests%s and the half-close in one go: each answered in order, then status %d" %
              (n, " and a piece of one" if tail else "", want), (st, len(ids), ids[:3]))
    c.close()


def test_timeouts(d):
    """grpc-timeout at its extremes: 8 digits of hours (centuries) is as good as none (35868669H
    wrapped past 2^64 ns to two minutes ago, and the call expired at once: DEADLINE_EXCEEDED);
    a malformed one is INVALID_ARGUMENT naming it."""
    c = Conn(d.grpc_port)
    for k, (value, want) in enumerate((("35868669H", 0), ("99999999H", 0), ("15372287H", 0), ("99999999S", 0),
                                       ("123456789S", 3), ("1.5S", 3), ("-1S", 3), ("10", 3))):
        sid = 1 + 2 * k
        c.headers(sid, extra=[("grpc-timeout", value)])
        c.data(sid, infer_message(model=OTHER), end=True)
        st = c.status(sid)
        check(st is not None and st[0] == want and (want == 0 or "grpc-timeout" in st[1]),
              "grpc-timeout %s: gRPC status %d" % (value, want), st)
    c.close()


def main():
    d = Daemon("--connection_timeout=%d" % TIMEOUT_S, "--grpc_max_message_bytes=64K")
    load = Load(d.grpc_port)
    load.start()
    try:
        for t in (test_bad_messages, test_compressed, test_timeouts, test_stream_half_closed, test_length_prefix, test_over_limit, test_connection_budget, test_half_open,
                  test_headers_over_limit,
                  test_header_bomb,
                  test_ping_flood, test_settings_flood, test_continuation_flood, test_rapid_reset,
                  test_zero_window):
            run_test(t, d)
        load.stop.set()
        load.join(60)
        check(load.ok > 0 and load.bad == 0, "the well-behaved client's inferences all answered right meanwhile",
              (load.ok, load.bad, load.errors[:3]))
        check(d.request("GET", "/v2/health/ready")[0] == 200, "HTTP still serves")
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err and "ThreadSanitizer" not in err,
              "no sanitizer report", err[-3000:])
    finally:
        load.stop.set()
        d.close()
    return th.summary("test_grpc (hostile)")


if __name__ == "__main__":
    sys.exit(main())
