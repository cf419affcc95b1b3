"""Peer death for the acceleration tests: two launched processes, one is the
victim (SIGKILLed by the script once it printed "ready"), the other the
survivor, blocked in WAIT when the victim dies, must see end of stream or a
reset, like on the kernel.
usage: death.py ROLE SIDE PORT WAIT
  ROLE: victim | survivor;  SIDE: server | client;
  WAIT: recv | epoll | poll | send | smallsend
The survivor prints "survivor: <outcome>" and exits 0 when it saw EOF/reset."""
import errno
import select
import signal
import socket
import sys

role, side, port, wait = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
signal.alarm(20)  # bound: a survivor that never learns of the death fails

if side == "server":
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen()
    print("listening", flush=True)
    conn, _ = lsock.accept()
else:
    conn = socket.create_connection(("127.0.0.1", port))

# one byte each way: the negotiation has settled before anyone dies
conn.sendall(b"x")
if conn.recv(1) != b"x":
    print("%s: no hello byte" % role)
    sys.exit(1)

if role == "victim":
    print("ready", flush=True)
    signal.pause()  # SIGKILLed here; never reads again
    sys.exit(1)

print("ready", flush=True)
outcome = None
try:
    if wait == "recv":
        data = conn.recv(1)
        outcome = "eof" if data == b"" else "data?"
    elif wait in ("epoll", "poll"):
        if wait == "epoll":
            ep = select.epoll()
            ep.register(conn.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
            evs = ep.poll(15)
        else:
            p = select.poll()
            p.register(conn.fileno(), select.POLLIN)
            evs = p.poll(15000)
        if not evs:
            outcome = "timeout"
        else:
            data = conn.recv(1)
            outcome = "eof" if data == b"" else "data?"
    elif wait == "send":
        # the victim never reads: the window fills, the send blocks, the death ends it
        chunk = b"y" * 65536
        for _ in range(100000):
            conn.send(chunk)
        outcome = "never blocked"
    elif wait == "smallsend":
        # one byte a call: the credit never runs out, the provider's queue to
        # the victim fills and stays full
        for _ in range(100000000):
            conn.send(b"z")
        outcome = "never blocked"
except ConnectionResetError:
    outcome = "reset"
except BrokenPipeError:
    outcome = "epipe"
except OSError as e:
    outcome = "error %s" % errno.errorcode.get(e.errno, e.errno)
print("survivor: %s" % outcome, flush=True)
sys.exit(0 if outcome in ("eof", "reset", "epipe") else 1)
