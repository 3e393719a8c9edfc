#!/usr/bin/env python3
"""Per-hop breakdown of chat messages (issue 44) from the files castd writes with
CASTD_DEBUG_CHAT_HOPS (see src/chat/hops.rs): `<unix us>\t<hop>\t<message id>\t<extra>` per line.

Usage: hops.py LABEL NODE=FILE [NODE=FILE ...]   (NODE: single, origin, edge1, edge2)

Prints, for each kind of sender (one node; a client of the origin; a client of an edge), each hop's
p50/p99 in ms (the time from the hop before) and the p50/p99 of the time since the client's send
stamp (bench/chat's `bench:<us>` in the body), joining every node's lines by message id.
Each mark is taken after its step, on the thread that did it: the origin's `written` is when Redis's
reply reached it, so an edge may read the entry before (a negative "edge read"), and a fan-out
thread may write before its caller marks the hand-off.
"""
import re
import sys
from collections import defaultdict


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]


def ms(us):
    return "-" if us is None else f"{us / 1000:.2f}"


def main():
    label = sys.argv[1]
    files = dict(a.split("=", 1) for a in sys.argv[2:])
    # msg id -> node -> hop -> [times]
    msgs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    stamp = {}
    sender = {}
    lines = 0
    for node, path in files.items():
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split("\t")
            if len(parts) < 3 or not parts[0].isdigit():
                continue
            lines += 1
            t, hop, mid = int(parts[0]), parts[1], parts[2]
            msgs[mid][node][hop].append(t)
            if hop == "recv":
                m = re.search(r"bench:(\d+)", parts[3] if len(parts) > 3 else "")
                if m:
                    stamp[mid] = int(m.group(1))
                    sender[mid] = node
    if lines == 0:
        print(f"  hops ({label}): no hop records (castd without CASTD_DEBUG_CHAT_HOPS support?)")
        return

    # (name, from (node-role, hop, first|last), to (...)); node-roles: "s" the sender's node, "o" the
    # origin, "e" every edge (each is one sample), "x" the edges that did not take the message.
    chains = {
        "single": [
            ("client -> node read", None, ("s", "recv")),
            ("store", ("s", "recv"), ("s", "stored")),
            ("fan-out hand-off", ("s", "stored"), ("s", "broadcast")),
            ("fan-out threads (last shard)", ("s", "broadcast"), ("s", "sent")),
        ],
        "origin": [
            ("client -> origin read", None, ("s", "recv")),
            ("store", ("s", "recv"), ("s", "stored")),
            ("fan-out hand-off + queue", ("s", "stored"), ("s", "broadcast")),
            ("origin fan-out threads (last shard)", ("s", "broadcast"), ("s", "sent")),
            ("write-out to Redis", ("s", "broadcast"), ("s", "written")),
            ("edge read", ("o", "written"), ("e", "node_read")),
            ("edge fan-out hand-off", ("e", "node_read"), ("e", "node_fanout")),
            ("edge fan-out threads (last shard)", ("e", "node_fanout"), ("e", "sent")),
        ],
        "edge": [
            ("client -> edge read", None, ("s", "recv")),
            ("edge XADD (Redis reply)", ("s", "recv"), ("s", "edge_added")),
            ("edge read -> origin read", ("s", "recv"), ("o", "origin_read")),
            ("origin: wait in its batch", ("o", "origin_read"), ("o", "origin_handle")),
            ("origin: look-up + store", ("o", "origin_handle"), ("o", "stored")),
            ("origin: fan-out hand-off + queue", ("o", "stored"), ("o", "broadcast")),
            ("origin fan-out threads (last shard)", ("o", "broadcast"), ("o", "sent")),
            ("origin write-out to Redis", ("o", "broadcast"), ("o", "written")),
            ("origin ack (after write-out)", ("o", "written"), ("o", "acked")),
            ("edge read (each edge)", ("o", "written"), ("e", "node_read")),
            ("edge fan-out hand-off", ("e", "node_read"), ("e", "node_fanout")),
            ("edge fan-out threads (last shard)", ("e", "node_fanout"), ("e", "sent")),
        ],
    }

    def times(mid, role, hop, s):
        nodes = {"s": [s], "o": ["origin"], "e": [n for n in files if n.startswith("edge")]}[role]
        out = []
        for n in nodes:
            ts = msgs[mid][n].get(hop)
            if ts:
                out.append(max(ts) if hop == "sent" else min(ts))
        return out

    groups = defaultdict(list)
    for mid, s in sender.items():
        kind = "single" if s == "single" else ("origin" if s == "origin" else "edge")
        groups[kind].append(mid)

    for kind in ("single", "origin", "edge"):
        mids = groups.get(kind)
        if not mids:
            continue
        print(f"  hops ({label}, messages from a client of {'one node' if kind == 'single' else 'the ' + kind}: {len(mids)})")
        print(f"    {'hop':40} {'p50 ms':>8} {'p99 ms':>8} {'since stamp p50':>16} {'p99':>8}")
        for name, a, b in chains[kind]:
            d, since = [], []
            for mid in mids:
                s = sender[mid]
                tb = times(mid, b[0], b[1], s)
                ta = [stamp[mid]] if a is None else times(mid, a[0], a[1], s)
                if not ta or not tb:
                    continue
                for t in tb:
                    d.append(t - ta[0])
                    since.append(t - stamp[mid])
            print(f"    {name:40} {ms(pct(d, .5)):>8} {ms(pct(d, .99)):>8} {ms(pct(since, .5)):>16} {ms(pct(since, .99)):>8}")
        # The last write on every node (what the slowest client of the room waits for, but its read).
        last = []
        for mid in mids:
            ts = [max(h["sent"]) for h in msgs[mid].values() if h.get("sent")]
            if ts:
                last.append(max(ts) - stamp[mid])
        print(f"    {'stamp -> last write on every node':40} {'':>8} {'':>8} {ms(pct(last, .5)):>16} {ms(pct(last, .99)):>8}")


if __name__ == "__main__":
    main()
