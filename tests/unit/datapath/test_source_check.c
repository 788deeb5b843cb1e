/* SourceCheck (docs/qp.md): a Send source changed between posting and completion is counted
 * in SourceModified; an untouched one never is; with the check off nothing is counted. The
 * peer is a raw socket that reads slowly, so the FPDUs are built (and checksummed) before the
 * test changes the buffer and sent after. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "datapath.h"

#define QPCTX ((void *)0x5005)
#define MSG   (512u * 1024u)

struct host {
    NDK_ADAPTER *a;
    struct dp_side s;
    int raw;
};

static void host_open(struct host *h, bool check)
{
    if (check)
        CHECK(setenv("SOFTNDK_SOURCE_CHECK", "on", 1) == 0);
    else
        CHECK(unsetenv("SOFTNDK_SOURCE_CHECK") == 0);
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    h->a = dp_open_adapter();
    dp_side_init(&h->s, h->a, &o);
    dp_side_create_qp(&h->s, &o, QPCTX);
    int fa, fb;
    dp_tcp_pair(&fa, &fb);
    /* Buffers smaller than the message: it cannot all go into TCP before the peer reads.
     * (The receive buffer stays above one loopback segment: below it TCP's persist timer,
     * not the peer's reads, would pace the stream.) */
    int snd = 4096, rcv = 128 * 1024;
    CHECK(setsockopt(fa, SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd) == 0);
    CHECK(setsockopt(fb, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv) == 0);
    dp_attach(&h->s, fa, true);
    h->raw = fb;
}

static void host_close(struct host *h)
{
    dp_side_close(&h->s);
    SoftNdkCloseAdapter(h->a);
    close(h->raw);
}

/* The consumer verifier's count for the rule (docs/verifier.md), of the last run(). */
static ULONG64 verify_reports;

static ULONG64 source_modified(NDK_ADAPTER *a)
{
    SOFTNDK_COUNTERS c;
    memset(&c, 0, sizeof c);
    c.Size = sizeof c;
    CHECK_EQ_U64(SoftNdkQueryCounters(a, &c), STATUS_SUCCESS);
    verify_reports = c.VerifyViolations[SoftNdkVerifySourceModified];
    return c.SourceModified;
}

/* The message on the wire: FPDUs of 65456 payload bytes behind a 20-byte header (MPA length
 * + untagged DDP/RDMAP), each with a 4-byte CRC; the last one holds the rest (no pad needed). */
#define FPDU_PAY 65456u
#define WIRE_LEN ((MSG / FPDU_PAY) * (FPDU_PAY + 24u) + (MSG % FPDU_PAY) + 24u)

/* Read the stream until the Send has completed and every byte of it is read (the peer's
 * reads free the socket). Returns the bytes read. */
static size_t drain_until_complete(struct host *h, uint8_t *sink, size_t cap)
{
    bool completed = false;
    size_t got = 0;
    uint64_t end = fixture_now_ms() + DP_TIMEOUT_MS;
    while (!completed || got < WIRE_LEN) {
        NDK_RESULT_EX r;
        if (!completed && h->s.cq->Dispatch->NdkGetCqResultsEx(h->s.cq, &r, 1) == 1) {
            dp_check_result(&r, STATUS_SUCCESS, MSG, QPCTX, (void *)7, NdkOperationTypeSend);
            completed = true;
        }
        CHECK_MSG(fixture_now_ms() < end, "Send %s, %zu of %u bytes read",
                  completed ? "completed" : "not completed", got, (unsigned)WIRE_LEN);
        size_t want = cap - got < 4096 ? cap - got : 4096;
        ssize_t n = recv(h->raw, sink + got, want, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        else
            CHECK_MSG(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "recv: %d", errno);
    }
    return got;
}

static void run(bool check, bool modify, ULONG64 *modified, size_t *payload_match)
{
    struct host h;
    host_open(&h, check);
    dp_fill(h.s.buf, MSG, 11);
    uint8_t *orig = malloc(MSG);
    CHECK(orig != NULL);
    memcpy(orig, h.s.buf, MSG);
    dp_post_send(&h.s, (void *)7, 0, MSG, 0);
    if (modify)
        memset(h.s.buf, 0x5a, MSG); /* the consumer's bug: the source before its completion */
    size_t cap = MSG + 4096;
    uint8_t *sink = malloc(cap);
    CHECK(sink != NULL);
    CHECK_EQ_U64(drain_until_complete(&h, sink, cap), WIRE_LEN);
    /* the stream's payload bytes that equal what was posted */
    size_t match = 0, off = 0, pos = 0;
    while (off < MSG) {
        size_t len = MSG - off < FPDU_PAY ? MSG - off : FPDU_PAY;
        for (size_t i = 0; i < len; i++)
            match += sink[pos + 20 + i] == orig[off + i];
        off += len;
        pos += 20 + len + 4;
    }
    *payload_match = match;
    *modified = source_modified(h.a);
    free(sink);
    free(orig);
    host_close(&h);
}

TEST(source_check_counts_a_source_changed_before_completion)
{
    ULONG64 modified;
    size_t match;
    run(true, true, &modified, &match);
    /* the FPDUs built before the change and sent after it: at least one, at most all nine */
    CHECK_MSG(modified >= 1 && modified <= 9, "SourceModified %llu", (unsigned long long)modified);
    CHECK(match < MSG); /* and the peer did get other bytes than were posted */
}

TEST(source_check_is_quiet_for_an_untouched_source)
{
    ULONG64 modified;
    size_t match;
    run(true, false, &modified, &match);
    CHECK_EQ_U64(modified, 0);
    CHECK_EQ_U64(match, MSG);
}

TEST(source_check_off_counts_nothing)
{
    ULONG64 modified;
    size_t match;
    run(false, true, &modified, &match);
    CHECK_EQ_U64(modified, 0);
}

TEST(source_check_joins_the_verifier_once_per_qp)
{
    CHECK(setenv("SOFTNDK_VERIFY", "warn", 1) == 0);
    ULONG64 modified;
    size_t match;
    run(true, true, &modified, &match);
    CHECK_MSG(modified >= 1 && modified <= 9, "SourceModified %llu", (unsigned long long)modified);
    CHECK_EQ_U64(verify_reports, 1); /* however many FPDUs: one report for the QP */
    run(true, false, &modified, &match);
    CHECK_EQ_U64(modified, 0);
    CHECK_EQ_U64(verify_reports, 0);
}
