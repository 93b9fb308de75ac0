#!/usr/bin/env python3
"""Does restore.lookup_ms tell a tenant whether another tenant stored its prompt?
(issue 34, finding 7; docs/bank.md, "Why a request missed").

Against a running `statebank serve --block-tokens 64 --api-keys-file KEYS`
whose keys file holds `alice alice-key-0123456789`, `bob bob-key-0123456789abc`
and tenantNN tenantNN-key-0123456789 for NN in 00..OTHERS-1: the OTHERS
tenants make one request each (the bank remembers their roots), then N times
alice stores a 70-token prompt p and bob sends p and a fresh prompt q (order
alternating). Both of bob's requests miss (no_entry); prints bob's median
lookup_ms for each kind.

usage: namespace_probe_timing.py PORT N OTHERS
"""
import json
import random
import statistics
import sys
import urllib.request


def post(port, key, prompt):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps({"prompt": prompt, "max_tokens": 1}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    return json.load(urllib.request.urlopen(req))


def main():
    port, n, n_others = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    alice, bob = "alice-key-0123456789", "bob-key-0123456789abc"
    rng = random.Random(7)
    prompt = lambda: [rng.randrange(1000, 20000) for _ in range(70)]
    for i in range(n_others):
        post(port, f"tenant{i:02d}-key-0123456789", prompt())
    stored, unstored = [], []
    for i in range(n):
        p, q = prompt(), prompt()
        post(port, alice, p)
        pairs = [(p, stored), (q, unstored)]
        for text, out in (pairs if i % 2 else pairs[::-1]):
            r = post(port, bob, text)["restore"]
            assert r["restore_point"] == 0, r
            out.append(r["lookup_ms"])
    print(f"n={n}, {n_others} other tenants: median lookup_ms {statistics.median(stored):.4f} ms when another "
          f"tenant stored the prompt, {statistics.median(unstored):.4f} ms when nobody did")


if __name__ == "__main__":
    main()
