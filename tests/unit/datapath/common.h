/* Shared helpers of the data path tests: adapters, QPs on loopback TCP, completions. */
#ifndef DATAPATH_COMMON_H
#define DATAPATH_COMMON_H

#include <stdint.h>
#include <sys/uio.h>

#include "core/link.h"
#include "core/qp.h"
#include "iwarp/fpdu.h"
#include "harness.h"

#define DP_TIMEOUT_MS 10000

/* What the link events reported for one QP. */
struct dp_link {
    struct harness_event peer_closed, aborted, shutdown_done;
    NTSTATUS abort_status, shut_status;
    ULONG abort_reason;
};

struct dp_side {
    NDK_ADAPTER *a;
    NDK_PD *pd;
    NDK_CQ *cq;  /* receive and initiator CQ */
    NDK_SRQ *srq;
    NDK_QP *qp;
    NDK_MR *mr;
    uint8_t *buf;
    size_t len;
    uint32_t token;
    int fd;
    struct dp_link link;
    struct harness_event cq_notified;
    NTSTATUS cq_status;
};

struct dp_opts {
    ULONG rq_depth, sq_depth, rsge, isge, inline_size, cq_depth;
    size_t buf_len;
    bool crc;
    bool two_adapters;
    uint32_t ird, ord, ird_y, ord_y; /* link IRD/ORD of x and y (0: 16) */
};
void dp_opts_default(struct dp_opts *o);

NDK_ADAPTER *dp_open_adapter(void);
/* Adapter, PD, CQ (with a notification callback), MR over a fresh buffer; QP created later. */
void dp_side_init(struct dp_side *s, NDK_ADAPTER *a, const struct dp_opts *o);
void dp_side_create_qp(struct dp_side *s, const struct dp_opts *o, void *qp_context);
/* Close QP, MR, CQ, SRQ, PD (waiting for pending closes); the adapter is the caller's. */
void dp_side_close(struct dp_side *s);
void dp_close_qp(NDK_QP *qp); /* and wait for its close to finish */
void dp_close_mr(NDK_MR *mr);
void dp_close_mw(NDK_MW *mw);
/* An MR over [off, off+len) of s->buf registered with flags; *token = its remote token. */
NDK_MR *dp_reg(struct dp_side *s, size_t off, size_t len, ULONG flags, uint32_t *token);

/* A connected TCP pair on 127.0.0.1 (non-blocking, TCP_NODELAY). */
void dp_tcp_pair(int *a, int *b);
void dp_attach(struct dp_side *s, int fd, bool crc);
void dp_attach_rd(struct dp_side *s, int fd, bool crc, uint32_t ird, uint32_t ord);

/* Two sides connected QP to QP. */
struct dp_pair {
    struct dp_side x, y;
    NDK_ADAPTER *ax, *ay;
};
void dp_pair_open(struct dp_pair *p, const struct dp_opts *o);
void dp_pair_close(struct dp_pair *p);

/* Posting helpers (CHECK the inline status). */
NDK_SGE dp_sge(struct dp_side *s, size_t off, size_t len);
void dp_post_recv(struct dp_side *s, void *ctx, size_t off, size_t len);
void dp_post_send(struct dp_side *s, void *ctx, size_t off, size_t len, ULONG flags);

/* Poll the CQ (which drives receive progress) until n results arrived, bounded. Returns how
 * many arrived. */
unsigned dp_poll(NDK_CQ *cq, NDK_RESULT_EX *out, unsigned n, unsigned timeout_ms);
/* Poll for exactly n results and fail the test otherwise; then check that no more arrive
 * within settle_ms (0: don't check). */
void dp_expect(NDK_CQ *cq, NDK_RESULT_EX *out, unsigned n, unsigned settle_ms);
void dp_check_result(const NDK_RESULT_EX *r, NTSTATUS st, ULONG bytes, void *qpctx, void *ctx,
                     NDK_OPERATION_TYPE type);

/* Raw peer helpers. */
/* Read exactly len bytes from a blocking-with-timeout view of fd; false on timeout/EOF. */
bool dp_read_exact(int fd, void *buf, size_t len, unsigned timeout_ms);
void dp_write_all(int fd, const void *buf, size_t len);
/* Build one FPDU (header + payload + pad + CRC) into out; returns its length. */
size_t dp_build_fpdu(uint8_t *out, const struct sndk_seg_hdr *h, const void *pay, size_t len,
                     bool crc);
/* True once the peer has closed (read returns 0 or an error), bounded. */
bool dp_wait_closed(int fd, unsigned timeout_ms);

uint64_t dp_now_ms(void);
void dp_fill(uint8_t *p, size_t len, uint32_t seed);

#endif
