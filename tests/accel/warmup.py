"""warmup.py: a client's providers open in the background (the warm-up) while
the app goes on; a signal handler the app installs meanwhile must stay its own.

server PORT: accept one connection, echo 64 bytes, exit 0.
client PORT: connect, let the server's HELLO arrive (the warm-up starts), install
a SIGUSR1 handler while libfabric loads, pause, then a 64-byte round trip; then
raise SIGUSR1: the handler must run (were it put back to the default, the
signal would kill the process)."""
import os
import signal
import socket
import sys
import time


def recv_exact(sock, n, who):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            sys.exit("%s: EOF after %d bytes" % (who, len(data)))
        data += chunk
    return data


role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    conn.sendall(recv_exact(conn, 64, "server"))
    conn.close()
    sys.exit(0)

hits = []
c = socket.create_connection(("127.0.0.1", port))
time.sleep(0.03)  # the HELLO is in: the warm-up runs (libfabric loads for ~0.2 s)
signal.signal(signal.SIGUSR1, lambda s, f: hits.append(s))
time.sleep(1.5)
msg = bytes(range(64))
c.sendall(msg)
if recv_exact(c, 64, "client") != msg:
    sys.exit("client: echo differs")
os.kill(os.getpid(), signal.SIGUSR1)
for _ in range(100):
    if hits:
        break
    time.sleep(0.01)
if not hits:
    sys.exit("client: the SIGUSR1 handler did not run")
print("client: echo exact, SIGUSR1 handler ran", flush=True)
