"""The plain kernel peer of tests/accel/udp.sh's multicast phase.

udp_mc_peer.py send GROUP PORT COUNT IFACE_IP PORTS: three rounds of COUNT
    numbered datagrams (tests/accel/udp.c's payloads) to GROUP:PORT and, when
    PORTS is 2, GROUP:PORT+1, leaving by IFACE_IP.
udp_mc_peer.py recv GROUP PORT COUNT IFACE_IP: join GROUP on IFACE_IP, print
    "joined", take datagrams to PORT until all of 0..COUNT-1 came (checked
    byte for byte; 20 s at most), print "mc recv ok".
"""
import socket
import struct
import sys
import time

from udp_peer import payload


def main():
    mode, group, port, count, iface = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if mode == "send":
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface))
        ports = [port, port + 1] if sys.argv[6] == "2" else [port]
        for _ in range(3):
            for q in range(count):
                for p in ports:
                    s.sendto(payload(q), (group, p))
            time.sleep(0.1)
        return
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    req = socket.inet_aton(group) + socket.inet_aton(iface)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, req)
    print("joined", flush=True)
    seen = set()
    s.settimeout(1.0)
    end = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < end:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        q = struct.unpack("<I", data[:4])[0]
        if q >= count or data != payload(q):
            print("FAIL: a datagram to the group differs")
            sys.exit(1)
        seen.add(q)
    if len(seen) < count:
        print("FAIL: %d of %d datagrams to the group came" % (len(seen), count))
        sys.exit(1)
    print("mc recv ok", flush=True)


main()
