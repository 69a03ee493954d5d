#!/usr/bin/env python3
# The UDP client: COUNT datagrams of SIZE bytes to VIP:PORT, each from a new socket (a new
# source port). A datagram larger than the MTU leaves the kernel as IP fragments. Each answer
# must carry the length and SHA-256 of what was sent: prints "answer NAME". With "twice" the
# datagram asks for a second answer, and the socket closes after the first: the second meets
# a closed port and the kernel sends an ICMP port unreachable to the VIP; prints
# "flow PORT NAME". Any failure exits 1 with "error: ..." on stderr.
import hashlib, os, socket, sys
vip, port, size, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
twice = len(sys.argv) > 5 and sys.argv[5] == "twice"
for i in range(count):
    data = (b"twice" if twice else b"") + os.urandom(size)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(data, (vip, port))
    try:
        answer, peer = s.recvfrom(65535)
    except OSError as e:
        sys.exit("error: datagram %d of %d bytes to port %d: no answer: %s" % (i, len(data), port, e))
    who, length, digest = answer.decode().split()
    if peer != (vip, port) or int(length) != len(data) or digest != hashlib.sha256(data).hexdigest():
        sys.exit("error: datagram %d: answer %r from %r" % (i, answer, peer))
    if twice:
        print("flow %d %s" % (s.getsockname()[1], who), flush=True)
    else:
        print("answer", who, flush=True)
    s.close()
