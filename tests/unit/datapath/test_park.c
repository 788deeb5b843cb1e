/* Parking (docs/datapath.md, "Who receives"): the progress thread stops reading a connection
 * while its consumer polls, and must never leave it unread once the consumer blocks. */
#include <stdint.h>
#include <string.h>

#include "datapath.h"
#include "core/cq.h"

#define YCTX ((void *)0x2002) /* dp_pair_open's QP context of y */

/* NDK's blocking idiom: arm, look once more, then wait. That last look must not count as
 * polling: the progress thread would park the connection while the consumer sleeps, and a
 * message longer than one receive pass would wait for the park timer. */
TEST(armed_last_look_does_not_mark_the_cq_polled)
{
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    struct sndk_cq *cq = sndk_cq_from(p.y.cq);
    NDK_RESULT_EX r;

    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(sndk_cq_polling(cq));
    p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
    CHECK(!sndk_cq_polling(cq));
    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(!sndk_cq_polling(cq));

    dp_post_recv(&p.y, (void *)1, 0, 64);
    dp_post_send(&p.x, NULL, 0, 40, NDK_OP_FLAG_SILENT_SUCCESS);
    CHECK(harness_event_wait(&p.y.cq_notified, 1, DP_TIMEOUT_MS));
    dp_expect(p.y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 40, YCTX, (void *)1, NdkOperationTypeReceive);
    /* polling again after the notification does count */
    CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
    CHECK(sndk_cq_polling(cq));
    dp_pair_close(&p);
}

/* The idiom end to end with messages of many FPDUs, every byte checked: each message is
 * received by the progress thread while the consumer sleeps. */
TEST(blocking_consumer_receives_multi_fpdu_messages)
{
    enum { MSGS = 24, LEN = 256 * 1024 };
    struct dp_opts o;
    dp_opts_default(&o);
    o.crc = true;
    o.buf_len = 2 * LEN;
    struct dp_pair p;
    dp_pair_open(&p, &o);
    NDK_RESULT_EX r;
    for (unsigned i = 0; i < MSGS; i++) {
        dp_fill(p.x.buf, LEN, i + 1);
        memset(p.y.buf + LEN, 0, LEN);
        dp_post_recv(&p.y, (void *)(uintptr_t)(i + 1), LEN, LEN);
        /* poll empty (as a consumer finishing its previous batch), arm, look once more */
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
        unsigned seen = harness_event_count(&p.y.cq_notified);
        p.y.cq->Dispatch->NdkArmCq(p.y.cq, NDK_CQ_NOTIFY_ANY);
        CHECK_EQ_U64(p.y.cq->Dispatch->NdkGetCqResultsEx(p.y.cq, &r, 1), 0);
        dp_post_send(&p.x, NULL, 0, LEN, NDK_OP_FLAG_SILENT_SUCCESS);
        CHECK_MSG(harness_event_wait(&p.y.cq_notified, seen + 1, DP_TIMEOUT_MS),
                  "message %u: no notification", i);
        dp_expect(p.y.cq, &r, 1, 0);
        dp_check_result(&r, STATUS_SUCCESS, LEN, YCTX, (void *)(uintptr_t)(i + 1),
                        NdkOperationTypeReceive);
        CHECK(memcmp(p.x.buf, p.y.buf + LEN, LEN) == 0);
    }
    dp_pair_close(&p);
}
