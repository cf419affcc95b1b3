"""A file server for tests/accel/sendfile.sh, on one connection: the client
asks three times ("small", "big", "small"); the server answers each with the
8-byte length then the file (os.sendfile, in one call each time it can), and
the client checks every byte (sha256) and that the connection goes on after
the big one (the big sendfile may have moved it to the kernel).
usage: sendfile.py server PORT SMALL BIG | sendfile.py client PORT SMALL BIG"""
import hashlib
import os
import socket
import struct
import sys

role, port, small, big = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            sys.exit("end of stream after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


if role == "server":
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen()
    print("listening", flush=True)
    conn, _ = lsock.accept()
    for _ in range(3):
        name = recv_exact(conn, 5)
        path = small if name == b"small" else big
        size = os.path.getsize(path)
        conn.sendall(struct.pack("!Q", size))
        with open(path, "rb") as f:
            off = 0
            while off < size:
                n = os.sendfile(conn.fileno(), f.fileno(), off, size - off)
                if n <= 0:
                    sys.exit("sendfile returned %d at %d" % (n, off))
                off += n
    conn.close()
else:
    sock = socket.create_connection(("127.0.0.1", port))
    for name, path in ((b"small", small), (b"big\0\0", big), (b"small", small)):
        sock.sendall(name)
        size = struct.unpack("!Q", recv_exact(sock, 8))[0]
        data = recv_exact(sock, size)
        with open(path, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        if hashlib.sha256(data).hexdigest() != want:
            sys.exit("%s: wrong bytes" % path)
    sock.close()
    print("byte-exact", flush=True)
