#include "ndk_objects.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

NTSTATUS ndk_close_any(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_COMPLETION cb, void *ctx)
{
    switch (h->ObjectType) {
    case NdkObjectTypePd:
        return ((NDK_PD *)h)->Dispatch->NdkClosePd(h, cb, ctx);
    case NdkObjectTypeCq:
        return ((NDK_CQ *)h)->Dispatch->NdkCloseCq(h, cb, ctx);
    case NdkObjectTypeMr:
        return ((NDK_MR *)h)->Dispatch->NdkCloseMr(h, cb, ctx);
    case NdkObjectTypeMw:
        return ((NDK_MW *)h)->Dispatch->NdkCloseMw(h, cb, ctx);
    case NdkObjectTypeSrq:
        return ((NDK_SRQ *)h)->Dispatch->NdkCloseSrq(h, cb, ctx);
    case NdkObjectTypeQp:
        return ((NDK_QP *)h)->Dispatch->NdkCloseQp(h, cb, ctx);
    case NdkObjectTypeConnector:
        return ((NDK_CONNECTOR *)h)->Dispatch->NdkCloseConnector(h, cb, ctx);
    case NdkObjectTypeListener:
        return ((NDK_LISTENER *)h)->Dispatch->NdkCloseListener(h, cb, ctx);
    case NdkObjectTypeSharedEndpoint:
        return ((NDK_SHARED_ENDPOINT *)h)->Dispatch->NdkCloseSharedEndpoint(h, cb, ctx);
    default:
        harness_fail(__FILE__, __LINE__, "close of an object of type %d", (int)h->ObjectType);
    }
}

void ndk_create_never(void *ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)status, (void)obj;
    harness_fail(__FILE__, __LINE__, "create completion called: creates never pend in softndk");
}

void ndk_request_never(void *ctx, NTSTATUS status)
{
    (void)ctx, (void)status;
    harness_fail(__FILE__, __LINE__, "request completion called for an inline request");
}

struct sockaddr_in ndk_loopback4(uint16_t port)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sin;
}

struct close_adapter_arg {
    NDK_ADAPTER *a;
    struct harness_event done;
};

static void *close_adapter_thread(void *p)
{
    struct close_adapter_arg *arg = p;
    SoftNdkCloseAdapter(arg->a);
    harness_event_signal(&arg->done);
    return NULL;
}

bool ndk_try_close_adapter(NDK_ADAPTER *a, unsigned timeout_ms)
{
    struct close_adapter_arg *arg = calloc(1, sizeof *arg); /* leaked if the close hangs */
    CHECK(arg != NULL);
    arg->a = a;
    harness_event_init(&arg->done);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, close_adapter_thread, arg) == 0);
    if (!harness_event_wait(&arg->done, 1, timeout_ms)) {
        pthread_detach(t);
        return false;
    }
    pthread_join(t, NULL);
    harness_event_destroy(&arg->done);
    free(arg);
    return true;
}

void ndk_close_adapter(NDK_ADAPTER *a)
{
    CHECK_MSG(ndk_try_close_adapter(a, NDK_TEST_WAIT_MS),
              "SoftNdkCloseAdapter did not return: an object was left open");
}

void ndk_req_init(struct ndk_req *r)
{
    harness_event_init(&r->ev);
    r->status = STATUS_PENDING;
}

void ndk_req_done(void *ctx, NTSTATUS st)
{
    struct ndk_req *r = ctx;
    r->status = st;
    harness_event_signal(&r->ev);
}

NTSTATUS ndk_req_wait(struct ndk_req *r, NTSTATUS st)
{
    if (st != STATUS_PENDING) {
        CHECK_MSG(!harness_event_wait(&r->ev, 1, NDK_TEST_QUIET_MS),
                  "a completion followed an inline status");
        return st;
    }
    CHECK_MSG(harness_event_wait(&r->ev, 1, NDK_TEST_WAIT_MS), "request never completed");
    return r->status;
}
