#!/usr/bin/env python3
"""Write the seed corpora of fuzz/corpus/ from the vectors of docs/iwarp-notes.md [IW-VECTORS].

Each seed is: mode byte, cut byte, then the bytes a peer sends (see the fuzz targets)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

MPA = {
    "req_rev1": (0, "4d504120494420526571204672616d6540010009696e692d7064617461"),
    "req_rev2": (0, "4d504120494420526571204672616d65500200078008c008756c70"),
    "rep_rev2": (1, "4d504120494420526570204672616d655002000480088008"),
    "rep_reject": (1, "4d504120494420526570204672616d656001000f6e6f206d61726b6572732068657265"),
}
SEND = "001741430000000000000000000000010000000068656c6c6f000000b990b10c"
SINV = "0016414411223344000000000000000200000000696e7621d8826d7f"
SSE = "001441450000000000000000000000030000000073650000392d928a"
SSEINV = "00174146556677880000000000000004000000007365696e760000002a4514ae"
WRITE = ("002e8140abcd00010000000000001000000102030405060708090a0b0c0d0e0f101112131415161718"
         "191a1b1c1d1e1f8c8ce2df")
RREQ = ("002e4141000000000000000100000001000000000000aa010000000000002000000000140000bb02000000"
        "0000003000de50e060")
RRESP = "0022c1420000aa010000000000002000525252525252525252525252525252525252525253db65df"
RTR = "000ec140000000010000000000000000ebd34c5f"
TERM1 = ("00264147000000000000000200000001000000001100c0000000c140dead000100000000000000003aa5d3"
         "b1")
TERM2 = "001641470000000000000002000000020000000002090000ea21b726"
NOCRC = "00184143000000000000000000000001000000006e6f20637263000000000000"

RX = {
    "sends": (0x00, 0x00, SEND + SINV + SSE + SSEINV),
    "sends_cut3": (0x00, 0x23, SEND + SINV + SSE + SSEINV),
    "write": (0x04, 0x00, WRITE.replace("abcd0001", "00000001").replace("00001000", "00000010")),
    "read_req": (0x00, 0x00, RREQ),
    "read_resp": (0x04, 0x17, RRESP.replace("0000aa01", "00000002")),
    "rtr_then_send": (0x00, 0x01, RTR + SEND),
    "terminate_ddp": (0x00, 0x00, TERM1),
    "terminate_rdmap": (0x00, 0x05, TERM2.replace("00000002000000000209", "00000001000000000209")),
    "nocrc": (0x01, 0x00, NOCRC),
    "strict_sends": (0x22, 0x31, SEND + SINV),
    # MODE_LATER: each Send is held (receiver not ready) and resumed, cut in pieces of 3
    "held_sends": (0x40, 0x23, SEND + SINV + SSE + SSEINV),
    "held_rtr_then_send": (0x40, 0x01, RTR + SEND),
}


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


for name, (mode, hexs) in MPA.items():
    write(os.path.join(HERE, "corpus", "fuzz_mpa"), name, bytes([mode, 0]) + bytes.fromhex(hexs))
for name, (mode, cut, hexs) in RX.items():
    write(os.path.join(HERE, "corpus", "fuzz_rx_parser"), name,
          bytes([mode, cut]) + bytes.fromhex(hexs))
