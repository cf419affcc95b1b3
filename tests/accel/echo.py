"""Blocking TCP echo for the acceleration tests: the server returns sha256 of
what it received followed by the bytes reversed; the client checks both.
usage: echo.py server PORT BYTES [--banner] [--accept-delay=MS] | echo.py client PORT BYTES [--banner]
--banner: the server speaks first (a server-speaks-first protocol).
--accept-delay=MS: the server accepts that long after it printed "listening"."""
import hashlib
import os
import socket
import sys
import time

role, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
banner = "--banner" in sys.argv
accept_delay = 0.0
for arg in sys.argv:
    if arg.startswith("--accept-delay="):
        accept_delay = int(arg.split("=", 1)[1]) / 1000.0
BANNER = b"220 fabsock echo ready\r\n"


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


if role == "server":
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen()
    print("listening", flush=True)
    if accept_delay:
        time.sleep(accept_delay)
    conn, _ = lsock.accept()
    if banner:
        conn.sendall(BANNER)
    data = recv_exact(conn, size)
    conn.sendall(hashlib.sha256(data).digest() + data[::-1])
    conn.shutdown(socket.SHUT_WR)
    tail = conn.recv(1)  # the client closes: EOF
    conn.close()
    sys.exit(0 if len(data) == size and tail == b"" else 1)
else:
    data = os.urandom(size)
    conn = socket.create_connection(("127.0.0.1", port))
    if banner and recv_exact(conn, len(BANNER)) != BANNER:
        print("client: wrong banner")
        sys.exit(1)
    conn.sendall(data)
    back = recv_exact(conn, 32 + size)
    eof = conn.recv(1)
    conn.close()
    ok = back[:32] == hashlib.sha256(data).digest() and back[32:] == data[::-1] and eof == b""
    print("client: %s (%d bytes each way)" % ("byte-exact" if ok else "MISMATCH", size))
    sys.exit(0 if ok else 1)
