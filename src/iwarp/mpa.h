/* MPA connection setup (RFC 5044 Request/Reply, RFC 6581 enhanced setup): build and parse the
 * frames, decide the Reply as Responder, check the Reply as Initiator. Knows no NDK object.
 *
 * Policy, as in docs/iwarp-notes.md [IW-MPA-REV] and docs/wire.md:
 *  - markers never: a Request asking for them is rejected (Reply with R=1), a Reply with M=1
 *    fails the connection;
 *  - CRC on if either side asks (we accept a peer that requires it even with our CRC off);
 *  - Rev 2 with the IRD/ORD word when both sides can, else Rev 1;
 *  - private data at most 256 bytes in all, the Rev 2 word included (siw's limit);
 *  - each frame is sent with one write and parsed with an exact-length reader, so bytes that
 *    follow a frame (an FPDU a siw Responder sends right behind its Reply) stay for the FPDU
 *    parser. */
#ifndef SOFTNDK_IWARP_MPA_H
#define SOFTNDK_IWARP_MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "iwarp/terminate.h"
#include "iwarp/wire.h"

/* RTR kinds (RFC 6581), a bit mask: offers in a Request, exactly one chosen in a Reply. */
enum sndk_mpa_rtr {
    SNDK_MPA_RTR_NONE = 0,
    SNDK_MPA_RTR_SEND = 1,  /* zero-length Send (siw ignores it as Responder) */
    SNDK_MPA_RTR_WRITE = 2, /* zero-length RDMA Write */
    SNDK_MPA_RTR_READ = 4,  /* zero-length RDMA Read */
    SNDK_MPA_RTR_ALL = 7,
};

#define SNDK_MPA_FRAME_MAX (sizeof(struct sndk_mpa_rr_hdr) + SNDK_MPA_PD_MAX)

/* Errors and outcomes of the handshake. Functions return 0 or -SNDK_MPA_E_xxx. */
enum sndk_mpa_status {
    SNDK_MPA_OK = 0,
    SNDK_MPA_E_KEY,          /* bytes are not the expected "MPA ID Req/Rep Frame" key */
    SNDK_MPA_E_REV,          /* Rev is not 1 or 2 */
    SNDK_MPA_E_FLAGS,        /* R set in a Request */
    SNDK_MPA_E_PD_LEN,       /* PD_Length over the limit */
    SNDK_MPA_E_WORD,         /* Rev 2 enhanced frame too short for its IRD/ORD word */
    SNDK_MPA_E_TRUNCATED,    /* the stream ended inside the frame */
    SNDK_MPA_E_REJECTED,     /* the Reply says R=1: connection refused (not a protocol error) */
    SNDK_MPA_E_MARKERS,      /* markers asked for (Request: we reject; Reply: we fail) */
    SNDK_MPA_E_REV_MISMATCH, /* Reply revision / enhanced mode does not answer our Request */
    SNDK_MPA_E_IRD,          /* RFC 6581: insufficient IRD */
    SNDK_MPA_E_RTR,          /* RFC 6581: no matching RTR option */
    SNDK_MPA_E_COUNT
};
const char *sndk_mpa_status_name(int status); /* accepts 0, E_xxx or -E_xxx; never NULL */
/* The fault whose LLP Terminate (code 0x04 / 0x06 / 0x07 / 0x01) reports a status; NONE for OK
 * and REJECTED. */
enum sndk_wire_err sndk_mpa_status_werr(int status);

/* Contents of a Request or Reply to build. */
struct sndk_mpa_params {
    uint8_t rev;        /* 1 or 2 */
    bool crc;
    bool markers;       /* only for tests: we never ask for markers */
    bool reject;        /* Reply only */
    bool enhanced;      /* Rev 2: ENHANCED flag and the IRD/ORD word */
    uint16_t ird, ord;  /* <= 0x3fff */
    bool p2p;           /* A bit */
    uint8_t rtr;        /* enum sndk_mpa_rtr bits: offered (Request) / chosen (Reply) */
    const void *pdata;  /* ULP private data, after the word */
    uint16_t pdata_len;
};

/* Write the frame into buf. Returns its length, -EINVAL (bad rev, IRD/ORD over 14 bits, R in a
 * Request, word fields without rev 2 enhanced), -EMSGSIZE (private data + word over 256),
 * -ENOSPC (cap too small). */
int sndk_mpa_build(uint8_t *buf, size_t cap, bool reply, const struct sndk_mpa_params *p);

/* A parsed frame; pointers point into the parser's buffer. */
struct sndk_mpa_frame {
    bool reply;
    uint8_t flags, rev;
    bool markers, crc, reject, enhanced;
    uint16_t pd_len;
    const uint8_t *pd;       /* all private data, word included */
    bool has_word;           /* Rev 2 + ENHANCED */
    uint16_t ird, ord;       /* sender's, from the word */
    bool p2p;
    uint8_t rtr;             /* enum sndk_mpa_rtr bits from the word */
    const uint8_t *ulp_pd;   /* private data after the word */
    uint16_t ulp_pd_len;
};

enum sndk_mpa_rx_state {
    SNDK_MPA_RX_HDR,   /* key, flags, rev, PD_Length */
    SNDK_MPA_RX_PDATA, /* private data */
    SNDK_MPA_RX_DONE,
    SNDK_MPA_RX_ERROR,
    SNDK_MPA_RX_STATE_COUNT
};
const char *sndk_mpa_rx_state_name(enum sndk_mpa_rx_state s);

/* Incremental parser for one frame; bytes may arrive cut anywhere. */
struct sndk_mpa_rx {
    enum sndk_mpa_rx_state state;
    bool reply;          /* expecting a Reply (Initiator) or a Request (Responder) */
    uint16_t pd_limit;
    int status;          /* 0 or -SNDK_MPA_E_xxx once in ERROR */
    uint32_t got, need;
    uint8_t buf[sizeof(struct sndk_mpa_rr_hdr) + SNDK_MPA_PD_MAX_RFC];
    struct sndk_mpa_frame frame;
};

/* pd_limit: largest PD_Length accepted, 0 = 256 (siw), at most 512 (RFC 5044). */
void sndk_mpa_rx_init(struct sndk_mpa_rx *m, bool expect_reply, uint16_t pd_limit);
/* Exactly the bytes still missing from the frame (one iovec); 0 when done or failed. */
int sndk_mpa_rx_want(struct sndk_mpa_rx *m, struct iovec *iov);
/* n bytes were written where want() said. 0 = need more, 1 = frame complete,
 * -SNDK_MPA_E_xxx on a bad frame (found as early as the offending byte), -EINVAL if n exceeds
 * the offer. */
int sndk_mpa_rx_advance(struct sndk_mpa_rx *m, size_t n);
/* Copy from buf until the frame is complete; *consumed says how much of buf was used (the rest
 * belongs to the FPDU stream). Same returns as advance. */
int sndk_mpa_rx_feed(struct sndk_mpa_rx *m, const void *buf, size_t len, size_t *consumed);
/* The stream ended: -SNDK_MPA_E_TRUNCATED unless the frame was complete (1) or had not
 * started (0). */
int sndk_mpa_rx_eof(struct sndk_mpa_rx *m);
/* The parsed frame once advance/feed returned 1, else NULL. */
const struct sndk_mpa_frame *sndk_mpa_rx_frame(const struct sndk_mpa_rx *m);

/* Local connection-setup policy. */
struct sndk_mpa_policy {
    uint8_t rev;        /* what we ask for as Initiator: 1 or 2 (SOFTNDK_MPA_REV) */
    bool crc;           /* ask for CRC (SOFTNDK_CRC) */
    uint16_t ird, ord;  /* our inbound / outbound RDMA Read limits */
    bool p2p;           /* Initiator: request an RTR exchange */
    uint8_t rtr;        /* Initiator: kinds offered; Responder: kinds accepted (0 = all) */
};

/* What the handshake settled. */
struct sndk_mpa_result {
    uint8_t rev;
    bool crc;
    bool enhanced;
    uint16_t ird, ord;            /* ours, as finally agreed */
    uint16_t peer_ird, peer_ord;  /* the peer's word (0 without one) */
    bool p2p;
    uint8_t rtr;                  /* the one RTR kind chosen, or NONE */
    const uint8_t *peer_pd;       /* peer's ULP private data (after the word) */
    uint16_t peer_pd_len;
};

/* Initiator: the Request for this policy. Offers Write and Read RTR when p2p and no kind is
 * given (siw as Responder ignores Send RTR). */
void sndk_mpa_request_params(const struct sndk_mpa_policy *pol, const void *pd, uint16_t pd_len,
                             struct sndk_mpa_params *req);

/* Responder: answer a parsed Request. Returns 0 with *reply to send and *res settled; or
 * -SNDK_MPA_E_MARKERS / -SNDK_MPA_E_RTR with *reply a reject (R=1) to send before closing;
 * -EMSGSIZE when pd does not fit. */
int sndk_mpa_accept(const struct sndk_mpa_frame *req, const struct sndk_mpa_policy *pol,
                    const void *pd, uint16_t pd_len, struct sndk_mpa_params *reply,
                    struct sndk_mpa_result *res);

/* Responder: a reject Reply (R=1) to a parsed Request, mirroring its revision. */
void sndk_mpa_reject_params(const struct sndk_mpa_frame *req, const void *pd, uint16_t pd_len,
                            struct sndk_mpa_params *reply);

/* Initiator: check the parsed Reply against the Request we sent. 0 with *res settled;
 * -SNDK_MPA_E_REJECTED (res->peer_pd holds the reason), -SNDK_MPA_E_MARKERS,
 * -SNDK_MPA_E_REV_MISMATCH, -SNDK_MPA_E_IRD, -SNDK_MPA_E_RTR. A Rev 1 Reply to a Rev 2 Request
 * is the RFC 6581 fallback: accepted, without IRD/ORD word or RTR. */
int sndk_mpa_check_reply(const struct sndk_mpa_params *req, const struct sndk_mpa_frame *rep,
                         struct sndk_mpa_result *res);

#endif
