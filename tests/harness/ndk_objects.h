/* NDK-object helpers shared by the suites that drive libsoftndk through the public headers
 * (conformance, faults): list each source here beside the suite's own. */
#ifndef SOFTNDK_TESTS_NDK_OBJECTS_H
#define SOFTNDK_TESTS_NDK_OBJECTS_H

#include <ndk/softndk.h>
#include <netinet/in.h>
#include <stdbool.h>

#include "harness.h"

/* Bound for every wait on something that must happen. */
#define NDK_TEST_WAIT_MS 5000u
/* Bound for "must NOT happen" checks (the only place a fixed time window is acceptable). */
#define NDK_TEST_QUIET_MS 100u

/* The object's own Close method, whatever its type (fails the test for an unknown type). */
NTSTATUS ndk_close_any(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_COMPLETION cb, void *ctx);

/* Completion callbacks for calls that must not pend in softndk: each fails the test. */
void ndk_create_never(void *ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj);
void ndk_request_never(void *ctx, NTSTATUS status);

/* 127.0.0.1:port as a sockaddr_in (port in host order). */
struct sockaddr_in ndk_loopback4(uint16_t port);

/* SoftNdkCloseAdapter, bounded; false when it did not return within timeout_ms (its thread
 * is then left behind). */
bool ndk_try_close_adapter(NDK_ADAPTER *a, unsigned timeout_ms);
/* The same, failing the test (rather than hanging it) after NDK_TEST_WAIT_MS, which is how a
 * leaked object shows up. */
void ndk_close_adapter(NDK_ADAPTER *a);

/* A request that may complete inline or through its completion callback. */
struct ndk_req {
    struct harness_event ev;
    NTSTATUS status;
};
void ndk_req_init(struct ndk_req *r);
void ndk_req_done(void *ctx, NTSTATUS st); /* the completion callback; ctx = the ndk_req */
/* The result of a request that returned `st`: STATUS_PENDING means its completion carries it
 * (waited for, bounded); anything else is the result and no completion may follow. */
NTSTATUS ndk_req_wait(struct ndk_req *r, NTSTATUS st);

#endif
