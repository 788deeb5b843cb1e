/* Connection faults (docs/faults.md "Connection faults"): drop, crc, terminate, stall, delay,
 * the conn= / side= selectors and p= with a seed. Each test opens a client and a server adapter
 * with their own Faults strings, connects them over 127.0.0.1 and checks exactly what the fault
 * did: completion statuses, data up to the fault point, the disconnect event, the counters. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

#define KIB   1024u
#define RBASE 100u /* receive contexts */
#define SBASE 200u /* send contexts */

/* The server posts nrecv receives of `size` bytes (slot i), then the client posts nsend Sends of
 * `size` bytes (message i from slot i) as one DEFER chain, so that all are queued before the
 * first byte leaves. Returns the time just before the chain was pushed. */
static uint64_t send_stream(struct fx_pair *p, unsigned nrecv, unsigned nsend, size_t size)
{
    for (unsigned i = 0; i < nrecv; i++)
        fx_post_recv(&p->sv, RBASE + i, (size_t)i * size, size);
    for (unsigned i = 0; i < nsend; i++)
        fx_fill_slot(&p->cl, i, size);
    uint64_t t0 = 0;
    for (unsigned i = 0; i < nsend; i++) {
        bool last = i + 1 == nsend;
        if (last)
            t0 = fixture_now_us();
        fx_post_send(&p->cl, SBASE + i, (size_t)i * size, size, last ? 0 : NDK_OP_FLAG_DEFER);
    }
    return t0;
}

/* Where the stream back (server to client) keeps its slots: the upper half of both buffers.
 * send_stream's slots (the lower half) may still be the provider's when it starts — the
 * client's Sends read them, the server's receives fill them, until their completions are
 * collected — so the answer can neither receive into them nor refill them. */
static size_t back_off(const struct fx_pair *p)
{
    CHECK(p->cl.len == p->sv.len);
    return p->cl.len / 2;
}

/* The same from the server to the client, in the upper half; message i is fx_fill(seed 3000 +
 * i) (not send_stream's: a message that landed in the wrong direction's slot shows). */
static void send_stream_back(struct fx_pair *p, unsigned nrecv, unsigned nsend, size_t size)
{
    size_t off = back_off(p);
    CHECK((size_t)(nrecv > nsend ? nrecv : nsend) * size <= p->cl.len - off);
    for (unsigned i = 0; i < nrecv; i++)
        fx_post_recv(&p->cl, RBASE + i, off + (size_t)i * size, size);
    for (unsigned i = 0; i < nsend; i++)
        fx_fill(p->sv.buf + off + (size_t)i * size, size, 3000u + i);
    for (unsigned i = 0; i < nsend; i++)
        fx_post_send(&p->sv, SBASE + i, off + (size_t)i * size, size,
                     i + 1 == nsend ? 0 : NDK_OP_FLAG_DEFER);
}

/* ------------------------------------------------------------------------------------------ */
/* drop */

/* 10 Sends of 1 KiB, 12 receives; the connection is cut after 5 FPDUs by `cf` on the client or
 * `sf` on the server. tx_exact: the client's sends split exactly 5 / 5. */
static void drop_case(const char *cf, const char *sf, bool on_client, bool partial)
{
    struct fx_pair *p = fx_pair_open(cf, sf);
    send_stream(p, 12, 10, KIB);
    fx_expect(&p->sv, 12);
    fx_check_receives(&p->sv, &p->cl, 12, 5, KIB, RBASE);
    fx_expect(&p->cl, 10);
    unsigned sent = on_client ? fx_check_initiator(&p->cl, 10, 5, 5, SBASE)
                              : fx_check_initiator(&p->cl, 10, 5, 10, SBASE);
    /* locally as on a TCP reset; the peer sees a reset */
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    /* nothing after the cut reached the server's memory (a cut inside FPDU 6 may have placed
     * its first bytes: a cancelled receive's buffer is undefined) */
    for (unsigned i = partial ? 6 : 5; i < 12; i++)
        for (size_t b = 0; b < KIB; b++)
            CHECK_MSG(p->sv.buf[i * KIB + b] == 0, "receive slot %u written after the cut", i);
    SOFTNDK_COUNTERS c, s;
    fx_counters(p->ac, &c);
    fx_counters(p->as, &s);
    CHECK_EQ_U64(c.InjectedFaults, on_client ? 1 : 0);
    CHECK_EQ_U64(s.InjectedFaults, on_client ? 0 : 1);
    CHECK_EQ_U64(c.ConnectionError, 1);
    CHECK_EQ_U64(s.ConnectionError, 1);
    CHECK_EQ_U64(c.FlushedRequests, 10 - sent);
    CHECK_EQ_U64(s.FlushedRequests, 7);
    CHECK_EQ_U64(c.CrcErrors + s.CrcErrors, 0);
    CHECK_EQ_U64(c.TerminatesSent[0] + c.TerminatesSent[1] + c.TerminatesSent[2], 0);
    CHECK_EQ_U64(s.TerminatesSent[0] + s.TerminatesSent[1] + s.TerminatesSent[2], 0);
    /* the QPs are dead: initiator requests are refused inline */
    CHECK_STATUS(fx_try_send(&p->cl, 1, 0, 8, 0), STATUS_CONNECTION_INVALID);
    CHECK_STATUS(fx_try_send(&p->sv, 1, 0, 8, 0), STATUS_CONNECTION_INVALID);
    fx_pair_close(p);
}

TEST(drop_tx_after_5_fpdus_of_10)
{
    drop_case("drop:dir=tx,after_fpdus=5", "", true, false);
}

TEST(drop_tx_after_bytes_on_an_fpdu_boundary)
{
    char rule[96];
    snprintf(rule, sizeof rule, "drop:dir=tx,after_bytes=%zu", 5 * FX_SEND_FPDU(KIB));
    drop_case(rule, "", true, false);
}

TEST(drop_tx_after_bytes_inside_an_fpdu)
{
    /* 5 FPDUs and 100 bytes of the 6th leave: the 6th never completes */
    char rule[96];
    snprintf(rule, sizeof rule, "drop:dir=tx,after_bytes=%zu", 5 * FX_SEND_FPDU(KIB) + 100);
    drop_case(rule, "", true, true);
}

TEST(drop_rx_after_5_fpdus_of_10)
{
    drop_case("", "drop:dir=rx,after_fpdus=5", false, false);
}

TEST(drop_rx_after_bytes_inside_an_fpdu)
{
    char rule[96];
    snprintf(rule, sizeof rule, "drop:dir=rx,after_bytes=%zu", 5 * FX_SEND_FPDU(KIB) + 700);
    drop_case("", rule, false, true);
}

TEST(drop_defaults_cut_before_the_first_fpdu)
{
    /* dir=tx, after_fpdus=0 by default */
    struct fx_pair *p = fx_pair_open("drop", "");
    send_stream(p, 4, 3, KIB);
    fx_expect(&p->sv, 4);
    fx_check_receives(&p->sv, &p->cl, 4, 0, KIB, RBASE);
    fx_expect(&p->cl, 3);
    fx_check_initiator(&p->cl, 3, 0, 0, SBASE);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    CHECK_EQ_U64(fx_injected(p->as), 0);
    fx_pair_close(p);
}

TEST(drop_point_never_reached_leaves_the_connection_alone)
{
    struct fx_pair *p = fx_pair_open("drop:dir=tx,after_fpdus=100", "drop:dir=rx,after_fpdus=100");
    send_stream(p, 10, 10, KIB);
    fx_expect(&p->sv, 10);
    fx_check_receives(&p->sv, &p->cl, 10, 10, KIB, RBASE);
    fx_expect(&p->cl, 10);
    fx_check_initiator(&p->cl, 10, 10, 10, SBASE);
    fx_expect_no_disconnect(&p->cl);
    fx_expect_no_disconnect(&p->sv);
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->ac), 0);
    CHECK_EQ_U64(fx_injected(p->as), 0);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* crc */

/* FPDU 4 of 10 has a bad CRC: the receiver (server) detects it, sends an MPA Terminate (CRC
 * error); both abort. */
static void crc_case(const char *cf, const char *sf, bool on_client)
{
    struct fx_pair *p = fx_pair_open(cf, sf);
    send_stream(p, 12, 10, KIB);
    fx_expect(&p->sv, 12);
    fx_check_receives(&p->sv, &p->cl, 12, 3, KIB, RBASE);
    fx_expect(&p->cl, 10);
    /* the bad FPDU itself left in full: at least 4 Sends are in TCP before the Terminate */
    fx_check_initiator(&p->cl, 10, 4, 10, SBASE);
    fx_expect_disconnect(&p->sv, FX_REASON_SENT(FX_TERM_MPA_CRC));
    fx_expect_disconnect(&p->cl, FX_REASON_RECVD(FX_TERM_MPA_CRC));
    SOFTNDK_COUNTERS c, s;
    fx_counters(p->ac, &c);
    fx_counters(p->as, &s);
    CHECK_EQ_U64(c.InjectedFaults, on_client ? 1 : 0);
    CHECK_EQ_U64(s.InjectedFaults, on_client ? 0 : 1);
    CHECK_EQ_U64(s.CrcErrors, 1);
    CHECK_EQ_U64(c.CrcErrors, 0);
    CHECK_EQ_U64(s.TerminatesSent[2], 1);
    CHECK_EQ_U64(s.TerminatesSent[0] + s.TerminatesSent[1], 0);
    CHECK_EQ_U64(fx_term_count(s.TerminateSentCodes, FX_TERM_MPA_CRC), 1);
    CHECK_EQ_U64(fx_term_slots(s.TerminateSentCodes), 1);
    CHECK_EQ_U64(c.TerminatesReceived[2], 1);
    CHECK_EQ_U64(c.TerminatesReceived[0] + c.TerminatesReceived[1], 0);
    CHECK_EQ_U64(fx_term_count(c.TerminateReceivedCodes, FX_TERM_MPA_CRC), 1);
    CHECK_EQ_U64(c.TerminatesSent[0] + c.TerminatesSent[1] + c.TerminatesSent[2], 0);
    CHECK_EQ_U64(c.ConnectionError, 1);
    CHECK_EQ_U64(s.ConnectionError, 1);
    fx_pair_close(p);
}

TEST(crc_tx_peer_detects_and_sends_mpa_terminate)
{
    crc_case("crc:dir=tx,after_fpdus=3", "", true);
}

TEST(crc_rx_fails_our_check_and_we_send_mpa_terminate)
{
    crc_case("", "crc:dir=rx,after_fpdus=3", false);
}

TEST(crc_does_not_fire_without_crc_on_the_connection)
{
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, "crc:dir=tx");
    fx_options(&os, "crc:dir=rx;crc:dir=tx");
    oc.Crc = os.Crc = SoftNdkCrcOff;
    struct fx_pair *p = fx_pair_open_with(&oc, &os, 1u << 20, 64, 64);
    send_stream(p, 10, 10, KIB);
    send_stream_back(p, 10, 10, KIB);
    fx_expect(&p->sv, 20);
    fx_check_receives(&p->sv, &p->cl, 10, 10, KIB, RBASE);
    fx_check_initiator(&p->sv, 10, 10, 10, SBASE);
    fx_expect(&p->cl, 20);
    fx_check_receives_at(&p->cl, &p->sv, back_off(p), 10, 10, KIB, RBASE);
    fx_check_initiator(&p->cl, 10, 10, 10, SBASE);
    fx_expect_no_disconnect(&p->cl);
    fx_expect_no_disconnect(&p->sv);
    fx_disconnect(&p->cl, &p->sv);
    SOFTNDK_COUNTERS c, s;
    fx_counters(p->ac, &c);
    fx_counters(p->as, &s);
    CHECK_EQ_U64(c.InjectedFaults, 0);
    CHECK_EQ_U64(s.InjectedFaults, 0);
    CHECK_EQ_U64(c.CrcErrors + s.CrcErrors, 0);
    CHECK_EQ_U64(c.ConnectionError + s.ConnectionError, 0);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* terminate */

static void terminate_case(const char *rule, unsigned after, unsigned layer, ULONG code)
{
    struct fx_pair *p = fx_pair_open(rule, "");
    send_stream(p, 12, 10, KIB);
    fx_expect(&p->sv, 12);
    fx_check_receives(&p->sv, &p->cl, 12, after, KIB, RBASE);
    fx_expect(&p->cl, 10);
    /* FPDU after+1 was replaced by the Terminate: exactly `after` Sends left */
    fx_check_initiator(&p->cl, 10, after, after, SBASE);
    fx_expect_disconnect(&p->cl, FX_REASON_SENT(code));
    fx_expect_disconnect(&p->sv, FX_REASON_RECVD(code));
    SOFTNDK_COUNTERS c, s;
    fx_counters(p->ac, &c);
    fx_counters(p->as, &s);
    CHECK_EQ_U64(c.InjectedFaults, 1);
    CHECK_EQ_U64(s.InjectedFaults, 0);
    for (unsigned l = 0; l < 3; l++) {
        CHECK_EQ_U64(c.TerminatesSent[l], l == layer);
        CHECK_EQ_U64(s.TerminatesReceived[l], l == layer);
        CHECK_EQ_U64(c.TerminatesReceived[l], 0);
        CHECK_EQ_U64(s.TerminatesSent[l], 0);
    }
    CHECK_EQ_U64(fx_term_count(c.TerminateSentCodes, code), 1);
    CHECK_EQ_U64(fx_term_slots(c.TerminateSentCodes), 1);
    CHECK_EQ_U64(fx_term_count(s.TerminateReceivedCodes, code), 1);
    CHECK_EQ_U64(fx_term_slots(s.TerminateReceivedCodes), 1);
    CHECK_EQ_U64(c.CrcErrors + s.CrcErrors, 0);
    fx_pair_close(p);
}

TEST(terminate_default_is_rdmap_local_catastrophic_code_0)
{
    terminate_case("terminate:after_fpdus=2", 2, 0, FX_TERM(0, 0, 0));
}

TEST(terminate_ddp_etype_code_reach_the_peer)
{
    terminate_case("terminate:after_fpdus=0,layer=ddp,etype=2,code=5", 0, 1, FX_TERM(1, 2, 5));
}

TEST(terminate_mpa_layer_hex_code)
{
    terminate_case("terminate:layer=mpa,etype=0,code=0x07,after_fpdus=4", 4, 2, FX_TERM(2, 0, 7));
}

TEST(terminate_rdmap_remote_protection)
{
    terminate_case("terminate:after_fpdus=1,layer=rdmap,etype=1,code=2", 1, 0, FX_TERM(0, 1, 2));
}

/* ------------------------------------------------------------------------------------------ */
/* stall */

/* 10 Sends of 1 KiB; the stall of 200 ms comes before message `at` (0-based). Everything arrives
 * intact, message `at` not before 200 ms after the chain was pushed, the earlier ones well
 * before it. */
static void stall_case(const char *cf, const char *sf, unsigned at, bool on_client)
{
    struct fx_pair *p = fx_pair_open(cf, sf);
    uint64_t t0 = send_stream(p, 10, 10, KIB);
    uint64_t posted = fixture_now_us() - t0;
    CHECK_MSG(posted < 100000, "the posting call took %llu us: a tx stall must only queue",
              (unsigned long long)posted);
    fx_expect(&p->sv, 10);
    fx_check_receives(&p->sv, &p->cl, 10, 10, KIB, RBASE);
    fx_expect(&p->cl, 10);
    fx_check_initiator(&p->cl, 10, 10, 10, SBASE);
    uint64_t t_at = fx_nth(&p->sv, true, at)->t_us - t0;
    uint64_t t_last = fx_nth(&p->sv, true, 9)->t_us - t0;
    fx_note("  stall: message %u arrived after %.1f ms, the last after %.1f ms\n", at,
            (double)t_at / 1000, (double)t_last / 1000);
    CHECK_MSG(t_at >= 195000, "message %u arrived after %llu us: the stall was shorter than 200 ms",
              at, (unsigned long long)t_at);
    if (at > 0) {
        uint64_t t_before = fx_nth(&p->sv, true, at - 1)->t_us - t0;
        CHECK_MSG(t_at - t_before >= 100000,
                  "message %u came %llu us after message %u: the stall was not at that point", at,
                  (unsigned long long)(t_at - t_before), at - 1);
    }
    fx_expect_no_disconnect(&p->cl);
    fx_expect_no_disconnect(&p->sv);
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->ac), on_client ? 1 : 0);
    CHECK_EQ_U64(fx_injected(p->as), on_client ? 0 : 1);
    fx_pair_close(p);
}

TEST(stall_tx_200ms_after_3_fpdus_loses_nothing)
{
    stall_case("stall:dir=tx,after_fpdus=3,ms=200", "", 3, true);
}

TEST(stall_rx_200ms_after_3_fpdus_loses_nothing)
{
    stall_case("", "stall:dir=rx,after_fpdus=3,ms=200", 3, false);
}

TEST(stall_tx_at_a_byte_inside_the_third_fpdu)
{
    char rule[96];
    snprintf(rule, sizeof rule, "stall:dir=tx,after_bytes=%zu,ms=200", 2 * FX_SEND_FPDU(KIB) + 400);
    stall_case(rule, "", 2, true);
}

TEST(stall_rx_at_byte_0)
{
    stall_case("", "stall:dir=rx,after_bytes=0,ms=200", 0, false);
}

/* p=100 fires at every FPDU; count bounds the firings per connection. */
static void stall_count_case(const char *rule, uint64_t fired)
{
    struct fx_pair *p = fx_pair_open(rule, "");
    send_stream(p, 10, 10, KIB);
    fx_expect(&p->sv, 10);
    fx_check_receives(&p->sv, &p->cl, 10, 10, KIB, RBASE);
    fx_expect(&p->cl, 10);
    fx_check_initiator(&p->cl, 10, 10, 10, SBASE);
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->ac), fired);
    CHECK_EQ_U64(fx_injected(p->as), 0);
    fx_pair_close(p);
}

TEST(stall_p100_count3_fires_three_times)
{
    stall_count_case("stall:dir=tx,p=100,ms=5,count=3", 3);
}

TEST(stall_p100_count0_fires_at_every_fpdu)
{
    stall_count_case("stall:dir=tx,p=100,ms=2,count=0", 10);
}

/* ------------------------------------------------------------------------------------------ */
/* delay */

static void delay_case(const char *cf, const char *sf, bool on_client)
{
    enum { N = 40, MS = 2 };
    struct fx_pair *p = fx_pair_open(cf, sf);
    uint64_t t0 = send_stream(p, N, N, 64);
    fx_expect(&p->sv, N);
    fx_check_receives(&p->sv, &p->cl, N, N, 64, RBASE);
    fx_expect(&p->cl, N);
    fx_check_initiator(&p->cl, N, N, N, SBASE);
    uint64_t took = fx_nth(&p->sv, true, N - 1)->t_us - t0;
    fx_note("  delay: %d messages took %.1f ms\n", N, (double)took / 1000);
    /* at most one FPDU per ms: N FPDUs span at least N-1 gaps */
    CHECK_MSG(took >= (uint64_t)(N - 1) * MS * 1000, "%d messages took only %llu us", N,
              (unsigned long long)took);
    fx_expect_no_disconnect(&p->cl);
    fx_expect_no_disconnect(&p->sv);
    NDK_ADAPTER *a = on_client ? p->ac : p->as;
    uint64_t fired = fx_injected(a);
    fx_note("  delay: InjectedFaults %llu for %d FPDUs\n", (unsigned long long)fired, N);
    /* every delayed FPDU counts (docs/faults.md does not say; docs/history/faults.md) */
    CHECK_MSG(fired == N, "InjectedFaults %llu for %d delayed FPDUs", (unsigned long long)fired, N);
    CHECK_EQ_U64(fx_injected(on_client ? p->as : p->ac), 0);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
}

TEST(delay_tx_2ms_serialises_and_loses_nothing)
{
    delay_case("delay:dir=tx,ms=2", "", true);
}

TEST(delay_rx_2ms_serialises_and_loses_nothing)
{
    delay_case("", "delay:dir=rx,ms=2", false);
}

/* ------------------------------------------------------------------------------------------ */
/* selectors */

TEST(conn_selector_hits_only_that_connection)
{
    /* the client adapter's connections are #1, #2, #3 (one at a time) */
    NDK_ADAPTER *ac = fx_open("drop:dir=tx,after_fpdus=1,conn=2");
    NDK_ADAPTER *as = fx_open("");
    struct fx_server srv;
    fx_listen(&srv, as);
    for (unsigned k = 1; k <= 3; k++) {
        struct fx_pair *p = calloc(1, sizeof *p);
        CHECK(p != NULL);
        p->ac = ac;
        p->as = as;
        fx_side_init(&p->cl, ac, 64 * KIB, 16, 16);
        fx_side_init(&p->sv, as, 64 * KIB, 16, 16);
        fx_establish(&p->cl, &p->sv, &srv);
        send_stream(p, 4, 3, KIB);
        fx_expect(&p->sv, k == 2 ? 4 : 3);
        fx_check_receives(&p->sv, &p->cl, k == 2 ? 4 : 3, k == 2 ? 1 : 3, KIB, RBASE);
        fx_expect(&p->cl, 3);
        fx_check_initiator(&p->cl, 3, k == 2 ? 1 : 3, k == 2 ? 1 : 3, SBASE);
        if (k == 2) {
            fx_expect_disconnect(&p->cl, FX_REASON_RESET);
            fx_expect_disconnect(&p->sv, FX_REASON_RESET);
        } else {
            fx_disconnect(&p->cl, &p->sv);
        }
        CHECK_EQ_U64(fx_injected(ac), k >= 2 ? 1 : 0);
        fx_side_close(&p->cl);
        fx_side_close(&p->sv);
        free(p);
    }
    CHECK_EQ_U64(fx_injected(as), 0);
    fx_server_close(&srv);
    ndk_close_adapter(ac);
    ndk_close_adapter(as);
}

TEST(side_selector_on_one_adapter_with_both_ends)
{
    /* one adapter is both client and server: only its passive connection drops */
    NDK_ADAPTER *a = fx_open("drop:dir=tx,after_fpdus=1,side=passive");
    struct fx_pair *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    p->ac = p->as = a;
    fx_listen(&p->srv, a);
    fx_side_init(&p->cl, a, 64 * KIB, 16, 16);
    fx_side_init(&p->sv, a, 64 * KIB, 16, 16);
    fx_establish(&p->cl, &p->sv, &p->srv);
    /* active -> passive: untouched */
    send_stream(p, 3, 3, KIB);
    fx_expect(&p->sv, 3);
    fx_check_receives(&p->sv, &p->cl, 3, 3, KIB, RBASE);
    fx_expect(&p->cl, 3);
    fx_check_initiator(&p->cl, 3, 3, 3, SBASE);
    CHECK_EQ_U64(fx_injected(a), 0);
    p->cl.nres = p->sv.nres = 0;
    /* passive -> active: cut after one FPDU */
    send_stream_back(p, 4, 3, KIB);
    fx_expect(&p->cl, 4);
    fx_check_receives_at(&p->cl, &p->sv, back_off(p), 4, 1, KIB, RBASE);
    fx_expect(&p->sv, 3);
    fx_check_initiator(&p->sv, 3, 1, 1, SBASE);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    CHECK_EQ_U64(fx_injected(a), 1);
    fx_side_close(&p->cl);
    fx_side_close(&p->sv);
    fx_server_close(&p->srv);
    ndk_close_adapter(a);
    free(p);
}

TEST(side_selector_skips_the_other_side)
{
    /* the client adapter has only active connections, the server only passive ones */
    struct fx_pair *p = fx_pair_open("drop:dir=tx,side=passive;crc:dir=tx,side=passive",
                                     "drop:dir=tx,side=active;terminate:side=active");
    send_stream(p, 5, 5, KIB);
    send_stream_back(p, 5, 5, KIB);
    fx_expect(&p->sv, 10);
    fx_check_receives(&p->sv, &p->cl, 5, 5, KIB, RBASE);
    fx_expect(&p->cl, 10);
    fx_check_receives_at(&p->cl, &p->sv, back_off(p), 5, 5, KIB, RBASE);
    fx_check_initiator(&p->cl, 5, 5, 5, SBASE);
    fx_check_initiator(&p->sv, 5, 5, 5, SBASE);
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->ac), 0);
    CHECK_EQ_U64(fx_injected(p->as), 0);
    fx_pair_close(p);
}

TEST(side_any_and_active_hit_the_client)
{
    struct fx_pair *p = fx_pair_open("drop:dir=tx,after_fpdus=2,side=active", "");
    send_stream(p, 5, 5, KIB);
    fx_expect(&p->sv, 5);
    fx_check_receives(&p->sv, &p->cl, 5, 2, KIB, RBASE);
    fx_expect(&p->cl, 5);
    fx_check_initiator(&p->cl, 5, 2, 2, SBASE);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
    p = fx_pair_open("drop:dir=tx,after_fpdus=2,side=any", "");
    send_stream(p, 5, 5, KIB);
    fx_expect(&p->sv, 5);
    fx_check_receives(&p->sv, &p->cl, 5, 2, KIB, RBASE);
    fx_expect(&p->cl, 5);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* p= with a seed */

/* 150 Sends of 64 B with "seed=S; crc:dir=tx,p=5" on the client: the number of receives that
 * completed before the bad FPDU. */
static unsigned crc_p_run(unsigned seed)
{
    enum { N = 150 };
    char rule[96];
    snprintf(rule, sizeof rule, "seed=%u; crc:dir=tx,p=5", seed);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, rule);
    fx_options(&os, "");
    struct fx_pair *p = fx_pair_open_with(&oc, &os, 64 * KIB, 256, 256);
    send_stream(p, N, N, 64);
    fx_expect(&p->sv, N);
    unsigned ok = 0;
    while (ok < N && fx_nth(&p->sv, true, ok)->status == STATUS_SUCCESS)
        ok++;
    CHECK_MSG(ok < N, "seed %u: p=5 never fired in %d FPDUs", seed, N);
    fx_check_receives(&p->sv, &p->cl, N, ok, 64, RBASE);
    fx_expect(&p->cl, N);
    fx_check_initiator(&p->cl, N, ok + 1, N, SBASE);
    fx_expect_disconnect(&p->sv, FX_REASON_SENT(FX_TERM_MPA_CRC));
    fx_expect_disconnect(&p->cl, FX_REASON_RECVD(FX_TERM_MPA_CRC));
    SOFTNDK_COUNTERS s;
    fx_counters(p->as, &s);
    CHECK_EQ_U64(s.CrcErrors, 1);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
    return ok;
}

TEST(p_with_a_seed_fires_at_the_same_fpdu_every_run)
{
    unsigned a = crc_p_run(7), b = crc_p_run(7), c = crc_p_run(7);
    fx_note("  seed 7: the bad CRC came after %u, %u, %u good FPDUs\n", a, b, c);
    CHECK_EQ_U64(a, b);
    CHECK_EQ_U64(b, c);
}

TEST(p_with_other_seeds_fires_elsewhere)
{
    unsigned first = crc_p_run(1), distinct = 0;
    fx_note("  seed 1: %u", first);
    for (unsigned seed = 2; seed <= 6; seed++) {
        unsigned k = crc_p_run(seed);
        fx_note(", seed %u: %u", seed, k);
        distinct += k != first;
    }
    fx_note(" good FPDUs before the bad CRC\n");
    CHECK_MSG(distinct > 0, "six seeds fired at the same FPDU: the seed is not used");
}

/* ------------------------------------------------------------------------------------------ */
/* RDMA Write is an FPDU like a Send */

TEST(drop_counts_rdma_writes_as_fpdus)
{
    /* Write, Send, Write, Send, ...: cut after 3 FPDUs = Write 0, Send 0, Write 1 */
    struct fx_pair *p = fx_pair_open("drop:dir=tx,after_fpdus=3", "");
    const size_t W = 2 * KIB, S = 256, WOFF = 512 * KIB;
    for (unsigned i = 0; i < 4; i++)
        fx_post_recv(&p->sv, RBASE + i, (size_t)i * S, S);
    for (unsigned i = 0; i < 4; i++) {
        fx_fill_slot(&p->cl, i, S);
        fx_fill(p->cl.buf + WOFF + (size_t)i * W, W, 5000u + i);
    }
    for (unsigned i = 0; i < 4; i++) {
        fx_post_write(&p->cl, SBASE + 2 * i, WOFF + (size_t)i * W, W, &p->sv, WOFF + (size_t)i * W,
                      NDK_OP_FLAG_DEFER);
        fx_post_send(&p->cl, SBASE + 2 * i + 1, (size_t)i * S, S, i == 3 ? 0 : NDK_OP_FLAG_DEFER);
    }
    fx_expect(&p->sv, 4);
    fx_check_receives(&p->sv, &p->cl, 4, 1, S, RBASE);
    fx_expect(&p->cl, 8);
    fx_check_initiator(&p->cl, 8, 3, 3, SBASE);
    fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    /* Writes 0 and 1 were placed in full, 2 and 3 not at all */
    CHECK_MEM(p->sv.buf + WOFF, p->cl.buf + WOFF, 2 * W);
    for (size_t b = 2 * W; b < 4 * W; b++)
        CHECK_MSG(p->sv.buf[WOFF + b] == 0, "a Write after the cut was placed (byte %zu)", b);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* stall: what "nothing is lost" means on each side */

TEST(stall_tx_postings_queue_during_the_stall)
{
    /* the stall starts before FPDU 2; Sends posted meanwhile are accepted at once, queue behind
     * it and leave in order */
    struct fx_pair *p = fx_pair_open("stall:dir=tx,after_fpdus=1,ms=300", "");
    for (unsigned i = 0; i < 8; i++)
        fx_post_recv(&p->sv, RBASE + i, i * KIB, KIB);
    for (unsigned i = 0; i < 8; i++)
        fx_fill_slot(&p->cl, i, KIB);
    uint64_t t0 = fixture_now_us();
    fx_post_send(&p->cl, SBASE, 0, KIB, NDK_OP_FLAG_DEFER);
    fx_post_send(&p->cl, SBASE + 1, KIB, KIB, 0); /* pushes: 1 leaves, the stall begins */
    CHECK(fx_collect(&p->sv, 1, FIXTURE_WAIT_MS) == 1);
    for (unsigned i = 2; i < 8; i++) {
        uint64_t t = fixture_now_us();
        fx_post_send(&p->cl, SBASE + i, i * KIB, KIB, 0);
        CHECK_MSG(fixture_now_us() - t < 50000, "NdkSend blocked %llu us during a tx stall",
                  (unsigned long long)(fixture_now_us() - t));
    }
    CHECK_MSG(fixture_now_us() - t0 < 250000, "posting took the stall's time: it must only queue");
    fx_expect(&p->sv, 8);
    fx_check_receives(&p->sv, &p->cl, 8, 8, KIB, RBASE);
    CHECK_MSG(fx_nth(&p->sv, true, 1)->t_us - t0 >= 295000, "message 2 did not wait for the stall");
    fx_expect(&p->cl, 8);
    fx_check_initiator(&p->cl, 8, 8, 8, SBASE);
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
}

static unsigned long long sysctl_max(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long a = 0, b = 0, c = 0;
    if (f) {
        if (fscanf(f, "%llu %llu %llu", &a, &b, &c) != 3)
            c = 0;
        fclose(f);
    }
    return c;
}

TEST(stall_rx_pushes_back_on_the_sender)
{
    /* the server reads nothing for 400 ms: more than both TCP buffers can hold cannot leave the
     * sender in that time (its Sends retire when in TCP), and then all of it arrives */
    enum { N = 48, MS = 400 };
    const size_t size = 1u << 20;
    unsigned long long cap =
        sysctl_max("/proc/sys/net/ipv4/tcp_rmem") + sysctl_max("/proc/sys/net/ipv4/tcp_wmem");
    if (cap == 0 || cap >= (unsigned long long)(N - 2) * size)
        SKIP("TCP buffers of %llu bytes could hold the whole stream", cap);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, "");
    fx_options(&os, "stall:dir=rx,after_fpdus=0,ms=400");
    struct fx_pair *p = fx_pair_open_with(&oc, &os, N * size, 64, 64);
    uint64_t t0 = send_stream(p, N, N, size);
    fx_expect(&p->sv, N);
    fx_check_receives(&p->sv, &p->cl, N, N, size, RBASE);
    fx_expect(&p->cl, N);
    fx_check_initiator(&p->cl, N, N, N, SBASE);
    uint64_t last_send = fx_nth(&p->cl, false, N - 1)->t_us - t0;
    fx_note("  stall rx: the sender's last Send retired after %.1f ms\n", (double)last_send / 1000);
    CHECK_MSG(last_send >= (MS - 50) * 1000u,
              "the sender's last Send retired after %llu us: nothing pushed back",
              (unsigned long long)last_send);
    CHECK_MSG(fx_nth(&p->sv, true, 0)->t_us - t0 >= (MS - 5) * 1000u, "the receiver read early");
    fx_disconnect(&p->cl, &p->sv);
    CHECK_EQ_U64(fx_injected(p->as), 1);
    fx_pair_close(p);
}

/* ------------------------------------------------------------------------------------------ */
/* the log and the trace of a connection fault */

TEST(crc_without_crc_is_logged_once)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, "crc:dir=tx,after_fpdus=1");
    fx_options(&os, "");
    oc.Crc = os.Crc = SoftNdkCrcOff;
    for (int k = 0; k < 2; k++) {
        struct fx_pair *p = fx_pair_open_with(&oc, &os, 64 * KIB, 16, 16);
        send_stream(p, 4, 4, KIB);
        fx_expect(&p->sv, 4);
        fx_check_receives(&p->sv, &p->cl, 4, 4, KIB, RBASE);
        fx_expect(&p->cl, 4);
        fx_disconnect(&p->cl, &p->sv);
        CHECK_EQ_U64(fx_injected(p->ac), 0);
        fx_pair_close(p);
    }
    char *log = fx_capture_end(&cap);
    /* per adapter: each run's adapter says it once */
    unsigned n = fx_count_lines(log, "crc:dir=tx,after_fpdus=1", (char *)NULL);
    CHECK_MSG(n == 2, "%u log lines name the rule over 2 adapters x 4 FPDUs, expected 1 each", n);
    CHECK_EQ_U64(fx_count_lines(log, "injected crc", (char *)NULL), 0);
    free(log);
}

TEST(connection_fault_log_names_rule_connection_and_side)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    /* Both ends inject a fault on their connection #1: the client cuts its stream inside the
     * NdkSend that pushes it (tx FPDU 2: a reset); the server answers and its first FPDU is
     * replaced by a Terminate. The server must not have taken in the reset before it posts
     * its answer, or the post is refused (STATUS_CONNECTION_INVALID) and its Terminate never
     * fires — on a slow run (TSan) its progress thread wins that race. So its receive side
     * stalls from byte 0 (the reset stays unread) until its own Terminate ends the connection
     * (which cancels the stall). */
    struct fx_pair *p = fx_pair_open("seed=9; drop:dir=tx,after_fpdus=1",
                                     "stall:dir=rx,after_bytes=0,ms=5000; terminate:after_fpdus=0");
    send_stream(p, 2, 2, KIB);
    send_stream_back(p, 2, 2, KIB);
    fx_expect(&p->cl, 4);
    fx_expect(&p->sv, 4);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    /* docs/faults.md: softndk[fault] injected drop (rule 2 "drop:after_fpdus=10") on connection
     * #1 (active, QP 0x...) */
    unsigned a =
        fx_count_lines(log, "warn", "injected drop", "(rule 1 \"drop:dir=tx,after_fpdus=1\")",
                       "connection #1", (char *)NULL);
    CHECK_MSG(a == 1, "no warn line: injected drop (rule 1 \"...\") on connection #1");
    CHECK_MSG(fx_count_lines(log, "injected drop", "active", (char *)NULL) == 1,
              "the drop's log line does not name the side (\"active\", docs/faults.md)");
    /* the server's own connection #1, its side */
    CHECK_MSG(fx_count_lines(log, "warn", "injected terminate",
                             "(rule 2 \"terminate:after_fpdus=0\")", "connection #1", "passive",
                             (char *)NULL) == 1,
              "no warn line: injected terminate (rule 2 \"...\") on connection #1 (passive, ...)");
    CHECK_EQ_U64(fx_count_lines(log, "injected", "active", (char *)NULL), 1);
    free(log);
}

TEST(connection_fault_is_traced_with_kind_rule_and_conn)
{
    char path[] = "/tmp/softndk-faults-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, "seed=1;stall:dir=rx,ms=1,after_fpdus=100;drop:dir=tx,after_fpdus=2");
    fx_options(&os, "");
    oc.TraceFile = path;
    struct fx_pair *p = fx_pair_open_with(&oc, &os, 64 * KIB, 16, 16);
    send_stream(p, 4, 4, KIB);
    fx_expect(&p->sv, 4);
    fx_expect(&p->cl, 4);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    fx_pair_close(p);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[2048];
    unsigned found = 0, any = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"ev\":\"fault.injected\""))
            continue;
        any++;
        found += strstr(line, "\"kind\":\"drop\"") && strstr(line, "\"rule\":2") &&
                 strstr(line, "\"conn\":1");
    }
    fclose(f);
    unlink(path);
    CHECK_MSG(any == 1 && found == 1,
              "%u fault.injected events, %u with kind drop, rule 2, conn 1; expected 1", any,
              found);
}

/* ------------------------------------------------------------------------------------------ */
/* a held-back direction keeps its order with the FIN behind it */

/* The client sends n messages and disconnects at once (its FIN right behind them); the server's
 * rx is held back by `rule`. TCP delivers the FIN after the data, so when the server's
 * disconnect event fires every message must already have completed: a consumer that stops at
 * the event (ndkperf does) would otherwise lose them. */
static void fin_behind_held_data(const char *rule, unsigned n, bool polling)
{
    struct fx_pair *p = fx_pair_open("", rule);
    send_stream(p, n, n, KIB);
    struct ndk_req rd;
    ndk_req_init(&rd);
    NTSTATUS st = p->cl.conn->Dispatch->NdkDisconnect(p->cl.conn, ndk_req_done, &rd);
    CHECK_MSG(st == STATUS_PENDING || st == STATUS_SUCCESS, "NdkDisconnect: %s",
              SoftNdkStatusName(st));
    if (polling) {
        /* a polling consumer (it receives itself) that stops at the event */
        uint64_t end = fixture_now_us() + FIXTURE_WAIT_MS * 1000ull;
        while (atomic_load(&p->sv.disc_n) == 0 && fixture_now_us() < end)
            fx_collect(&p->sv, n + 1, 1);
    }
    /* (not polling: the server's progress thread receives) */
    CHECK_MSG(harness_event_wait(&p->sv.disc_ev, 1, FIXTURE_WAIT_MS), "no disconnect event");
    CHECK_EQ_U64(atomic_load(&p->sv.disc_reason), 0);
    unsigned at_event = fx_collect(&p->sv, n, 0);
    unsigned got = fx_collect(&p->sv, n, FIXTURE_WAIT_MS);
    fx_note("  \"%s\"%s: %u of %u receives had completed when the disconnect event fired, %u "
            "in the end\n",
            rule, polling ? " (polling)" : "", at_event, n, got);
    CHECK_MSG(got == n, "only %u of %u receives completed: data lost behind the FIN", got, n);
    fx_check_receives(&p->sv, &p->cl, n, n, KIB, RBASE);
    CHECK_MSG(at_event == n,
              "the disconnect event (the peer's FIN) overtook %u messages held back by \"%s\"",
              n - at_event, rule);
    struct ndk_req rs;
    ndk_req_init(&rs);
    NTSTATUS st2 = p->sv.conn->Dispatch->NdkDisconnect(p->sv.conn, ndk_req_done, &rs);
    CHECK_STATUS(ndk_req_wait(&rs, st2), STATUS_SUCCESS);
    CHECK_STATUS(ndk_req_wait(&rd, st), STATUS_SUCCESS);
    fx_expect(&p->cl, n);
    fx_check_initiator(&p->cl, n, n, n, SBASE);
    fx_pair_close(p);
}

TEST(no_fault_data_ahead_of_the_peers_fin)
{
    /* the baseline: what the cases below must match */
    fin_behind_held_data("", 8, false);
    fin_behind_held_data("", 8, true);
}

TEST(stall_rx_keeps_data_ahead_of_the_peers_fin)
{
    fin_behind_held_data("stall:dir=rx,after_fpdus=3,ms=200", 8, false);
}

TEST(stall_rx_keeps_data_ahead_of_the_peers_fin_polling)
{
    fin_behind_held_data("stall:dir=rx,after_fpdus=3,ms=200", 8, true);
}

TEST(delay_rx_keeps_data_ahead_of_the_peers_fin)
{
    fin_behind_held_data("delay:dir=rx,ms=3", 8, false);
}

TEST(delay_rx_keeps_data_ahead_of_the_peers_fin_polling)
{
    fin_behind_held_data("delay:dir=rx,ms=3", 8, true);
}

/* ------------------------------------------------------------------------------------------ */
/* ending a connection while a stall holds it */

/* A 4 s stall; the consumer flushes or closes meanwhile: everything completes at once and the
 * objects close without waiting for the stall to end. */
static void end_during_stall(const char *cf, const char *sf, bool flush)
{
    struct fx_pair *p = fx_pair_open(cf, sf);
    send_stream(p, 6, 6, KIB);
    /* message 1 arrives, then the stall holds the rest (a delay may hold message 1 already:
     * see delay_holds_every_fpdu_ms_before_it_goes) */
    if (!strstr(cf, "delay"))
        CHECK(fx_collect(&p->sv, 1, FIXTURE_WAIT_MS) == 1);
    uint64_t t0 = fixture_now_us();
    if (flush) {
        p->cl.qp->Dispatch->NdkFlush(p->cl.qp);
        fx_expect(&p->cl, 6);
        fx_check_initiator(&p->cl, 6, 1, 6, SBASE);
        uint64_t took = fixture_now_us() - t0;
        CHECK_MSG(took < 1000000, "NdkFlush during a 4 s stall completed after %llu us",
                  (unsigned long long)took);
        fx_expect_disconnect(&p->sv, FX_REASON_RESET);
    }
    t0 = fixture_now_us();
    fx_pair_close(p);
    uint64_t took = fixture_now_us() - t0;
    fx_note("  closing everything during the stall took %.1f ms\n", (double)took / 1000);
    CHECK_MSG(took < 2000000, "closing during a 4 s stall took %llu us: the stall held the close",
              (unsigned long long)took);
}

TEST(close_during_a_tx_stall_does_not_wait_for_it)
{
    end_during_stall("stall:dir=tx,after_fpdus=1,ms=4000", "", false);
}

TEST(close_during_an_rx_stall_does_not_wait_for_it)
{
    end_during_stall("", "stall:dir=rx,after_fpdus=1,ms=4000", false);
}

TEST(flush_during_a_tx_stall_completes_at_once)
{
    end_during_stall("stall:dir=tx,after_fpdus=1,ms=4000", "", true);
}

TEST(close_during_a_long_delay_does_not_wait_for_it)
{
    end_during_stall("delay:dir=tx,ms=4000", "", false);
}

TEST(delay_holds_every_fpdu_ms_before_it_goes)
{
    /* "Every FPDU of that direction is held ms before it goes out ... Each held FPDU counts
     * as one injected fault": after an idle time too, and each one again */
    struct fx_pair *p = fx_pair_open("delay:dir=tx,ms=300", "");
    for (unsigned i = 0; i < 2; i++)
        fx_post_recv(&p->sv, RBASE + i, i * KIB, KIB);
    for (unsigned i = 0; i < 2; i++)
        fx_fill_slot(&p->cl, i, KIB);
    CHECK(!harness_event_wait(&p->cl.disc_ev, 1, 400)); /* idle 400 ms > 300 ms */
    uint64_t t0 = fixture_now_us();
    fx_post_send(&p->cl, SBASE, 0, KIB, 0);
    CHECK(fx_collect(&p->sv, 1, FIXTURE_WAIT_MS) == 1);
    uint64_t first = fixture_now_us() - t0;
    fx_post_send(&p->cl, SBASE + 1, KIB, KIB, 0);
    CHECK(fx_collect(&p->sv, 2, FIXTURE_WAIT_MS) == 2);
    uint64_t second = fixture_now_us() - t0 - first;
    fx_note("  delay 300 ms after 400 ms idle: message 1 after %.1f ms, message 2 %.1f ms later\n",
            (double)first / 1000, (double)second / 1000);
    fx_check_receives(&p->sv, &p->cl, 2, 2, KIB, RBASE);
    CHECK_MSG(first >= 295000, "the first FPDU after an idle time waited only %llu us",
              (unsigned long long)first);
    CHECK_MSG(second >= 295000, "the second FPDU waited only %llu us",
              (unsigned long long)second);
    CHECK_MSG(fx_injected(p->ac) == 2, "InjectedFaults %llu, want 2 (one per held FPDU)",
              (unsigned long long)fx_injected(p->ac));
    fx_pair_close(p);
}

static unsigned drop_p_after_run(void)
{
    struct fx_pair *p = fx_pair_open("seed=5; drop:dir=tx,after_fpdus=10,p=30", "");
    send_stream(p, 40, 40, 256);
    fx_expect(&p->sv, 40);
    unsigned ok = 0;
    while (ok < 40 && fx_nth(&p->sv, true, ok)->status == STATUS_SUCCESS)
        ok++;
    fx_check_receives(&p->sv, &p->cl, 40, ok, 256, RBASE);
    fx_expect(&p->cl, 40);
    fx_check_initiator(&p->cl, 40, ok, ok, SBASE);
    fx_expect_disconnect(&p->cl, FX_REASON_RESET);
    CHECK_EQ_U64(fx_injected(p->ac), 1);
    fx_pair_close(p);
    return ok;
}

TEST(p_draws_only_after_the_after_point)
{
    /* FPDUs 1-10 pass untouched; from FPDU 11 each is cut with probability 30 % */
    unsigned a = drop_p_after_run(), b = drop_p_after_run();
    fx_note("  drop p=30 after 10: cut after %u and %u FPDUs\n", a, b);
    CHECK_MSG(a >= 10 && a < 40, "cut after %u FPDUs", a);
    CHECK_EQ_U64(a, b);
}

/* ------------------------------------------------------------------------------------------ */
/* The consumer verifier (docs/verifier.md): a consumer that commits a mistake gets exactly the
 * report expected (its rule's counter 1, once per object, no other rule), a clean one none. */

static struct fx_pair *verify_pair(SOFTNDK_VERIFY_MODE mode)
{
    SOFTNDK_OPTIONS oc, os;
    fx_options(&oc, NULL);
    fx_options(&os, NULL);
    oc.Verify = os.Verify = mode;
    return fx_pair_open_with(&oc, &os, 1u << 16, 16, 16);
}

/* The adapter's verifier counters: `rule` (or none: SoftNdkVerifyRuleCount) at want, every other
 * rule at 0. */
static void verify_expect(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule, uint64_t want)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    for (int i = 0; i < SOFTNDK_VERIFY_RULE_SLOTS; i++)
        CHECK_MSG(c.VerifyViolations[i] == (i == (int)rule ? want : 0),
                  "VerifyViolations[%d] = %llu, want %llu", i,
                  (unsigned long long)c.VerifyViolations[i],
                  (unsigned long long)(i == (int)rule ? want : 0));
}

static uint64_t verify_count(NDK_ADAPTER *a, SOFTNDK_VERIFY_RULE rule)
{
    SOFTNDK_COUNTERS c;
    fx_counters(a, &c);
    return c.VerifyViolations[rule];
}

TEST(verify_clean_consumer_gets_no_report)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyStrict);
    for (unsigned i = 0; i < 4; i++)
        fx_post_recv(&p->sv, 100 + i, 4096u * i, 4096);
    for (unsigned i = 0; i < 4; i++)
        fx_post_send(&p->cl, 200 + i, 4096u * i, 512, 0);
    fx_post_write(&p->cl, 300, 0, 1024, &p->sv, 32768, 0);
    fx_expect(&p->cl, 5);
    fx_expect(&p->sv, 4);
    fx_disconnect(&p->cl, &p->sv);
    verify_expect(p->ac, SoftNdkVerifyRuleCount, 0);
    verify_expect(p->as, SoftNdkVerifyRuleCount, 0);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify: [", NULL), 0);
    CHECK_EQ_U64(fx_count_lines(log, "verify: adapter", "violation(s)", NULL), 0);
    free(log);
}

TEST(verify_connection_data_after_accept_and_complete_is_named_once)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    for (int round = 0; round < 2; round++) {
        NDK_CONNECTOR *cs[2] = {p->cl.conn, p->sv.conn};
        for (int i = 0; i < 2; i++) {
            ULONG ird = 0, ord = 0, len = 0;
            /* lenient: it still answers */
            CHECK_STATUS(cs[i]->Dispatch->NdkGetConnectionData(cs[i], &ird, &ord, NULL, &len),
                         STATUS_SUCCESS);
        }
    }
    verify_expect(p->ac, SoftNdkVerifyConnDataLate, 1);
    verify_expect(p->as, SoftNdkVerifyConnDataLate, 1);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "verify", "[conn_data_late]", "CONN-6",
                                "\"NDK_FN_GET_CONNECTION_DATA\"", "after the NdkCompleteConnect",
                                NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "verify", "[conn_data_late]", "after the NdkAccept", NULL), 1);
    /* the summary at close names the rule and its count */
    CHECK_EQ_U64(fx_count_lines(log, "verify", "1 violation(s): conn_data_late=1", NULL), 2);
    free(log);
}

TEST(verify_post_on_a_qp_never_connected_names_the_request)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    o.Verify = SoftNdkVerifyWarn;
    NDK_ADAPTER *a = fx_open_with(&o);
    struct fx_side *s = calloc(1, sizeof *s);
    fx_side_init(s, a, 8192, 4, 4);
    CHECK_STATUS(fx_try_send(s, 0x5151, 0, 64, 0), STATUS_CONNECTION_INVALID);
    CHECK_STATUS(fx_try_send(s, 0x5152, 0, 64, 0), STATUS_CONNECTION_INVALID);
    verify_expect(a, SoftNdkVerifyPostNotConnected, 1);
    fx_side_close(s);
    free(s);
    ndk_close_adapter(a);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[post_not_connected]", "NdkSend(AndInvalidate) on a QP",
                                "RequestContext 0x5151", "POST-5",
                                "\"NDKPI Work Request Posting Requirements\"", NULL),
                 1);
    CHECK_EQ_U64(fx_count_lines(log, "0x5152", NULL), 0);
    free(log);
}

TEST(verify_connector_call_in_the_wrong_state)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    struct ndk_req r;
    ndk_req_init(&r);
    /* established: a second NdkCompleteConnect, then an NdkAccept on the active connector */
    CHECK_STATUS(p->cl.conn->Dispatch->NdkCompleteConnect(p->cl.conn, NULL, NULL, ndk_req_done,
                                                          (void *)0x6161),
                 STATUS_CONNECTION_INVALID);
    CHECK_STATUS(p->cl.conn->Dispatch->NdkAccept(p->cl.conn, p->cl.qp, 0, 0, NULL, 0, NULL, NULL,
                                                 ndk_req_done, &r),
                 STATUS_INVALID_DEVICE_STATE);
    verify_expect(p->ac, SoftNdkVerifyConnectorState, 1);
    verify_expect(p->as, SoftNdkVerifyRuleCount, 0);
    harness_event_destroy(&r.ev);
    fx_disconnect(&p->cl, &p->sv);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[connector_state]", "NdkCompleteConnect in state connected",
                                "RequestContext 0x6161", "CONN-13", NULL),
                 1);
    free(log);
}

TEST(verify_disconnect_with_initiator_requests_outstanding)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    fx_post_recv(&p->sv, 1, 0, 4096);
    /* DEFER: accepted, held back: outstanding when NdkDisconnect comes */
    fx_post_send(&p->cl, 0x7171, 0, 256, NDK_OP_FLAG_DEFER);
    struct ndk_req rd, rs;
    ndk_req_init(&rd);
    NTSTATUS st = p->cl.conn->Dispatch->NdkDisconnect(p->cl.conn, ndk_req_done, &rd);
    CHECK(harness_event_wait(&p->sv.disc_ev, 1, FIXTURE_WAIT_MS));
    ndk_req_init(&rs);
    NTSTATUS st2 = p->sv.conn->Dispatch->NdkDisconnect(p->sv.conn, ndk_req_done, &rs);
    ndk_req_wait(&rs, st2);
    ndk_req_wait(&rd, st);
    verify_expect(p->ac, SoftNdkVerifyDisconnectOutstanding, 1);
    verify_expect(p->as, SoftNdkVerifyRuleCount, 0);
    harness_event_destroy(&rd.ev);
    harness_event_destroy(&rs.ev);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[disconnect_outstanding]", "1 initiator request(s)",
                                "RequestContext 0x7171", "\"NetworkDirect Disconnect Scheme\"",
                                "DISC-6", NULL),
                 1);
    free(log);
}

TEST(verify_early_send_is_named_on_the_side_without_a_receive)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    /* the server posts no receive: the client's Send finds none */
    fx_post_send(&p->cl, 0x8181, 0, 128, 0);
    CHECK_EQ_U64(fx_wait_counter(p->as,
                                 offsetof(SOFTNDK_COUNTERS, VerifyViolations) +
                                     sizeof(ULONG64) * SoftNdkVerifyNoReceivePosted,
                                 1),
                 1);
    CHECK(harness_event_wait(&p->cl.disc_ev, 1, FIXTURE_WAIT_MS)); /* the Terminate reached it */
    verify_expect(p->as, SoftNdkVerifyNoReceivePosted, 1);
    verify_expect(p->ac, SoftNdkVerifyRuleCount, 0);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[no_receive_posted]",
                                "a Send arrived with no receive posted: post receives before "
                                "NdkAccept/NdkConnect",
                                "found the receive queue empty", "code 2", NULL),
                 1);
    free(log);
}

/* The driver: it read the remote token of a fast-register MR before NdkFastRegister and
 * gave that one to the peer. The peer's Write is refused; the verifier names it on the side that
 * owns the token, with the current one. */
static NDK_MR *verify_fr_mr(struct fx_side *s)
{
    NDK_MR *m = NULL;
    CHECK_STATUS(s->pd->Dispatch->NdkCreateMr(s->pd, TRUE, ndk_create_never, NULL, &m),
                 STATUS_SUCCESS);
    CHECK_STATUS(m->Dispatch->NdkInitializeFastRegisterMr(m, 4, TRUE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    return m;
}

static void verify_fast_register(struct fx_side *s, NDK_MR *m, uint8_t *buf, uintptr_t ctx)
{
    NDK_LOGICAL_ADDRESS pages[4];
    for (int i = 0; i < 4; i++)
        pages[i].QuadPart = (int64_t)(uintptr_t)(buf + 4096 * i);
    CHECK_STATUS(s->qp->Dispatch->NdkFastRegister(s->qp, (void *)ctx, m, 4, pages, 0, 16384, buf,
                                                  NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_SUCCESS);
}

static uint8_t verify_frbuf[16384] __attribute__((aligned(4096)));

TEST(verify_stale_fast_register_token_is_named_on_the_owner)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    NDK_MR *m = verify_fr_mr(&p->sv);
    UINT32 before = m->Dispatch->NdkGetRemoteTokenFromMr(m); /* the mistake: read too early */
    verify_fast_register(&p->sv, m, verify_frbuf, 0x9191);
    UINT32 after = m->Dispatch->NdkGetRemoteTokenFromMr(m);
    CHECK(before != after);
    fx_expect(&p->sv, 1); /* the FastRegister's completion */
    NDK_SGE sge = fx_sge(&p->cl, 0, 64);
    CHECK_STATUS(p->cl.qp->Dispatch->NdkWrite(p->cl.qp, (void *)0x9292, &sge, 1,
                                              (UINT64)(uintptr_t)verify_frbuf, before, 0),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(fx_wait_counter(p->as,
                                 offsetof(SOFTNDK_COUNTERS, VerifyViolations) +
                                     sizeof(ULONG64) * SoftNdkVerifyStaleToken,
                                 1),
                 1);
    CHECK(harness_event_wait(&p->cl.disc_ev, 1, FIXTURE_WAIT_MS)); /* terminated, as before */
    verify_expect(p->as, SoftNdkVerifyStaleToken, 1);
    verify_expect(p->ac, SoftNdkVerifyRuleCount, 0);
    fixture_close_wait(&m->Header);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    char want[96];
    snprintf(want, sizeof want, "token 0x%08x is from the previous registration; current 0x%08x",
             (unsigned)before, (unsigned)after);
    CHECK_EQ_U64(fx_count_lines(log, "[stale_token]", want, "MEM-3", NULL), 1);
    free(log);
}

TEST(verify_fast_register_of_a_valid_mr)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    NDK_MR *m = verify_fr_mr(&p->sv);
    verify_fast_register(&p->sv, m, verify_frbuf, 0xa1);
    verify_expect(p->as, SoftNdkVerifyRuleCount, 0);     /* the first one is fine */
    verify_fast_register(&p->sv, m, verify_frbuf, 0xa2); /* no NdkInvalidate in between */
    verify_fast_register(&p->sv, m, verify_frbuf, 0xa3);
    fx_expect(&p->sv, 3);
    verify_expect(p->as, SoftNdkVerifyFastRegisterValid, 1);
    fx_disconnect(&p->cl, &p->sv);
    fixture_close_wait(&m->Header);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[fast_register_valid]", "RequestContext 0xa2",
                                "is still valid", "MEM-7", NULL),
                 1);
    free(log);
}

struct verify_poller {
    NDK_CQ *cq;
    NDK_ADAPTER *a;
    atomic_bool stop;
};

static void *verify_poll_thread(void *arg)
{
    struct verify_poller *v = arg;
    NDK_RESULT_EX r[4];
    while (!atomic_load(&v->stop))
        v->cq->Dispatch->NdkGetCqResultsEx(v->cq, r, 4);
    return NULL;
}

TEST(verify_two_threads_polling_one_cq)
{
    SOFTNDK_OPTIONS o;
    fx_options(&o, NULL);
    o.Verify = SoftNdkVerifyWarn;
    NDK_ADAPTER *a = fx_open_with(&o);
    struct fx_side *s = calloc(1, sizeof *s);
    fx_side_init(s, a, 8192, 4, 4);
    struct verify_poller v = {.cq = s->cq, .a = a};
    atomic_init(&v.stop, false);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, verify_poll_thread, &v) == 0);
    /* Both threads poll (and this one arms) until the overlap is seen: bounded. */
    uint64_t end = fixture_now_us() + 5000000u;
    NDK_RESULT r[4];
    while (verify_count(a, SoftNdkVerifyCqConcurrent) == 0 && fixture_now_us() < end) {
        s->cq->Dispatch->NdkGetCqResults(s->cq, r, 4);
        s->cq->Dispatch->NdkArmCq(s->cq, NDK_CQ_NOTIFY_ERRORS);
    }
    atomic_store(&v.stop, true);
    pthread_join(t, NULL);
    verify_expect(a, SoftNdkVerifyCqConcurrent, 1); /* once for the CQ, however often */
    fx_side_close(s);
    free(s);
    ndk_close_adapter(a);
}

TEST(verify_strict_aborts_with_the_report)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        SOFTNDK_OPTIONS o;
        fx_options(&o, NULL);
        o.Verify = SoftNdkVerifyStrict;
        NDK_ADAPTER *a = fx_open_with(&o);
        struct fx_side *s = calloc(1, sizeof *s);
        fx_side_init(s, a, 8192, 4, 4);
        fx_try_send(s, 1, 0, 64, 0); /* never returns under strict */
        _exit(0);
    }
    int status = 0;
    uint64_t end = fixture_now_us() + 10000000u;
    pid_t w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && fixture_now_us() < end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK_MSG(false, "the strict child did not end");
    }
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status 0x%x", status);
}

TEST(verify_qp_reused_for_a_second_connection)
{
    struct fx_capture cap;
    fx_capture_begin(&cap);
    struct fx_pair *p = verify_pair(SoftNdkVerifyWarn);
    fx_disconnect(&p->cl, &p->sv);
    NDK_CONNECTOR *c2 = NULL;
    CHECK_STATUS(p->ac->Dispatch->NdkCreateConnector(p->ac, ndk_create_never, NULL, &c2),
                 STATUS_SUCCESS);
    struct sockaddr_in src = ndk_loopback4(0), dst = ndk_loopback4(p->srv.port);
    struct ndk_req r;
    ndk_req_init(&r);
    for (int i = 0; i < 2; i++)
        CHECK_STATUS(c2->Dispatch->NdkConnect(c2, p->cl.qp, (struct sockaddr *)&src, sizeof src,
                                              (struct sockaddr *)&dst, sizeof dst, 4, 4, NULL, 0,
                                              ndk_req_done, &r),
                     STATUS_INVALID_DEVICE_STATE);
    verify_expect(p->ac, SoftNdkVerifyConnectorState, 1);
    verify_expect(p->as, SoftNdkVerifyRuleCount, 0);
    harness_event_destroy(&r.ev);
    fixture_close_wait(&c2->Header);
    fx_pair_close(p);
    char *log = fx_capture_end(&cap);
    CHECK_EQ_U64(fx_count_lines(log, "[connector_state]", "a QP that served a connection",
                                "DISC-5", NULL),
                 1);
    free(log);
}
