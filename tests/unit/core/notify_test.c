/* The delivery of CQ and SRQ notifications (device/notify.h): its states as the callbacks and a
 * second thread see them, and the reference its work item takes, which the last run gives back
 * (a reference kept would leave the close pending for ever). */
#include <net/if.h>
#include <stdlib.h>

#include "device/cq.h"
#include "device/srq.h"
#include "harness.h"

static NDK_ADAPTER *open_lo(unsigned threads)
{
    NDK_ADAPTER *a;
    NDK_VERSION v = {2, 0};
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.ProgressThreads = threads; /* more than one: a second run could overlap the first */
    CHECK_EQ_U64(SoftNdkOpenAdapter(if_nametoindex("lo"), v, &o, &a), STATUS_SUCCESS);
    return a;
}

static VOID on_closed(PVOID ctx)
{
    harness_event_signal(ctx);
}

/* Close h and wait for the close to finish, whether inline or pending; returns close's status. */
static NTSTATUS close_and_wait(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT close)
{
    struct harness_event done;
    harness_event_init(&done);
    NTSTATUS st = close(h, on_closed, &done);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK_MSG(harness_event_wait(&done, 1, 5000), "the close never completed: a reference "
                                                      "was not given back");
    harness_event_destroy(&done);
    return st;
}

/* A callback that can be held inside until the test lets it go, and records what it saw. */
struct held {
    _Atomic unsigned calls, inside, overlaps, release;
    _Atomic int state_inside; /* the delivery's state seen from the first call */
    struct harness_event entered, left;
    struct sndk_notify *n; /* the delivery the callback belongs to */
};

static void held_init(struct held *h)
{
    *h = (struct held){.n = NULL};
    harness_event_init(&h->entered);
    harness_event_init(&h->left);
    atomic_store(&h->state_inside, -1);
}

static enum sndk_notify_state state_of(struct sndk_notify *n)
{
    sndk_mutex_lock(n->lock);
    enum sndk_notify_state s = sndk_notify_state(n);
    sndk_mutex_unlock(n->lock);
    return s;
}

static bool released(void *arg)
{
    return atomic_load(&((struct held *)arg)->release) != 0;
}

static void held_call(struct held *h)
{
    if (atomic_fetch_add(&h->inside, 1) != 0)
        atomic_fetch_add(&h->overlaps, 1);
    if (atomic_fetch_add(&h->calls, 1) == 0) {
        atomic_store(&h->state_inside, (int)state_of(h->n));
        harness_event_signal(&h->entered);
        harness_wait_until(released, h, 5000); /* the test raises or closes meanwhile */
    }
    atomic_fetch_sub(&h->inside, 1);
    harness_event_signal(&h->left);
}

static VOID on_cq_held(PVOID ctx, NTSTATUS st)
{
    (void)st;
    held_call(ctx);
}

static NDK_RESULT_EX a_result(void)
{
    NDK_RESULT_EX r = {.Status = STATUS_SUCCESS, .Type = NdkOperationTypeReceive};
    return r;
}

struct idle_arg {
    struct sndk_notify *n;
};
static bool is_idle(void *arg)
{
    return state_of(((struct idle_arg *)arg)->n) == SNDK_NOTIFY_IDLE;
}

/* A notification raised on another thread while the callback runs is due again, not a second
 * run beside it: its callback follows when the first returns, then the delivery is idle. */
TEST(cq_notification_raised_during_its_callback_follows_it)
{
    NDK_ADAPTER *a = open_lo(2);
    struct held h;
    held_init(&h);
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 8, on_cq_held, &h, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    h.n = &cq->notify;
    CHECK_EQ_U64(state_of(&cq->notify), SNDK_NOTIFY_IDLE);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT_EX r = a_result();
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(harness_event_wait(&h.entered, 1, 5000));
    CHECK_EQ_U64(atomic_load(&h.state_inside), SNDK_NOTIFY_DELIVERING);
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK_EQ_U64(state_of(&cq->notify), SNDK_NOTIFY_DUE_AGAIN);
    atomic_store(&h.release, 1);
    CHECK(harness_event_wait(&h.left, 2, 5000));
    struct idle_arg ia = {&cq->notify};
    CHECK(harness_wait_until(is_idle, &ia, 5000));
    CHECK_EQ_U64(atomic_load(&h.calls), 2);
    CHECK_EQ_U64(atomic_load(&h.overlaps), 0);
    close_and_wait(&pub->Header, pub->Dispatch->NdkCloseCq);
    SoftNdkCloseAdapter(a);
}

/* A close while the callback runs pends until it returns and drops the notification due
 * after it: no second callback, and the close completes (every reference given back). */
TEST(cq_close_during_callback_drops_the_next_and_completes_after_it)
{
    NDK_ADAPTER *a = open_lo(2);
    struct held h;
    held_init(&h);
    NDK_CQ *pub;
    CHECK_EQ_U64(a->Dispatch->NdkCreateCq(a, 8, on_cq_held, &h, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_cq *cq = sndk_cq_from(pub);
    h.n = &cq->notify;
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    NDK_RESULT_EX r = a_result();
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK(harness_event_wait(&h.entered, 1, 5000));
    pub->Dispatch->NdkArmCq(pub, NDK_CQ_NOTIFY_ANY);
    CHECK(sndk_cq_post(cq, &r, false));
    CHECK_EQ_U64(state_of(&cq->notify), SNDK_NOTIFY_DUE_AGAIN);
    struct harness_event done;
    harness_event_init(&done);
    CHECK_EQ_U64(pub->Dispatch->NdkCloseCq(&pub->Header, on_closed, &done), STATUS_PENDING);
    CHECK_EQ_U64(state_of(&cq->notify), SNDK_NOTIFY_DELIVERING); /* the next one dropped */
    CHECK_EQ_U64(harness_event_count(&done), 0);
    atomic_store(&h.release, 1); /* cq may be freed from here on */
    CHECK(harness_event_wait(&done, 1, 5000));
    CHECK_EQ_U64(atomic_load(&h.calls), 1);
    SoftNdkCloseAdapter(a);
}

static VOID on_srq_held(PVOID ctx, NTSTATUS st)
{
    (void)st;
    struct held *h = ctx;
    held_call(h);
}

/* The SRQ's notification: re-armed (NdkModifySrq) below the count while its callback runs, the
 * next one is due again and follows the first; the SRQ then closes inline. */
TEST(srq_rearm_during_its_callback_notifies_after_it)
{
    NDK_ADAPTER *a = open_lo(2);
    NDK_PD *pd;
    CHECK_EQ_U64(a->Dispatch->NdkCreatePd(a, NULL, NULL, &pd), STATUS_SUCCESS);
    struct held h;
    held_init(&h);
    NDK_SRQ *pub;
    CHECK_EQ_U64(pd->Dispatch->NdkCreateSrq(pd, 8, 1, 2, on_srq_held, &h, NULL, NULL, NULL, &pub),
                 STATUS_SUCCESS);
    struct sndk_srq *srq = sndk_srq_from(pub);
    h.n = &srq->notify;
    CHECK_EQ_U64(pub->Dispatch->NdkSrqReceive(pub, (void *)1, NULL, 0), STATUS_SUCCESS);
    CHECK_EQ_U64(pub->Dispatch->NdkSrqReceive(pub, (void *)2, NULL, 0), STATUS_SUCCESS);
    struct sndk_recv_wqe *out = malloc(sizeof *out + sizeof(NDK_SGE)); /* the SRQ's 1 SGE */
    CHECK(out);
    CHECK(sndk_srq_take(srq, out)); /* 1 left, below 2: the armed SRQ notifies */
    CHECK(out->context == (void *)1);
    free(out);
    CHECK(harness_event_wait(&h.entered, 1, 5000));
    CHECK_EQ_U64(atomic_load(&h.state_inside), SNDK_NOTIFY_DELIVERING);
    CHECK_EQ_U64(pub->Dispatch->NdkModifySrq(pub, 0, 2, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ_U64(state_of(&srq->notify), SNDK_NOTIFY_DUE_AGAIN);
    atomic_store(&h.release, 1);
    CHECK(harness_event_wait(&h.left, 2, 5000));
    struct idle_arg ia = {&srq->notify};
    CHECK(harness_wait_until(is_idle, &ia, 5000));
    CHECK_EQ_U64(atomic_load(&h.calls), 2);
    CHECK_EQ_U64(atomic_load(&h.overlaps), 0);
    close_and_wait(&pub->Header, pub->Dispatch->NdkCloseSrq);
    close_and_wait(&pd->Header, pd->Dispatch->NdkClosePd);
    SoftNdkCloseAdapter(a);
}
