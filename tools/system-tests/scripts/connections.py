#!/usr/bin/env python3
# The many-connection client: holds long-lived connections to VIP:PORT (argv[1], argv[2]).
# Commands on stdin: "open" connects and prints "opened ID BACKEND" (the backend names itself
# first); "close ID" closes one (FIN) and prints "closed ID"; "ping" does an echo round trip on
# every open connection and prints "pinged N". Any failure prints "error ..." and exits 1.
import socket, sys
vip, port = sys.argv[1], int(sys.argv[2])
conns, n = {}, 0
try:
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "open":
            s = socket.create_connection((vip, port), timeout=10)
            f = s.makefile("rb")
            name = f.readline().decode().strip()
            if not name:
                raise OSError("the backend sent no name")
            n += 1
            conns[n] = (s, f)
            print("opened", n, name, flush=True)
        elif cmd[0] == "close":
            s, f = conns.pop(int(cmd[1]))
            f.close()
            s.close()
            print("closed", cmd[1], flush=True)
        elif cmd[0] == "ping":
            for i, (s, f) in conns.items():
                s.sendall(b"ping %d\n" % i)
                if f.readline() != b"ping %d\n" % i:
                    raise OSError("connection %d: no echo" % i)
            print("pinged", len(conns), flush=True)
except Exception as e:
    print("error", repr(e), flush=True)
    sys.exit(1)
