"""A big redis value for the redis tests.
usage: resp_big.py gen BYTES OUT        write BYTES of printable pseudo-random
                                        bytes to OUT (redis-cli --raw prints
                                        values as they are)
       resp_big.py setget HOST PORT IN  a blocking-connect RESP client: SET
                                        the contents of IN, GET it back on the
                                        same connection, compare byte for byte"""
import hashlib
import socket
import sys


def gen(n, out):
    chunks, h, have = [], b"fabsock", 0
    while have < n:
        h = hashlib.sha256(h).digest()
        chunks.append(h.hex().encode())
        have += 64
    open(out, "wb").write(b"".join(chunks)[:n])


def setget(host, port, path):
    value = open(path, "rb").read()
    # no timeout: connect(2) blocks, as in most simple clients
    s = socket.create_connection((host, port))
    f = s.makefile("rb")

    def cmd(*args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)

    cmd(b"SET", b"big", value)
    line = f.readline()
    if line != b"+OK\r\n":
        sys.exit("SET: %r" % line[:80])
    cmd(b"GET", b"big")
    line = f.readline()
    if line != b"$%d\r\n" % len(value):
        sys.exit("GET: header %r" % line[:80])
    got = f.read(len(value) + 2)
    if got != value + b"\r\n":
        sys.exit("GET: %d bytes differ from the %d stored" % (len(got) - 2, len(value)))
    print("ok")


if sys.argv[1] == "gen":
    gen(int(sys.argv[2]), sys.argv[3])
else:
    setget(sys.argv[2], int(sys.argv[3]), sys.argv[4])
