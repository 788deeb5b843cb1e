/* Internals of libsoftndk-wdk shared between its files. Nothing here is exported. */
#ifndef SOFTNDK_WDK_INTERNAL_H
#define SOFTNDK_WDK_INTERNAL_H

#include "softndk_wdk.h"
#include "wsk.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdbool.h>
#include <time.h>

/* Parking lot: waits keyed by an address, so that KEVENT, EX_RUNDOWN_REF and friends stay
 * plain words the driver owns (zero-initialisable, no destructor) while waiters still block
 * on a mutex/condvar pair. The waker never touches the object's memory after its atomic
 * store: a waiter may free the object (a KEVENT on its stack) as soon as it sees the store. */
struct wdk_bucket {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
};
struct wdk_bucket *wdk_bucket_of(const volatile void *addr);
/* Wake every waiter parked on addr. */
void wdk_wake(const volatile void *addr);
/* Wait on b (its lock held) until woken or the deadline (NULL = none); false on timeout. */
bool wdk_bucket_wait(struct wdk_bucket *b, const struct timespec *deadline);

/* Monotonic deadline from a Windows timeout (see KeWaitForSingleObject); NULL timeout gives
 * false (no deadline). */
bool wdk_deadline(const LARGE_INTEGER *timeout, struct timespec *deadline);
void wdk_now(struct timespec *ts);

/* IRQL checks that bugcheck like Windows. */
void wdk_require_irql_max(KIRQL max, const char *what);
void wdk_require_irql_min(KIRQL min, const char *what);

/* Bugcheck with an explanation line first. */
__attribute__((noreturn, format(printf, 2, 3))) void wdk_bugcheck_msg(ULONG code, const char *fmt,
                                                                      ...);
/* Harness diagnostics (not DbgPrint): "softndk-wdk: ..." on stderr. */
__attribute__((format(printf, 1, 2))) void wdk_log(const char *fmt, ...);

/* Pool with an explicit caller (internal allocations charged to the driver, e.g. MDLs). */
PVOID wdk_pool_alloc(POOL_FLAGS flags, SIZE_T size, ULONG tag, void *caller);
void wdk_pool_free(PVOID p, ULONG tag, bool check_tag, void *caller);

/* Spin lock primitives without IRQL changes. */
void wdk_spin_acquire(PKSPIN_LOCK lock);
void wdk_spin_release(PKSPIN_LOCK lock);

/* Device objects: references held by queued work items. */
void wdk_device_reference(PDEVICE_OBJECT dev);
void wdk_device_dereference(PDEVICE_OBJECT dev);

/* Tags of the harness's own charges. In memory order: "Mdl ", "IoWk", "Devo". */
#define WDK_TAG_MDL 0x206C644Du
#define WDK_TAG_WORKITEM 0x6B576F49u
#define WDK_TAG_DEVICE 0x6F766544u
#define WDK_TAG_IRP         0x20707249u /* "Irp " */
/* WskSocket (wsksock.c): creates the socket and completes Irp with it. */
NTSTATUS wdk_wsk_socket(ADDRESS_FAMILY AddressFamily, USHORT SocketType, ULONG Protocol,
                        ULONG Flags, PVOID SocketContext, const VOID *Dispatch, PIRP Irp);
/* WskSocketConnect (wsksock.c). */
NTSTATUS wdk_wsk_socket_connect(USHORT SocketType, ULONG Protocol, PSOCKADDR LocalAddress,
                                PSOCKADDR RemoteAddress, PVOID SocketContext, const VOID *Dispatch,
                                PIRP Irp);
#define WDK_TAG_ERRLOG      0x676F4C45u /* "ELog" */
#define WDK_TAG_RTL_STRING  0x536C7452u /* "RtlS" */
#define WDK_POOL_FREED_FILL SOFTNDK_WDK_POOL_FREED_FILL

/* ---- Bugcheck reports (crash.c) */
const char *wdk_bugcheck_name(ULONG code);
bool wdk_is_driver_thread(void);
uint64_t wdk_now_ns(void);

/* What a thread of the driver is doing, for the report: a record on the thread's stack for the
 * duration of a call into the driver (nested calls stack). */
enum wdk_context_kind {
    WDK_CTX_DRIVER_ENTRY,
    WDK_CTX_DRIVER_UNLOAD,
    WDK_CTX_WORK_ITEM,
    WDK_CTX_IRP_DISPATCH,
    WDK_CTX_IRP_COMPLETION,
    WDK_CTX_UNLOAD_CHECKS,
    WDK_CTX_KIND_COUNT,
};
struct wdk_context {
    enum wdk_context_kind kind;
    const void *routine; /* the driver's routine called, or NULL */
    const void *object;  /* its object (work item, IRP, device), or NULL */
    struct wdk_context *outer;
};
void wdk_context_enter(struct wdk_context *c, enum wdk_context_kind kind, const void *routine,
                       const void *object);
void wdk_context_leave(struct wdk_context *c);
/* A thread of the harness starts (a worker): its alternate signal stack, when installed. */
void wdk_crash_thread_start(void);
/* The explanation of the bugcheck about to be raised (wdk_bugcheck_msg). */
__attribute__((format(printf, 1, 0))) void wdk_crash_set_message(const char *fmt, va_list ap);
void wdk_crash_message(const char *msg);
/* The pool block the bugcheck about to be raised is about: the report names it (BLOCK). */
void wdk_crash_block(const void *block);
/* KeBugCheckEx: the report, then the caller aborts. */
void wdk_crash_bugcheck(ULONG code, ULONG_PTR p1, ULONG_PTR p2, ULONG_PTR p3, ULONG_PTR p4);

/* Stack depot: the caller's stack (skip: frames of the harness to leave out) as an id, 0 when
 * not kept; wdk_stack_get gives it back. */
#define WDK_STACK_FRAMES 8u
uint32_t wdk_stack_save(unsigned skip);
unsigned wdk_stack_get(uint32_t id, void *pc[WDK_STACK_FRAMES]);

/* The pool block an address is in or next to (pool.c), for the report. */
struct wdk_pool_hit {
    void *user;    /* the block's address as the driver has it */
    size_t size;   /* its requested size */
    size_t offset; /* of the address from user (past the end: >= size) */
    ULONG tag;
    bool freed;   /* in the quarantine */
    bool special; /* a special-pool block */
    bool after;   /* in the guard page after it */
    bool before;  /* before it (an underrun) */
    uint32_t alloc_stack, free_stack;
    void *alloc_caller, *free_caller;
    uint64_t alloc_ns, free_ns;
};
bool wdk_pool_find(const void *addr, struct wdk_pool_hit *hit);

#endif
