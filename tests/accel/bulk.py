"""Bulk TCP transfer for the acceleration tests: the client streams BYTES of
pseudo-random data (a random 1 MiB block, rotated differently for every block,
so no two blocks are alike) in sends of varying size; the server reads with
varying sizes, hashes as it goes and answers with the byte count and sha256;
the client checks both against its own.
usage: bulk.py server PORT BYTES [HOST] | bulk.py client PORT BYTES [HOST]
(HOST: the server's address, default 127.0.0.1)"""
import hashlib
import os
import socket
import struct
import sys

role, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
BLOCK = 1 << 20

if role == "server":
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, port))
    lsock.listen()
    print("listening", flush=True)
    conn, _ = lsock.accept()
    h = hashlib.sha256()
    got = 0
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    step = 0
    while got < size:
        # read sizes unrelated to the sender's: 1 B .. 1 MiB
        want = min(size - got, (4093, BLOCK, 1, 65536, 777777)[step % 5])
        step += 1
        n = conn.recv_into(view[:want])
        if n == 0:
            break
        h.update(view[:n])
        got += n
    conn.sendall(struct.pack("!Q", got) + h.digest())
    tail = conn.recv(1)
    conn.close()
    sys.exit(0 if got == size and tail == b"" else 1)
else:
    block = os.urandom(BLOCK)
    conn = socket.create_connection((host, port))
    h = hashlib.sha256()
    sent = 0
    i = 0
    while sent < size:
        r = (i * 7919) % BLOCK
        chunk = (block[r:] + block[:r])[: min(BLOCK, size - sent)]
        h.update(chunk)
        # sends of varying size, some split mid-block
        if i % 3 == 1:
            conn.sendall(chunk[:12345])
            conn.sendall(chunk[12345:])
        else:
            conn.sendall(chunk)
        sent += len(chunk)
        i += 1
    reply = b""
    while len(reply) < 40:
        part = conn.recv(40 - len(reply))
        if not part:
            break
        reply += part
    conn.close()
    ok = len(reply) == 40 and struct.unpack("!Q", reply[:8])[0] == size and reply[8:] == h.digest()
    print("client: %s (%d bytes)" % ("checksum matches" if ok else "MISMATCH", size))
    sys.exit(0 if ok else 1)
