"""A launched client on the dpdk provider that forks (dpdk_memif.sh): echo on
connection A, fork; the child opens connection B (it must not touch the
parent's DPDK port: its provider refuses, B takes the next provider or the
kernel), echoes, and exits through exit() (destructors run: the provider's
cleanup must leave the parent's port alone); then the parent echoes on A
again (moved to the kernel at the fork) and on a new connection C (dpdk).
Each echo: 64 KiB of random bytes, half-close, the echo read to EOF.
usage: dpdk_fork.py PORT"""
import os
import socket
import sys

port = int(sys.argv[1])


def echo(conn, size=65536):
    data = os.urandom(size)
    conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
    back = bytearray()
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        back += chunk
    conn.close()
    return bytes(back) == data


def connect():
    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(30)
    return c


a = connect()
a.sendall(b"x")  # A is negotiated and on the fabric before the fork
if a.recv(1) != b"x":
    sys.exit("A: no echo before the fork")
pid = os.fork()
if pid == 0:
    ok = echo(connect())
    print("child: connection B %s" % ("byte-exact" if ok else "MISMATCH"), flush=True)
    sys.exit(0 if ok else 1)  # exit(): atexit handlers and destructors run
_, st = os.waitpid(pid, 0)
ok_a = echo(a)
ok_c = echo(connect())
print("parent: A after the fork %s, new connection C %s, child exit %d" %
      ("byte-exact" if ok_a else "MISMATCH", "byte-exact" if ok_c else "MISMATCH",
       os.waitstatus_to_exitcode(st)), flush=True)
sys.exit(0 if ok_a and ok_c and st == 0 else 1)
