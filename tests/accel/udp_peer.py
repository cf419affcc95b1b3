"""The plain kernel peer of tests/accel/udp.sh (no libfabsock).

udp_peer.py DPDK_IP PORT KERNEL_IP COUNT KCOUNT ECHO_PORT IFACE

udp_peer.py burst IP PORT COUNT GAP_MS LATE

Sends COUNT numbered datagrams to IP:PORT (GAP_MS apart), then after 0.5 s
"go" to IP:PORT+1 and, when LATE is 1, after 2 s more "late" to IP:PORT.

IFACE: the peer's veth end, whose transmit checksum offload is turned off
first: a veth passes the kernel's datagrams on with the UDP checksum left
to the NIC, and the DPDK port's af_packet reader would see it as bad.

Echoes every datagram that reaches ECHO_PORT (a thread, until killed). Sends
COUNT numbered datagrams to DPDK_IP:PORT, then KCOUNT more, every other one
to KERNEL_IP:PORT (the launched program's kernel socket), in windows of 8, each until its echo
came back byte for byte (lost ones are sent again, 20 tries); then "END"
until echoed. Prints "sent N" and "echoes ok" on success; exits 1 otherwise.
"""
import array
import fcntl
import select
import socket
import struct
import sys
import threading
import time

MAX_DGRAM = 1472
WINDOW = 8


def payload(seq):
    n = 4 + (seq * 37) % (MAX_DGRAM - 4)
    out = bytearray(struct.pack("<I", seq & 0xFFFFFFFF))
    x = (seq * 2654435761 + 1) & 0xFFFFFFFF
    for _ in range(4, n):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


def checksum_offload_off(ifname):
    ethtool_stxcsum, siocethtool = 0x17, 0x8946
    value = array.array("I", [ethtool_stxcsum, 0])
    req = struct.pack("16sP", ifname.encode(), value.buffer_info()[0]).ljust(40, b"\0")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, siocethtool, req)


def echo_forever(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, src = s.recvfrom(65536)
        s.sendto(data, src)


def exchange(s, dest_of, seqs):
    """Send each seq to dest_of(seq) until its exact echo came back."""
    pending = {q: payload(q) for q in seqs}
    for _ in range(20):
        for q in list(pending):
            s.sendto(pending[q], dest_of(q))
        end = time.monotonic() + 0.5
        while pending and time.monotonic() < end:
            r, _, _ = select.select([s], [], [], max(0.0, end - time.monotonic()))
            if not r:
                break
            data, _ = s.recvfrom(65536)
            q = struct.unpack("<I", data[:4])[0] if len(data) >= 4 else -1
            if q in pending:
                if data != pending[q]:
                    print("FAIL: echo of %d differs" % q)
                    sys.exit(1)
                del pending[q]
        if not pending:
            return
    print("FAIL: no echo for %s from %s" % (sorted(pending)[:8], dest_of(min(pending))))
    sys.exit(1)


def main():
    dpdk_ip, port, kernel_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    count, kcount, echo_port = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    checksum_offload_off(sys.argv[7])
    threading.Thread(target=echo_forever, args=(echo_port,), daemon=True).start()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    for base in range(0, count, WINDOW):
        exchange(s, lambda q: (dpdk_ip, port), range(base, min(count, base + WINDOW)))
    # then both sides of the launched socket at once: odd numbers to its
    # kernel address, even ones to the port's
    for base in range(count, count + kcount, WINDOW):
        exchange(s, lambda q: (kernel_ip if q % 2 else dpdk_ip, port),
                 range(base, min(count + kcount, base + WINDOW)))
    print("sent %d" % (count + kcount), flush=True)
    for _ in range(50):
        s.sendto(b"END", (dpdk_ip, port))
        r, _, _ = select.select([s], [], [], 0.2)
        if r and s.recvfrom(65536)[0] == b"END":
            break
    else:
        print("FAIL: END not echoed")
        sys.exit(1)
    print("echoes ok", flush=True)
    time.sleep(120)  # keep echoing for the client phase; the test ends us


def burst():
    ip, port, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    gap, late = int(sys.argv[5]) / 1000.0, sys.argv[6] == "1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for q in range(count):
        s.sendto(payload(q), (ip, port))
        if gap:
            time.sleep(gap)
    time.sleep(0.5)
    s.sendto(b"go", (ip, port + 1))
    if late:
        time.sleep(2)
        s.sendto(b"late", (ip, port))


if __name__ == "__main__":
    if sys.argv[1] == "burst":
        burst()
    else:
        main()
