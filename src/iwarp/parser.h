/* RX parser: turns the TCP byte stream of one iWARP connection (after the MPA handshake) into
 * placed payload and events. Knows no NDK object.
 *
 * Zero-copy pull interface. The caller asks where the next bytes must go, reads from the socket
 * straight into those places, then says how many bytes arrived:
 *
 *     struct iovec iov[8];
 *     int n = sndk_rx_want(rx, iov, 8);          // header scratch, target memory, trailer...
 *     ssize_t got = readv(fd, iov, n);
 *     if (got > 0 && sndk_rx_advance(rx, got) < 0) ... sndk_rx_fault(rx) -> send a Terminate
 *
 * Payload lands directly in memory named by the place() callback (the posted receive buffer for
 * a Send, the region behind an STag for a Write / Read Response); the CRC is computed over those
 * bytes where they landed. Every header field is validated before it is trusted; the first
 * protocol fault stops the parser for good and is available as a struct sndk_wire_fault, ready
 * for sndk_term_from_fault(). Payload of a segment whose CRC later fails has already been placed
 * (as in siw): the fault aborts the connection, and no completion is reported for it.
 *
 * Not thread-safe: one parser belongs to one connection's receive context. */
#ifndef SOFTNDK_IWARP_PARSER_H
#define SOFTNDK_IWARP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "iwarp/terminate.h"
#include "iwarp/wire.h"

enum sndk_rx_state {
    SNDK_RX_HDR,     /* MPA length, DDP/RDMAP header, Read Request / Terminate body */
    SNDK_RX_DATA,    /* payload into the placement iovecs */
    SNDK_RX_TRAILER, /* pad and CRC; then the segment is checked and reported */
    SNDK_RX_CLOSED,  /* a Terminate arrived: nothing more is accepted */
    SNDK_RX_ERROR,   /* a protocol fault was found: final */
    SNDK_RX_HELD,    /* a Send's header is in, its place() said SNDK_RX_PLACE_LATER: no byte
                        is taken until sndk_rx_resume() finds its buffer (or raises a fault) */
    SNDK_RX_STATE_COUNT
};
const char *sndk_rx_state_name(enum sndk_rx_state s);

/* One received DDP segment, decoded (host order). */
struct sndk_rx_seg {
    uint8_t opcode; /* enum sndk_rdmap_opcode */
    bool tagged;
    bool last;
    uint32_t ulpdu_len;
    uint32_t len;        /* payload bytes (for a Terminate: body bytes beyond what is decoded) */
    uint32_t stag;       /* tagged */
    uint64_t to;         /* tagged */
    uint32_t qn, msn, mo; /* untagged */
    uint32_t inval_stag; /* Send with Invalidate (and SE) */
};

#define SNDK_RX_PLACE_IOV 8 /* iovecs one place() call may return */

/* Callbacks. Those returning int return 0, or -SNDK_WERR_xxx to raise that protocol fault (the
 * parser records it with the current segment's header and stops). */
struct sndk_rx_ops {
    /* Where payload bytes [off, seg->len) of this segment go. Fill at most max_iov iovecs
     * covering a prefix of that range (at least one byte when any remain) and return the count.
     * The call with off == 0 must validate the whole segment first (STag, access, bounds
     * [TO, TO+len), PD; receive buffer and its length at MO for a Send) and refuse with
     * -SNDK_WERR_STAG / _BOUNDS / _UNASSOC / _TO_WRAP / _MSN_NO_BUF / _TOO_LONG. Called for
     * every Send segment (also with len 0, so a missing receive buffer is seen) and for tagged
     * segments with len > 0; zero-length Writes / Read Responses (RTR) are never checked. */
    int (*place)(void *ctx, const struct sndk_rx_seg *seg, uint32_t off, struct iovec *iov,
                 int max_iov);
    /* A Send / Write / Read Response segment was placed and its CRC verified. Optional. */
    int (*seg_done)(void *ctx, const struct sndk_rx_seg *seg);
    /* The last segment (L=1) of a Send / Write / Read Response was placed; msg_len is the
     * message's total payload. A Send with Invalidate carries seg->inval_stag. Optional. */
    int (*msg_done)(void *ctx, const struct sndk_rx_seg *seg, uint64_t msg_len);
    /* A verified Read Request. */
    int (*read_req)(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_read_req *rr);
    /* A verified Terminate from the peer; the parser is CLOSED afterwards. */
    void (*terminate)(void *ctx, const struct sndk_rx_seg *seg, const struct sndk_term *t);
    /* The first protocol fault (also available from sndk_rx_fault()). Optional. */
    void (*fault)(void *ctx, const struct sndk_wire_fault *f);
};

/* place() may return this, instead of -SNDK_WERR_MSN_NO_BUF, for the first call of a Send
 * (off == 0, mo == 0) when no receive buffer is there yet but one may still come: the parser
 * holds the segment (SNDK_RX_HELD, sndk_rx_advance returns SNDK_RX_HELD_RC) and takes no more
 * bytes until sndk_rx_resume(). Outside the -SNDK_WERR_* range. */
#define SNDK_RX_PLACE_LATER (-0x10000)

struct sndk_rx_config {
    bool crc;           /* CRC negotiated: verify it (else the field is ignored) */
    bool strict;        /* also refuse set reserved bits of the DDP and RDMAP control bytes
                           (RFC 5040/5041 say "not checked on receive"; default off) */
    uint32_t max_ulpdu; /* largest ULPDU_Length accepted; 0 = 65535 */
};

struct sndk_rx {
    enum sndk_rx_state state;
    struct sndk_rx_config cfg;
    const struct sndk_rx_ops *ops;
    void *ctx;

    uint8_t hdr[SNDK_FPDU_HDR_MAX]; /* MPA length + header (+ body), as received */
    uint32_t hdr_got, hdr_need;
    uint8_t trailer[SNDK_FPDU_TRAILER_MAX];
    uint32_t trl_got, trl_need;
    size_t wanted;                  /* bytes offered by the last sndk_rx_want() */

    struct sndk_rx_seg seg;         /* segment being received */
    uint32_t pay_got;               /* payload bytes of seg already consumed */
    uint32_t body_len;              /* Read Request / Terminate body bytes in hdr */
    struct iovec place[SNDK_RX_PLACE_IOV]; /* current placement chunk */
    int place_n, place_i;
    size_t place_off;
    uint32_t place_end;             /* seg payload offset where the chunk ends */
    uint32_t crc;

    uint32_t msn_expect[SNDK_QN_COUNT];
    struct {                        /* unfinished untagged message (siw allows one) */
        bool active;
        uint8_t opcode;
        uint32_t msn;
        uint32_t next_mo;
    } ut;
    struct {                        /* unfinished tagged message (one, as siw) */
        bool active;
        uint8_t opcode;
        uint32_t stag;
        uint64_t next_to;
        uint64_t len;
    } tg;

    uint8_t cur_ddp[SNDK_DDP_UNTAGGED_HDR_LEN]; /* copy of the current header, for faults */
    uint8_t cur_ddp_len;
    uint8_t discard[64];            /* sink for Terminate bytes beyond what is decoded */
    struct sndk_wire_fault fault;
    uint64_t fpdus;                 /* FPDUs fully received */
    uint64_t fault_crc_at;          /* fault injection: FPDU number (fpdus + 1) whose CRC check
                                       fails whatever it holds; 0 = none */
};

void sndk_rx_init(struct sndk_rx *rx, const struct sndk_rx_config *cfg,
                  const struct sndk_rx_ops *ops, void *ctx);

/* Where the next incoming bytes must go: fills up to max_iov iovecs (in stream order) and
 * returns their count; 0 when the parser takes no more bytes (CLOSED or ERROR). The offer never
 * goes past what a valid stream must still contain, so reading it all never consumes bytes that
 * belong to someone else. May include the tail of one FPDU and the start of the next. */
int sndk_rx_want(struct sndk_rx *rx, struct iovec *iov, int max_iov);

/* Returned by sndk_rx_advance / sndk_rx_feed when the bytes of this call completed a Terminate:
 * the terminate() callback has run and the parser is CLOSED (bytes after the Terminate in the
 * same call are dropped). Positive, so `rc < 0` tests still mean "fault". */
#define SNDK_RX_TERMINATED 1

/* Returned by sndk_rx_advance / sndk_rx_feed / sndk_rx_resume when a Send is held (its
 * place() said SNDK_RX_PLACE_LATER). A Send's header always ends an offer, so no byte of these
 * calls is left over. Positive, like SNDK_RX_TERMINATED. */
#define SNDK_RX_HELD_RC 2
/* A held Send: ask place() again (off == 0). 0 when it found the buffer (the parser takes the
 * payload from now on), SNDK_RX_HELD_RC when still held, -EPROTO after a fault (place() refused,
 * e.g. -SNDK_WERR_MSN_NO_BUF once the wait is over). -EINVAL when nothing is held. */
int sndk_rx_resume(struct sndk_rx *rx);
/* n bytes were written into the iovecs of the last sndk_rx_want(), in order. Returns 0 (more
 * wanted); SNDK_RX_TERMINATED when they completed a Terminate; -EPROTO after a protocol fault
 * (see sndk_rx_fault); -EPIPE when bytes arrive after a Terminate closed the stream in an
 * earlier call; -EINVAL when n exceeds the last offer. */
int sndk_rx_advance(struct sndk_rx *rx, size_t n);

/* One round of want/advance over bytes already in memory: what the last want offered is copied
 * from buf (at most len bytes; *used says how many) and advanced. Returns what
 * sndk_rx_advance returns, or -EPIPE / -EPROTO when the parser takes no more bytes (closed,
 * failed). */
int sndk_rx_feed_round(struct sndk_rx *rx, const void *buf, size_t len, size_t *used);

/* Convenience for tests and fuzzers: all of buf, round after round. Same returns (stops at
 * the first non-zero one). */
int sndk_rx_feed(struct sndk_rx *rx, const void *buf, size_t len);

/* A whole FPDU already in memory (a staging buffer, a shared ring), the parser at an FPDU
 * boundary: parsed in one step, with the checks, placement offers, callbacks and faults that
 * want/advance would give the same bytes, in the same order, without their steps. Each byte of
 * buf is read once and only its copy is used, so buf may be memory another process writes at
 * the same time: what it changes under the call is what was read. *took: the bytes taken.
 * Returns 0 with *took == 0 when nothing was taken: the parser is not at a boundary, buf holds
 * less than the FPDU its length field announces, or it starts like an MPA frame (checked the
 * way want/advance check it); the caller goes on through want/advance. Otherwise what
 * sndk_rx_advance would return for the FPDU: 0 (*took is the whole FPDU), SNDK_RX_TERMINATED,
 * SNDK_RX_HELD_RC (*took is the header: the payload waits for sndk_rx_resume), or -EPROTO
 * after a fault (*took is what was placed before it). */
int sndk_rx_take_fpdu(struct sndk_rx *rx, const void *buf, size_t len, size_t *took);

/* The TCP stream ended. 0 at an FPDU boundary; -EPROTO (fault SNDK_WERR_CONN_LOST) mid-FPDU. */
int sndk_rx_eof(struct sndk_rx *rx);

/* The first fault, or NULL while there is none. */
const struct sndk_wire_fault *sndk_rx_fault(const struct sndk_rx *rx);

#endif
