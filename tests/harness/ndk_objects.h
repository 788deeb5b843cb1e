/* NDK-object helpers shared by the suites that drive libsoftndk through the public headers
 * (conformance, faults): list each source here beside the suite's own. */
#ifndef SOFTNDK_TESTS_NDK_OBJECTS_H
#define SOFTNDK_TESTS_NDK_OBJECTS_H

#include <ndk/softndk.h>

/* The object's own Close method, whatever its type (fails the test for an unknown type). */
NTSTATUS ndk_close_any(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_COMPLETION cb, void *ctx);

/* Completion callbacks for calls that must not pend in softndk: each fails the test. */
void ndk_create_never(void *ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj);
void ndk_request_never(void *ctx, NTSTATUS status);

#endif
