#!/usr/bin/env python3
"""Accelerated redis load for redis_bgsave.sh: N connections (blocking connect,
so libfabsock negotiates them), each pipelining SET and GET of its own keys and
checking every reply, until the file STOP exists (at most 90 s).
usage: redis_load.py PORT N STOP. Prints "ops O migrated M"; exit 1 on any error."""
import ctypes
import os
import socket
import sys
import threading
import time

port, nconn, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
errors = []
ops = [0] * nconn


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def reader(s):
    buf = bytearray()

    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("EOF from redis")
            buf += chunk
        i = buf.index(b"\r\n")
        ln = bytes(buf[:i])
        del buf[:i + 2]
        return ln

    def exact(n):
        nonlocal buf
        while len(buf) < n + 2:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("EOF from redis")
            buf += chunk
        v = bytes(buf[:n])
        del buf[:n + 2]
        return v

    def reply():
        ln = line()
        if ln[:1] == b"$":
            n = int(ln[1:])
            return None if n < 0 else exact(n)
        return ln
    return reply


def worker(t, s):
    try:
        reply = reader(s)
        rnd = 0
        deadline = time.monotonic() + 90
        while not os.path.exists(stop) and time.monotonic() < deadline:
            keys = [b"load:%d:%d" % (t, i) for i in range(50)]
            vals = [b"%d-%d-%s" % (rnd, i, b"x" * ((rnd * 7 + i) % 200)) for i in range(50)]
            s.sendall(b"".join(resp(b"SET", k, v) for k, v in zip(keys, vals)))
            for _ in keys:
                r = reply()
                if r != b"+OK":
                    raise ValueError("SET reply %r" % r)
            s.sendall(b"".join(resp(b"GET", k) for k in keys))
            for k, v in zip(keys, vals):
                r = reply()
                if r != v:
                    raise ValueError("GET %r: %r, want %r" % (k, r, v))
            ops[t] += 100
            rnd += 1
        s.close()
    except Exception as e:  # noqa: BLE001 - any failure is the test's failure
        errors.append("connection %d: %s" % (t, e))


# connected one after the other: the server negotiates each as it accepts it
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(nconn)]
threads = [threading.Thread(target=worker, args=(t, socks[t])) for t in range(nconn)]
for th in threads:
    th.start()
for th in threads:
    th.join()
lib = ctypes.CDLL(None)
v = ctypes.c_ulonglong(0)
mig = v.value if lib.fsk_counter(b"migrate_peer", ctypes.byref(v)) == 0 else -1

print("ops %d migrated %d" % (sum(ops), mig))
for e in errors:
    print("ERROR:", e)
sys.exit(1 if errors else 0)
