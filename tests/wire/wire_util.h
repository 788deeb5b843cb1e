/* Shared helpers of the wire-layer tests: hex, [IW-VECTORS] vectors, and a recording parser context
 * with a small memory model (STag regions, posted receive buffers). */
#ifndef SOFTNDK_TESTS_WIRE_UTIL_H
#define SOFTNDK_TESTS_WIRE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "iwarp/parser.h"

/* An iovec over a string literal (without its NUL). */
#define WU_IOV(lit) ((struct iovec){(void *)(uintptr_t)(const void *)(lit), sizeof(lit) - 1})

size_t wu_unhex(const char *hex, uint8_t *out, size_t cap);

/* docs/iwarp-notes.md [IW-VECTORS], in order. */
struct wu_vector {
    const char *name;
    const char *hex;
};
extern const struct wu_vector wu_mpa_vectors[4];
extern const struct wu_vector wu_fpdu_vectors[11];
#define WU_NOCRC_SEND "00184143000000000000000000000001000000006e6f20637263000000000000"

enum wu_ev_type { WU_EV_SEG = 1, WU_EV_MSG, WU_EV_RREQ, WU_EV_TERM, WU_EV_FAULT };

struct wu_ev {
    enum wu_ev_type type;
    struct sndk_rx_seg seg;
    uint64_t msg_len;
    struct sndk_read_req rr;
    struct sndk_term term;
    enum sndk_wire_err fault;
};

struct wu_region {
    uint32_t stag;
    uint64_t to;
    uint8_t *buf;
    size_t len;
};

#define WU_MAX_EV 256
struct wu_rec {
    struct wu_ev ev[WU_MAX_EV];
    int nev;
    struct wu_region reg[4];
    int nreg;
    uint8_t *rbuf[16]; /* posted receive buffers: the Send with MSN n lands in rbuf[n-1] */
    size_t rlen[16];
    int nrbuf;
    size_t chunk;      /* bytes per placement iovec, 0 = as large as possible */
    int max_iov;       /* iovecs per place() answer, 0 = all the parser allows */
    int msg_done_rc;   /* returned by msg_done (to inject faults) */
    int read_req_rc;
    unsigned place_calls;
};

extern const struct sndk_rx_ops wu_ops;
void wu_rec_init(struct wu_rec *r);
void wu_rx_init(struct sndk_rx *rx, struct wu_rec *r, bool crc);
bool wu_ev_equal(const struct wu_ev *a, const struct wu_ev *b);
/* Feed buf as a connection feeds its staging buffer: each whole FPDU at a boundary in one step
 * (sndk_rx_take_fpdu), the rest through want/advance. Returns what sndk_rx_feed would. */
int wu_feed_staged(struct sndk_rx *rx, const void *buf, size_t len);
/* FPDUs wu_feed_staged took in one step, for tests that must see the one-step path run */
extern unsigned long wu_whole_fpdus;
/* Flatten iovecs into buf; returns length. */
size_t wu_flatten(const struct iovec *iov, int n, uint8_t *buf, size_t cap);

#endif
