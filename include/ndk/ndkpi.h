/*
 * ndkpi.h — the Network Direct Kernel Provider Interface (NDKPI 2.1) for Linux.
 *
 * Source-compatible with Windows' ndkpi.h: same type, struct, typedef, dispatch-table and
 * constant names, members in the documented order. On x86-64 every struct and table has the
 * x64 Windows size and offsets (pinned by the static asserts at the end). Differences that a
 * Linux (LP64) header must make:
 *   - ULONG is uint32_t (never unsigned long); BOOLEAN is uint8_t; NTSTATUS is int32_t.
 *   - SOCKADDR is the native Linux struct sockaddr (AF_INET6 is 10 here, 23 on Windows).
 *   - MDL is a minimal stand-in (see below); only "start VA + byte count" is honoured.
 *   - Calling convention is the platform default; binary interop with Windows is not a goal.
 *
 * Every provider function is non-blocking ("DISPATCH_LEVEL") except NdkQueryAdapterInfo.
 * Status contract shared by every function that takes a completion callback:
 *   STATUS_SUCCESS  done inline, the callback is never called;
 *   STATUS_PENDING  exactly one later call of the callback carries the final status;
 *   anything else   failed inline, no callback.
 * The statuses each function may return are listed at its typedef; docs/ has one page per
 * object with the remarks.
 */
#ifndef SOFTNDK_NDKPI_H
#define SOFTNDK_NDKPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ndkinfo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* SAL and IRQL annotations: the in/out contract in the prototypes, no code. */
#ifndef SOFTNDK_NO_SAL
#ifndef _In_
#define _In_
#define _In_opt_
#define _Out_
#define _Out_opt_
#define _Inout_
#define _Outptr_
#define _In_reads_(n)
#define _In_reads_bytes_(n)
#define _In_reads_bytes_opt_(n)
#define _Out_writes_bytes_to_opt_(cap, len)
#define _Out_writes_to_(cap, len)
#endif
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status codes NDKPI uses, with their NTSTATUS values. NT_SUCCESS(s) <=> s >= 0: note that
 * STATUS_PENDING counts as success and STATUS_BUFFER_OVERFLOW (a warning) as failure. */
#define SOFTNDK_NTSTATUS(v) ((NTSTATUS)(v))
#ifndef NT_SUCCESS
#define NT_SUCCESS(Status) (((NTSTATUS)(Status)) >= 0)
#endif
#ifndef STATUS_SUCCESS
#define STATUS_SUCCESS                    SOFTNDK_NTSTATUS(0x00000000L)
#define STATUS_TIMEOUT                    SOFTNDK_NTSTATUS(0x00000102L)
#define STATUS_PENDING                    SOFTNDK_NTSTATUS(0x00000103L)
#define STATUS_BUFFER_OVERFLOW            SOFTNDK_NTSTATUS(0x80000005L)
#define STATUS_NO_MORE_ENTRIES            SOFTNDK_NTSTATUS(0x8000001AL)
#define STATUS_UNSUCCESSFUL               SOFTNDK_NTSTATUS(0xC0000001L)
#define STATUS_NOT_IMPLEMENTED            SOFTNDK_NTSTATUS(0xC0000002L)
#define STATUS_ACCESS_VIOLATION           SOFTNDK_NTSTATUS(0xC0000005L)
#define STATUS_INVALID_HANDLE             SOFTNDK_NTSTATUS(0xC0000008L)
#define STATUS_INVALID_PARAMETER          SOFTNDK_NTSTATUS(0xC000000DL)
#define STATUS_INVALID_DEVICE_REQUEST     SOFTNDK_NTSTATUS(0xC0000010L)
#define STATUS_NO_MEMORY                  SOFTNDK_NTSTATUS(0xC0000017L)
#define STATUS_BUFFER_TOO_SMALL           SOFTNDK_NTSTATUS(0xC0000023L)
#define STATUS_INVALID_PARAMETER_MIX      SOFTNDK_NTSTATUS(0xC0000030L)
#define STATUS_DATA_OVERRUN               SOFTNDK_NTSTATUS(0xC000003CL)
#define STATUS_SHARING_VIOLATION          SOFTNDK_NTSTATUS(0xC0000043L)
#define STATUS_INSUFFICIENT_RESOURCES     SOFTNDK_NTSTATUS(0xC000009AL)
#define STATUS_DEVICE_NOT_READY           SOFTNDK_NTSTATUS(0xC00000A3L)
#define STATUS_IO_TIMEOUT                 SOFTNDK_NTSTATUS(0xC00000B5L)
#define STATUS_NOT_SUPPORTED              SOFTNDK_NTSTATUS(0xC00000BBL)
#define STATUS_INTERNAL_ERROR             SOFTNDK_NTSTATUS(0xC00000E5L)
#define STATUS_CANCELLED                  SOFTNDK_NTSTATUS(0xC0000120L)
#define STATUS_LOCAL_DISCONNECT           SOFTNDK_NTSTATUS(0xC000013BL)
#define STATUS_REMOTE_DISCONNECT          SOFTNDK_NTSTATUS(0xC000013CL)
#define STATUS_REMOTE_RESOURCES           SOFTNDK_NTSTATUS(0xC000013DL)
#define STATUS_INVALID_CONNECTION         SOFTNDK_NTSTATUS(0xC0000140L)
#define STATUS_INVALID_ADDRESS            SOFTNDK_NTSTATUS(0xC0000141L)
#define STATUS_INVALID_DEVICE_STATE       SOFTNDK_NTSTATUS(0xC0000184L)
#define STATUS_INVALID_BUFFER_SIZE        SOFTNDK_NTSTATUS(0xC0000206L)
#define STATUS_TOO_MANY_ADDRESSES         SOFTNDK_NTSTATUS(0xC0000209L)
#define STATUS_ADDRESS_ALREADY_EXISTS     SOFTNDK_NTSTATUS(0xC000020AL)
#define STATUS_CONNECTION_DISCONNECTED    SOFTNDK_NTSTATUS(0xC000020CL)
#define STATUS_CONNECTION_RESET           SOFTNDK_NTSTATUS(0xC000020DL)
#define STATUS_NOT_FOUND                  SOFTNDK_NTSTATUS(0xC0000225L)
#define STATUS_CONNECTION_REFUSED         SOFTNDK_NTSTATUS(0xC0000236L)
#define STATUS_GRACEFUL_DISCONNECT        SOFTNDK_NTSTATUS(0xC0000237L)
#define STATUS_ADDRESS_ALREADY_ASSOCIATED SOFTNDK_NTSTATUS(0xC0000238L)
#define STATUS_CONNECTION_INVALID         SOFTNDK_NTSTATUS(0xC000023AL)
#define STATUS_CONNECTION_ACTIVE          SOFTNDK_NTSTATUS(0xC000023BL)
#define STATUS_NETWORK_UNREACHABLE        SOFTNDK_NTSTATUS(0xC000023CL)
#define STATUS_HOST_UNREACHABLE           SOFTNDK_NTSTATUS(0xC000023DL)
#define STATUS_PROTOCOL_UNREACHABLE       SOFTNDK_NTSTATUS(0xC000023EL)
#define STATUS_PORT_UNREACHABLE           SOFTNDK_NTSTATUS(0xC000023FL)
#define STATUS_REQUEST_ABORTED            SOFTNDK_NTSTATUS(0xC0000240L)
#define STATUS_CONNECTION_ABORTED         SOFTNDK_NTSTATUS(0xC0000241L)
#define STATUS_DEVICE_REMOVED             SOFTNDK_NTSTATUS(0xC00002B6L)
#define STATUS_IMPLEMENTATION_LIMIT       SOFTNDK_NTSTATUS(0xC000042BL)
#endif
/* NDIS statuses of the adapter-open path (OPEN_NDK_ADAPTER_HANDLER), same 32-bit space. */
#ifndef NDIS_STATUS_SUCCESS
#define NDIS_STATUS_SUCCESS           SOFTNDK_NTSTATUS(0x00000000L)
#define NDIS_STATUS_BAD_VERSION       SOFTNDK_NTSTATUS(0xC0010004L)
#define NDIS_STATUS_ADAPTER_NOT_READY SOFTNDK_NTSTATUS(0xC0010011L)
#define NDIS_STATUS_RESOURCES         SOFTNDK_NTSTATUS(0xC000009AL)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Common types */

typedef struct _NDK_OBJECT_HEADER_RESERVED_BLOCK {
    PVOID rf[4];
} NDK_OBJECT_HEADER_RESERVED_BLOCK;

typedef enum _NDK_OBJECT_TYPE {
    NdkObjectTypeUndefined = 0,
    NdkObjectTypeAdapter = 1,
    NdkObjectTypeQp = 2,
    NdkObjectTypeCq = 3,
    NdkObjectTypeMr = 4,
    NdkObjectTypeMw = 5,
    NdkObjectTypePd = 6,
    NdkObjectTypeSharedEndpoint = 7,
    NdkObjectTypeConnector = 8,
    NdkObjectTypeListener = 9,
    NdkObjectTypeSrq = 10,
    NdkObjectTypeMax = 11
} NDK_OBJECT_TYPE;

/* First member of every NDK object. The provider sets Version and ObjectType and zeroes
 * NdkReserved, which then belongs to the consumer side until the object is closed. */
typedef struct _NDK_OBJECT_HEADER {
    NDK_VERSION Version;
    NDK_OBJECT_TYPE ObjectType;
    NDK_OBJECT_HEADER_RESERVED_BLOCK NdkReserved;
} NDK_OBJECT_HEADER;

typedef struct _NDK_RESULT {
    NTSTATUS Status;
    ULONG BytesTransferred; /* receive completions only */
    PVOID QPContext;
    PVOID RequestContext;
} NDK_RESULT;

typedef enum _NDK_OPERATION_TYPE {
    NdkOperationTypeReceive = 1,
    NdkOperationTypeReceiveAndInvalidate = 32769, /* Receive | 0x8000 */
    NdkOperationTypeSend = 2,                     /* also for NdkSendAndInvalidate */
    NdkOperationTypeFastRegister = 4,
    NdkOperationTypeBind = 8,
    NdkOperationTypeInvalidate = 16,
    NdkOperationTypeRead = 32,
    NdkOperationTypeWrite = 64
} NDK_OPERATION_TYPE;

typedef struct _NDK_RESULT_EX {
    NTSTATUS Status;
    ULONG BytesTransferred;
    PVOID QPContext;
    PVOID RequestContext;
    NDK_OPERATION_TYPE Type;
    ULONG ProviderErrorCode;                /* 0 on success; softndk's diagnostic code on failure */
    ULONG_PTR TypeSpecificCompletionOutput; /* ReceiveAndInvalidate: invalidated token (low 32) */
} NDK_RESULT_EX;

typedef PHYSICAL_ADDRESS NDK_LOGICAL_ADDRESS;

/* With a token from NdkGetPrivilegedMemoryRegionToken the SGE carries a LogicalAddress (from a
 * LAM); with any other token a VirtualAddress inside the registered region of that token. */
typedef struct _NDK_SGE {
    union {
        PVOID VirtualAddress;
        NDK_LOGICAL_ADDRESS LogicalAddress;
    };
    ULONG Length;
    UINT32 MemoryRegionToken;
} NDK_SGE;

typedef struct _NDK_LOGICAL_ADDRESS_MAPPING {
    PVOID AdapterContext; /* provider-private */
    ULONG AdapterPageCount;
    NDK_LOGICAL_ADDRESS AdapterPageArray[1]; /* really AdapterPageCount entries */
} NDK_LOGICAL_ADDRESS_MAPPING;

typedef struct _NDK_EXTENSION_INTERFACE {
    const void *Dispatch;
} NDK_EXTENSION_INTERFACE;

/* Adapter pages (LAM pages, fast-register pages) are 4 KiB on every host. */
#define NDK_ADAPTER_PAGE_SIZE 0x1000u
#ifndef PAGE_SIZE
#define PAGE_SIZE 0x1000
#endif

/* ------------------------------------------------------------------------------------------ */
/* MDL: a minimal stand-in for the kernel memory descriptor list, with the x64 layout of the
 * real header part. softndk reads only Next, StartVa, ByteOffset and ByteCount: a chain must
 * be virtually contiguous for the Length given, and its memory stays valid (the consumer's
 * "locked pages") while a registration or LAM exists. */
#ifndef SOFTNDK_NO_MDL
typedef struct _MDL {
    struct _MDL *Next;
    int16_t Size;
    int16_t MdlFlags;
    uint16_t AllocationProcessorNumber;
    uint16_t Reserved;
    PVOID Process;
    PVOID MappedSystemVa;
    PVOID StartVa; /* page-aligned */
    ULONG ByteCount;
    ULONG ByteOffset; /* of the first byte within the page at StartVa */
} MDL, *PMDL;

static inline void MmInitializeMdl(MDL *Mdl, PVOID BaseVa, SIZE_T Length)
{
    uintptr_t va = (uintptr_t)BaseVa;
    Mdl->Next = NULL;
    Mdl->Size = (int16_t)sizeof(MDL);
    Mdl->MdlFlags = 0;
    Mdl->AllocationProcessorNumber = 0;
    Mdl->Reserved = 0;
    Mdl->Process = NULL;
    Mdl->MappedSystemVa = NULL;
    Mdl->StartVa = (PVOID)(va & ~(uintptr_t)(NDK_ADAPTER_PAGE_SIZE - 1));
    Mdl->ByteOffset = (ULONG)(va & (NDK_ADAPTER_PAGE_SIZE - 1));
    Mdl->ByteCount = (ULONG)Length;
}

static inline PVOID MmGetMdlVirtualAddress(const MDL *Mdl)
{
    return (PVOID)((char *)Mdl->StartVa + Mdl->ByteOffset);
}

static inline ULONG MmGetMdlByteCount(const MDL *Mdl)
{
    return Mdl->ByteCount;
}

static inline ULONG MmGetMdlByteOffset(const MDL *Mdl)
{
    return Mdl->ByteOffset;
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* Consumer callbacks (implemented by the consumer, called by the provider from its progress
 * threads, or inline where the call then returns STATUS_PENDING; never with a provider lock
 * held; callbacks must not block). */

/* Close of an object finished. The last callback ever made for that object. */
typedef VOID (*NDK_FN_CLOSE_COMPLETION)(_In_opt_ PVOID Context);

/* A request that returned STATUS_PENDING finished with Status. */
typedef VOID (*NDK_FN_REQUEST_COMPLETION)(_In_opt_ PVOID Context, _In_ NTSTATUS Status);

/* A create that returned STATUS_PENDING finished; pNdkObject is &obj->Header on success and
 * NULL on failure. */
typedef VOID (*NDK_FN_CREATE_COMPLETION)(_In_opt_ PVOID Context, _In_ NTSTATUS Status,
                                         _In_ NDK_OBJECT_HEADER *pNdkObject);

/* The CQ's arm was satisfied. CqStatus: STATUS_SUCCESS; STATUS_BUFFER_OVERFLOW (the CQ overran;
 * it and its QPs are dead); STATUS_INTERNAL_ERROR (fatal error, same consequences). */
typedef VOID (*NDK_FN_CQ_NOTIFICATION_CALLBACK)(_In_opt_ PVOID CqNotificationContext,
                                                _In_ NTSTATUS CqStatus);

/* The SRQ's queued-receive count fell below its threshold (STATUS_SUCCESS), or the SRQ failed
 * (STATUS_INTERNAL_ERROR; it and its QPs are dead). */
typedef VOID (*NDK_FN_SRQ_NOTIFICATION_CALLBACK)(_In_opt_ PVOID SrqNotificationContext,
                                                 _In_ NTSTATUS SrqStatus);

typedef struct _NDK_CONNECTOR NDK_CONNECTOR;

/* An incoming connection request reached a listener; the consumer owns pNdkConnector. */
typedef VOID (*NDK_FN_CONNECT_EVENT_CALLBACK)(_In_opt_ PVOID ConnectEventContext,
                                              _In_ NDK_CONNECTOR *pNdkConnector);

/* The peer disconnected or the connection aborted (once; never for the consumer's own
 * NdkDisconnect, NdkFlush, QP close or connector close). */
typedef VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK)(_In_opt_ PVOID DisconnectEventContext);

/* 2.1: as above, with a provider-specific reason (0 = none). */
typedef VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK_EX)(_In_opt_ PVOID DisconnectEventContext,
                                                    _In_ ULONG ProviderDisconnectReason);

/* Close an object (first slot of every table but the adapter's). Returns STATUS_SUCCESS (closed,
 * no callback) or STATUS_PENDING (CloseCompletion follows once successors are closed and
 * running callbacks returned). A close of a valid open object never fails; softndk answers
 * consumer misuse with STATUS_INVALID_PARAMETER (not a softndk object, or an adapter) and
 * STATUS_INVALID_DEVICE_STATE (a second close while the first is pending). */
typedef NTSTATUS (*NDK_FN_CLOSE_OBJECT)(_In_ NDK_OBJECT_HEADER *pNdkObject,
                                        _In_ NDK_FN_CLOSE_COMPLETION CloseCompletion,
                                        _In_opt_ PVOID RequestContext);

/* In every table. STATUS_SUCCESS (pExtensionInterface filled) or STATUS_NOT_SUPPORTED. */
typedef NTSTATUS (*NDK_FN_QUERY_EXTENSION_INTERFACE)(
    _In_ NDK_OBJECT_HEADER *pNdkObject, _In_ GUID *ExtensionInterfaceID,
    _In_ NDK_VERSION ExtensionInterfaceVersion, _Out_ NDK_EXTENSION_INTERFACE *pExtensionInterface);

/* ------------------------------------------------------------------------------------------ */
/* Completion queue */

typedef struct _NDK_CQ NDK_CQ;

/* STATUS_SUCCESS, STATUS_PENDING, STATUS_INVALID_PARAMETER (0 or > MaxCqDepth),
 * STATUS_BUFFER_OVERFLOW (more entries queued than the new depth; CQ unchanged),
 * STATUS_INSUFFICIENT_RESOURCES, STATUS_NOT_SUPPORTED (adapter without
 * NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED; consumers call it only when the flag is set). */
typedef NTSTATUS (*NDK_FN_RESIZE_CQ)(_In_ NDK_CQ *pNdkCq, _In_ ULONG CqDepth,
                                     _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                     _In_opt_ PVOID RequestContext);

#define NDK_CQ_NOTIFY_ERRORS    0 /* only CQ errors (overrun, fatal) */
#define NDK_CQ_NOTIFY_ANY       1 /* the next completion of any kind */
#define NDK_CQ_NOTIFY_SOLICITED 2 /* a receive of a solicited send, or any error completion */

/* Arm the CQ's notification callback (at most once per arm; merges with a pending arm). */
typedef VOID (*NDK_FN_ARM_CQ)(_In_ NDK_CQ *pNdkCq, _In_ ULONG Type);

/* Remove up to nResults completions; returns how many were written (0 = empty). */
typedef ULONG (*NDK_FN_GET_CQ_RESULTS)(_In_ NDK_CQ *pNdkCq,
                                       _Out_writes_to_(nResults, return) NDK_RESULT Results[],
                                       _In_ ULONG nResults);

/* STATUS_SUCCESS, STATUS_INVALID_PARAMETER_MIX (Interval == MAXULONG with Count == MAXULONG or
 * Count > CQ depth), STATUS_INVALID_PARAMETER (not a CQ), STATUS_NOT_SUPPORTED (only without
 * NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED). Never STATUS_PENDING. (NDKPI also allows
 * STATUS_INSUFFICIENT_RESOURCES; softndk allocates nothing here.) */
typedef NTSTATUS (*NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION)(_In_ NDK_CQ *pNdkCq,
                                                          _In_ ULONG ModerationInterval,
                                                          _In_ ULONG ModerationCount);

/* 1.2: as NdkGetCqResults, with operation type and type-specific output. */
typedef ULONG (*NDK_FN_GET_CQ_RESULTS_EX)(_In_ NDK_CQ *pNdkCq,
                                          _Out_writes_to_(nResults, return) NDK_RESULT_EX Results[],
                                          _In_ ULONG nResults);

typedef struct _NDK_CQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseCq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_RESIZE_CQ NdkResizeCq;
    NDK_FN_ARM_CQ NdkArmCq;
    NDK_FN_GET_CQ_RESULTS NdkGetCqResults;
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION NdkControlCqInterruptModeration;
    NDK_FN_GET_CQ_RESULTS_EX NdkGetCqResultsEx;
} NDK_CQ_DISPATCH;

struct _NDK_CQ {
    NDK_OBJECT_HEADER Header;
    const NDK_CQ_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Memory region */

typedef struct _NDK_MR NDK_MR;

#define NDK_MR_FLAG_ALLOW_LOCAL_READ   0x00000000 /* always implied */
#define NDK_MR_FLAG_ALLOW_LOCAL_WRITE  0x00000001
#define NDK_MR_FLAG_ALLOW_REMOTE_READ  0x00000002
#define NDK_MR_FLAG_ALLOW_REMOTE_WRITE 0x00000005 /* includes LOCAL_WRITE */
#define NDK_MR_FLAG_RDMA_READ_SINK     0x00000008

/* STATUS_SUCCESS, STATUS_PENDING, STATUS_INVALID_PARAMETER (MR made for fast registration,
 * Length 0 or beyond the MDL chain or MaxRegistrationSize, chain not virtually contiguous,
 * start address 0, unknown flag or remote write without local write),
 * STATUS_INVALID_DEVICE_STATE (already registered). */
typedef NTSTATUS (*NDK_FN_REGISTER_MR)(_In_ NDK_MR *pNdkMr, _In_ MDL *Mdl, _In_ SIZE_T Length,
                                       _In_ ULONG Flags,
                                       _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                       _In_opt_ PVOID RequestContext);

/* STATUS_SUCCESS, STATUS_PENDING, STATUS_INVALID_DEVICE_STATE (not registered, or windows are
 * still bound to it). */
typedef NTSTATUS (*NDK_FN_DEREGISTER_MR)(_In_ NDK_MR *pNdkMr,
                                         _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                         _In_opt_ PVOID RequestContext);

/* STATUS_SUCCESS, STATUS_PENDING, STATUS_IMPLEMENTATION_LIMIT (AdapterPageCount 0 or above
 * FRMRPageCount), STATUS_INVALID_PARAMETER (MR not made for fast registration),
 * STATUS_INVALID_DEVICE_STATE (already initialized). */
typedef NTSTATUS (*NDK_FN_INITIALIZE_FAST_REGISTER_MR)(
    _In_ NDK_MR *pNdkMr, _In_ ULONG AdapterPageCount, _In_ BOOLEAN RemoteAccess,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion, _In_opt_ PVOID RequestContext);

/* Tokens (iWARP STags). Valid once registration / initialization completed. */
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MR)(_In_ NDK_MR *pNdkMr);
typedef UINT32 (*NDK_FN_GET_LOCAL_TOKEN_FROM_MR)(_In_ NDK_MR *pNdkMr);

typedef struct _NDK_MR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMr;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_REGISTER_MR NdkRegisterMr;
    NDK_FN_DEREGISTER_MR NdkDeregisterMr;
    NDK_FN_INITIALIZE_FAST_REGISTER_MR NdkInitializeFastRegisterMr;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MR NdkGetRemoteTokenFromMr;
    NDK_FN_GET_LOCAL_TOKEN_FROM_MR NdkGetLocalTokenFromMr;
} NDK_MR_DISPATCH;

struct _NDK_MR {
    NDK_OBJECT_HEADER Header;
    const NDK_MR_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Memory window */

typedef struct _NDK_MW NDK_MW;

/* Valid after an NdkBind on this window has returned. */
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MW)(_In_ NDK_MW *pNdkMw);

typedef struct _NDK_MW_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMw;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MW NdkGetRemoteTokenFromMw;
} NDK_MW_DISPATCH;

struct _NDK_MW {
    NDK_OBJECT_HEADER Header;
    const NDK_MW_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Shared receive queue */

typedef struct _NDK_SRQ NDK_SRQ;

/* STATUS_SUCCESS, STATUS_PENDING, STATUS_INVALID_PARAMETER (SrqDepth above MaxSrqDepth or below
 * the receives queued now), STATUS_INSUFFICIENT_RESOURCES. SrqDepth 0 keeps the depth;
 * NotifyThreshold > 0 (re)arms, and notifies at once when the queue is already below it. */
typedef NTSTATUS (*NDK_FN_MODIFY_SRQ)(_In_ NDK_SRQ *pNdkSrq, _In_ ULONG SrqDepth,
                                      _In_ ULONG NotifyThreshold,
                                      _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      _In_opt_ PVOID RequestContext);

/* STATUS_SUCCESS (a completion will be queued), STATUS_DATA_OVERRUN (more SGEs than the SRQ's
 * MaxReceiveRequestSge, or more than MaxTransferLength bytes), STATUS_NO_MORE_ENTRIES (SRQ
 * full), STATUS_INVALID_PARAMETER (NULL SGE array with nSge > 0). SGE tokens are checked when
 * a message lands: a bad one completes the receive with STATUS_ACCESS_VIOLATION. */
typedef NTSTATUS (*NDK_FN_SRQ_RECEIVE)(_In_ NDK_SRQ *pNdkSrq, _In_opt_ PVOID RequestContext,
                                       _In_reads_(nSge) const NDK_SGE *pSgl, _In_ ULONG nSge);

typedef struct _NDK_SRQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSrq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_MODIFY_SRQ NdkModifySrq;
    NDK_FN_SRQ_RECEIVE NdkSrqReceive;
} NDK_SRQ_DISPATCH;

struct _NDK_SRQ {
    NDK_OBJECT_HEADER Header;
    const NDK_SRQ_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Queue pair */

typedef struct _NDK_QP NDK_QP;

#define NDK_OP_FLAG_SILENT_SUCCESS             0x00000001
#define NDK_OP_FLAG_READ_FENCE                 0x00000002
#define NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT     0x00000004
#define NDK_OP_FLAG_ALLOW_REMOTE_READ          0x00000008
#define NDK_OP_FLAG_ALLOW_LOCAL_WRITE          0x00000010
#define NDK_OP_FLAG_ALLOW_REMOTE_WRITE         0x00000030 /* includes ALLOW_LOCAL_WRITE */
#define NDK_OP_FLAG_INLINE                     0x00000040
#define NDK_OP_FLAG_RDMA_READ_SINK             0x00000080
#define NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE 0x00000100 /* 1.2 */
#define NDK_OP_FLAG_DEFER                      0x00000200 /* 1.2 */

/* Start cancelling every request on both queues (each completes with STATUS_CANCELLED). */
typedef VOID (*NDK_FN_FLUSH)(_In_ NDK_QP *pNdkQp);

/* Initiator requests share these statuses: STATUS_SUCCESS (one completion follows, none with
 * SILENT_SUCCESS on success); STATUS_CONNECTION_INVALID (QP not connected);
 * STATUS_INVALID_PARAMETER (flag not valid for the request, NULL SGE array with nSge > 0);
 * STATUS_NO_MORE_ENTRIES (initiator queue full); STATUS_DATA_OVERRUN (more SGEs than the QP's
 * limit, more than MaxTransferLength bytes, or INLINE over the QP's InlineDataSize). */
typedef NTSTATUS (*NDK_FN_SEND)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                _In_reads_(nSge) const NDK_SGE *pSgl, _In_ ULONG nSge,
                                _In_ ULONG Flags);

/* STATUS_SUCCESS, STATUS_DATA_OVERRUN (more SGEs than the QP's MaxReceiveRequestSge, or more
 * than MaxTransferLength bytes), STATUS_NO_MORE_ENTRIES (receive queue full),
 * STATUS_INVALID_PARAMETER (the QP takes receives from an SRQ; NULL SGE array with nSge > 0).
 * Allowed before connect. */
typedef NTSTATUS (*NDK_FN_RECEIVE)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                   _In_reads_(nSge) const NDK_SGE *pSgl, _In_ ULONG nSge);

/* Initiator statuses, plus STATUS_ACCESS_VIOLATION (the MR's rights do not allow the window's). */
typedef NTSTATUS (*NDK_FN_BIND)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                _In_ NDK_MR *pMr, _In_ NDK_MW *pMw, _In_ PVOID VirtualAddress,
                                _In_ SIZE_T Length, _In_ ULONG Flags);

/* Initiator statuses, plus STATUS_ACCESS_VIOLATION (remote rights on an MR initialized without
 * remote access). */
typedef NTSTATUS (*NDK_FN_FAST_REGISTER)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                         _In_ NDK_MR *pMr, _In_ ULONG AdapterPageCount,
                                         _In_reads_(AdapterPageCount)
                                             const NDK_LOGICAL_ADDRESS *AdapterPageArray,
                                         _In_ ULONG FBO, _In_ SIZE_T Length,
                                         _In_ PVOID BaseVirtualAddress, _In_ ULONG Flags);

/* Initiator statuses. pNdkMrOrMw is a fast-register MR or a window. */
typedef NTSTATUS (*NDK_FN_INVALIDATE)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                      _In_ NDK_OBJECT_HEADER *pNdkMrOrMw, _In_ ULONG Flags);

/* Initiator statuses; the completion may carry STATUS_REMOTE_RESOURCES (read beyond the remote
 * region). RemoteAddress is in host byte order. */
typedef NTSTATUS (*NDK_FN_READ)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                _In_reads_(nSge) const NDK_SGE *pSgl, _In_ ULONG nSge,
                                _In_ UINT64 RemoteAddress, _In_ UINT32 RemoteToken,
                                _In_ ULONG Flags);

/* Initiator statuses. */
typedef NTSTATUS (*NDK_FN_WRITE)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                 _In_reads_(nSge) const NDK_SGE *pSgl, _In_ ULONG nSge,
                                 _In_ UINT64 RemoteAddress, _In_ UINT32 RemoteToken,
                                 _In_ ULONG Flags);

/* 1.2. Initiator statuses. Note Flags comes before RemoteToken. */
typedef NTSTATUS (*NDK_FN_SEND_AND_INVALIDATE)(_In_ NDK_QP *pNdkQp, _In_opt_ PVOID RequestContext,
                                               _In_reads_(nSge) const NDK_SGE *pSgl,
                                               _In_ ULONG nSge, _In_ ULONG Flags,
                                               _In_ UINT32 RemoteToken);

typedef struct _NDK_QP_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseQp;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_FLUSH NdkFlush;
    NDK_FN_SEND NdkSend;
    NDK_FN_RECEIVE NdkReceive;
    NDK_FN_BIND NdkBind;
    NDK_FN_FAST_REGISTER NdkFastRegister;
    NDK_FN_INVALIDATE NdkInvalidate;
    NDK_FN_READ NdkRead;
    NDK_FN_WRITE NdkWrite;
    NDK_FN_SEND_AND_INVALIDATE NdkSendAndInvalidate;
} NDK_QP_DISPATCH;

struct _NDK_QP {
    NDK_OBJECT_HEADER Header;
    const NDK_QP_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Protection domain */

typedef struct _NDK_PD NDK_PD;

/* Create statuses shared by every NdkCreateXxx: STATUS_SUCCESS (*ppObj set, no callback),
 * STATUS_PENDING (CreateCompletion delivers the object; softndk's creates never pend),
 * STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER (argument outside the
 * NDK_ADAPTER_INFO limits, NULL required argument, antecedent of the wrong type or adapter or
 * already closing), STATUS_INVALID_DEVICE_STATE (parent closing). */
typedef NTSTATUS (*NDK_FN_CREATE_MR)(_In_ NDK_PD *pNdkPd, _In_ BOOLEAN FastRegister,
                                     _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     _In_opt_ PVOID RequestContext, _Outptr_ NDK_MR **ppNdkMr);

typedef NTSTATUS (*NDK_FN_CREATE_MW)(_In_ NDK_PD *pNdkPd,
                                     _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     _In_opt_ PVOID RequestContext, _Outptr_ NDK_MW **ppNdkMw);

typedef NTSTATUS (*NDK_FN_CREATE_SRQ)(_In_ NDK_PD *pNdkPd, _In_ ULONG SrqDepth,
                                      _In_ ULONG MaxReceiveRequestSge, _In_ ULONG NotifyThreshold,
                                      _In_opt_ NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
                                      _In_opt_ PVOID SrqNotificationContext,
                                      _In_opt_ GROUP_AFFINITY *Affinity,
                                      _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                      _In_opt_ PVOID RequestContext, _Outptr_ NDK_SRQ **ppNdkSrq);

typedef NTSTATUS (*NDK_FN_CREATE_QP)(_In_ NDK_PD *pNdkPd, _In_ NDK_CQ *pReceiveCq,
                                     _In_ NDK_CQ *pInitiatorCq, _In_opt_ PVOID QPContext,
                                     _In_ ULONG ReceiveQueueDepth, _In_ ULONG InitiatorQueueDepth,
                                     _In_ ULONG MaxReceiveRequestSge,
                                     _In_ ULONG MaxInitiatorRequestSge, _In_ ULONG InlineDataSize,
                                     _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     _In_opt_ PVOID RequestContext, _Outptr_ NDK_QP **ppNdkQp);

typedef NTSTATUS (*NDK_FN_CREATE_QP_WITH_SRQ)(
    _In_ NDK_PD *pNdkPd, _In_ NDK_CQ *pReceiveCq, _In_ NDK_CQ *pInitiatorCq, _In_ NDK_SRQ *pSrq,
    _In_opt_ PVOID QPContext, _In_ ULONG InitiatorQueueDepth, _In_ ULONG MaxInitiatorRequestSge,
    _In_ ULONG InlineDataSize, _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext, _Outptr_ NDK_QP **ppNdkQp);

/* The PD's privileged token: local read and write of LAM logical addresses, never remote. */
typedef VOID (*NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN)(_In_ NDK_PD *pNdkPd,
                                                          _Out_ UINT32 *pToken);

typedef struct _NDK_PD_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkClosePd;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CREATE_MR NdkCreateMr;
    NDK_FN_CREATE_MW NdkCreateMw;
    NDK_FN_CREATE_SRQ NdkCreateSrq;
    NDK_FN_CREATE_QP NdkCreateQp;
    NDK_FN_CREATE_QP_WITH_SRQ NdkCreateQpWithSrq;
    NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN NdkGetPrivilegedMemoryRegionToken;
} NDK_PD_DISPATCH;

struct _NDK_PD {
    NDK_OBJECT_HEADER Header;
    const NDK_PD_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Shared endpoint */

typedef struct _NDK_SHARED_ENDPOINT NDK_SHARED_ENDPOINT;

/* Address getters (shared endpoint, connector, listener): STATUS_SUCCESS (*pAddressLength =
 * bytes written), STATUS_BUFFER_TOO_SMALL (*pAddressLength = bytes needed),
 * STATUS_INVALID_PARAMETER (wrong object, pAddressLength NULL), STATUS_INVALID_DEVICE_STATE (no
 * address yet: a listener not listening, a connector before NdkConnect or its connect event).
 * A connector's addresses stay readable after the connection ended. */
typedef NTSTATUS (*NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS)(
    _In_ NDK_SHARED_ENDPOINT *pNdkSharedEndpoint,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) struct sockaddr *pAddress,
    _Inout_ ULONG *pAddressLength);

typedef struct _NDK_SHARED_ENDPOINT_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSharedEndpoint;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS NdkGetLocalAddress;
} NDK_SHARED_ENDPOINT_DISPATCH;

struct _NDK_SHARED_ENDPOINT {
    NDK_OBJECT_HEADER Header;
    const NDK_SHARED_ENDPOINT_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Connector */

/* STATUS_PENDING: the completion says STATUS_SUCCESS once the peer accepted (then call
 * NdkCompleteConnect(Ex) or NdkReject), or why not: STATUS_CONNECTION_REFUSED (no listener,
 * listener paused or closing, peer rejected — NdkGetConnectionData then reads its reason),
 * STATUS_IO_TIMEOUT, STATUS_NETWORK_UNREACHABLE, STATUS_HOST_UNREACHABLE,
 * STATUS_ADDRESS_ALREADY_EXISTS, STATUS_CONNECTION_ABORTED (the peer's MPA Reply was malformed,
 * refused or cut short), STATUS_CANCELLED (connector closed), STATUS_UNSUCCESSFUL (other socket
 * error, logged). Inline: STATUS_INVALID_PARAMETER (NULL or wrong-type argument, bad destination
 * address), STATUS_INVALID_ADDRESS (source not an AF_INET/AF_INET6 address of this adapter),
 * STATUS_SHARING_VIOLATION, STATUS_TOO_MANY_ADDRESSES, STATUS_INVALID_BUFFER_SIZE (private data
 * > MaxCallerData), STATUS_CONNECTION_ACTIVE (QP bound to a connection), STATUS_INVALID_DEVICE_STATE
 * (connector used before, or QP failed earlier), STATUS_INSUFFICIENT_RESOURCES, and the socket
 * errors above when connect() fails at once. Never STATUS_SUCCESS inline. */
typedef NTSTATUS (*NDK_FN_CONNECT)(_In_ NDK_CONNECTOR *pNdkConnector, _In_ NDK_QP *pNdkQp,
                                   _In_reads_bytes_(SrcAddressLength)
                                       const struct sockaddr *pSrcAddress,
                                   _In_ ULONG SrcAddressLength,
                                   _In_reads_bytes_(DestAddressLength)
                                       const struct sockaddr *pDestAddress,
                                   _In_ ULONG DestAddressLength, _In_ ULONG InboundReadLimit,
                                   _In_ ULONG OutboundReadLimit,
                                   _In_reads_bytes_opt_(PrivateDataLength) const void *pPrivateData,
                                   _In_ ULONG PrivateDataLength,
                                   _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                   _In_opt_ PVOID RequestContext);

/* As NdkConnect, the local address coming from the shared endpoint. */
typedef NTSTATUS (*NDK_FN_CONNECT_WITH_SHARED_ENDPOINT)(
    _In_ NDK_CONNECTOR *pNdkConnector, _In_ NDK_QP *pNdkQp,
    _In_ NDK_SHARED_ENDPOINT *pNdkSharedEndpoint,
    _In_reads_bytes_(DestAddressLength) const struct sockaddr *pDestAddress,
    _In_ ULONG DestAddressLength, _In_ ULONG InboundReadLimit, _In_ ULONG OutboundReadLimit,
    _In_reads_bytes_opt_(PrivateDataLength) const void *pPrivateData, _In_ ULONG PrivateDataLength,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion, _In_opt_ PVOID RequestContext);

/* Third leg of the handshake (active side): sends the RTR and gives the socket to the QP.
 * Inline: STATUS_PENDING, STATUS_CONNECTION_INVALID (no completed NdkConnect to complete),
 * STATUS_CONNECTION_ABORTED (the peer gave up meanwhile), STATUS_INVALID_PARAMETER. Completion:
 * STATUS_SUCCESS, STATUS_CONNECTION_ABORTED, STATUS_CONNECTION_ACTIVE,
 * STATUS_INSUFFICIENT_RESOURCES, STATUS_CANCELLED (connector closed). */
typedef NTSTATUS (*NDK_FN_COMPLETE_CONNECT)(_In_ NDK_CONNECTOR *pNdkConnector,
                                            _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                            _In_opt_ PVOID DisconnectEventContext,
                                            _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                            _In_opt_ PVOID RequestContext);

/* Passive side. Inline: STATUS_PENDING (completes once established: the active side's RTR
 * arrived, or at once for a peer without peer-to-peer mode), STATUS_CONNECTION_ABORTED (peer
 * abandoned), STATUS_INVALID_BUFFER_SIZE (private data > MaxCalleeData),
 * STATUS_CONNECTION_ACTIVE (QP bound), STATUS_INVALID_DEVICE_STATE (not an incoming request
 * awaiting an answer, or QP failed earlier), STATUS_INVALID_PARAMETER. Completion:
 * STATUS_SUCCESS, STATUS_IO_TIMEOUT (peer never completed), STATUS_CONNECTION_ABORTED,
 * STATUS_CANCELLED (connector closed). */
typedef NTSTATUS (*NDK_FN_ACCEPT)(_In_ NDK_CONNECTOR *pNdkConnector, _In_ NDK_QP *pNdkQp,
                                  _In_ ULONG InboundReadLimit, _In_ ULONG OutboundReadLimit,
                                  _In_reads_bytes_opt_(PrivateDataLength) const void *pPrivateData,
                                  _In_ ULONG PrivateDataLength,
                                  _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                  _In_opt_ PVOID DisconnectEventContext,
                                  _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                  _In_opt_ PVOID RequestContext);

/* Synchronous. STATUS_SUCCESS, STATUS_CONNECTION_ABORTED (peer already abandoned),
 * STATUS_INVALID_BUFFER_SIZE (passive side: private data > MaxCalleeData),
 * STATUS_INVALID_DEVICE_STATE (nothing to reject), STATUS_INVALID_PARAMETER. */
typedef NTSTATUS (*NDK_FN_REJECT)(_In_ NDK_CONNECTOR *pNdkConnector,
                                  _In_reads_bytes_opt_(PrivateDataLength) const void *pPrivateData,
                                  _In_ ULONG PrivateDataLength);

/* Synchronous. STATUS_SUCCESS, STATUS_BUFFER_TOO_SMALL (*pPrivateDataLength = required size),
 * STATUS_INVALID_PARAMETER (pPrivateDataLength NULL, or NULL buffer with a non-zero length),
 * STATUS_INVALID_DEVICE_STATE (neither a completed Connect nor an incoming request). */
typedef NTSTATUS (*NDK_FN_GET_CONNECTION_DATA)(
    _In_ NDK_CONNECTOR *pNdkConnector, _Out_opt_ ULONG *pInboundReadLimit,
    _Out_opt_ ULONG *pOutboundReadLimit,
    _Out_writes_bytes_to_opt_(*pPrivateDataLength, *pPrivateDataLength) PVOID pPrivateData,
    _Inout_ ULONG *pPrivateDataLength);

typedef NTSTATUS (*NDK_FN_GET_LOCAL_ADDRESS)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) struct sockaddr *pAddress,
    _Inout_ ULONG *pAddressLength);

typedef NTSTATUS (*NDK_FN_GET_PEER_ADDRESS)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) struct sockaddr *pAddress,
    _Inout_ ULONG *pAddressLength);

/* Graceful disconnect: FIN after everything posted went out, complete when the peer's FIN
 * arrived. Inline: STATUS_PENDING, STATUS_SUCCESS (the connection is already down),
 * STATUS_CONNECTION_INVALID (never connected, or a disconnect is under way),
 * STATUS_INVALID_PARAMETER. Completion: STATUS_SUCCESS, STATUS_IO_TIMEOUT, or the status of an
 * abort that came first (STATUS_CONNECTION_RESET, STATUS_CONNECTION_ABORTED, ...),
 * STATUS_CANCELLED (connector closed). */
typedef NTSTATUS (*NDK_FN_DISCONNECT)(_In_ NDK_CONNECTOR *pNdkConnector,
                                      _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      _In_opt_ PVOID RequestContext);

/* Header-only in Windows' ndkpi.h (in no dispatch table). */
typedef NTSTATUS (*NDK_FN_DISCONNECT_EX)(_In_ NDK_CONNECTOR *pNdkConnector, _In_ BOOLEAN Abortive,
                                         _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                         _In_opt_ PVOID RequestContext);

/* 2.1: as NdkCompleteConnect / NdkAccept with the _EX disconnect callback. */
typedef NTSTATUS (*NDK_FN_COMPLETE_CONNECT_EX)(
    _In_ NDK_CONNECTOR *pNdkConnector, _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
    _In_opt_ PVOID DisconnectEventContext, _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef NTSTATUS (*NDK_FN_ACCEPT_EX)(_In_ NDK_CONNECTOR *pNdkConnector, _In_ NDK_QP *pNdkQp,
                                     _In_ ULONG InboundReadLimit, _In_ ULONG OutboundReadLimit,
                                     _In_reads_bytes_opt_(PrivateDataLength) const void *pPrivateData,
                                     _In_ ULONG PrivateDataLength,
                                     _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                                     _In_opt_ PVOID DisconnectEventContext,
                                     _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                     _In_opt_ PVOID RequestContext);

typedef struct _NDK_CONNECTOR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseConnector;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CONNECT NdkConnect;
    NDK_FN_CONNECT_WITH_SHARED_ENDPOINT NdkConnectWithSharedEndpoint;
    NDK_FN_COMPLETE_CONNECT NdkCompleteConnect;
    NDK_FN_ACCEPT NdkAccept;
    NDK_FN_REJECT NdkReject;
    NDK_FN_GET_CONNECTION_DATA NdkGetConnectionData;
    NDK_FN_GET_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_GET_PEER_ADDRESS NdkGetPeerAddress;
    NDK_FN_DISCONNECT NdkDisconnect;
    NDK_FN_COMPLETE_CONNECT_EX NdkCompleteConnectEx; /* 2.1 */
    NDK_FN_ACCEPT_EX NdkAcceptEx;                    /* 2.1 */
} NDK_CONNECTOR_DISPATCH;

struct _NDK_CONNECTOR {
    NDK_OBJECT_HEADER Header;
    const NDK_CONNECTOR_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Listener */

typedef struct _NDK_LISTENER NDK_LISTENER;

/* softndk listens inline (never STATUS_PENDING, the callback is never called):
 * STATUS_SUCCESS, STATUS_SHARING_VIOLATION (address:port in use), STATUS_INVALID_ADDRESS (not an
 * AF_INET/AF_INET6 address of this adapter), STATUS_TOO_MANY_ADDRESSES (port 0 and the ephemeral
 * range exhausted), STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_DEVICE_STATE (already
 * listening, or closed), STATUS_INVALID_PARAMETER. */
typedef NTSTATUS (*NDK_FN_LISTEN)(_In_ NDK_LISTENER *pNdkListener,
                                  _In_reads_bytes_(AddressLength) const struct sockaddr *pAddress,
                                  _In_ ULONG AddressLength,
                                  _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                  _In_opt_ PVOID RequestContext);

typedef NTSTATUS (*NDK_FN_GET_LISTENER_LOCAL_ADDRESS)(
    _In_ NDK_LISTENER *pNdkListener,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) struct sockaddr *pAddress,
    _Inout_ ULONG *pAddressLength);

/* Pause (TRUE) or resume (FALSE) connect events; while paused, requests are refused. */
typedef VOID (*NDK_FN_CONTROL_CONNECT_EVENTS)(_In_ NDK_LISTENER *pNdkListener, _In_ BOOLEAN Pause);

typedef struct _NDK_LISTENER_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseListener;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_LISTEN NdkListen;
    NDK_FN_GET_LISTENER_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_CONTROL_CONNECT_EVENTS NdkControlConnectEvents;
} NDK_LISTENER_DISPATCH;

struct _NDK_LISTENER {
    NDK_OBJECT_HEADER Header;
    const NDK_LISTENER_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* Adapter */

typedef struct _NDK_ADAPTER NDK_ADAPTER;

/* Blocking (PASSIVE). STATUS_SUCCESS, STATUS_BUFFER_TOO_SMALL (*pBufferSize = bytes needed),
 * STATUS_INVALID_PARAMETER (pBufferSize NULL). */
typedef NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _Out_writes_bytes_to_opt_(*pBufferSize, *pBufferSize) NDK_ADAPTER_INFO *pInfo,
    _Inout_ ULONG *pBufferSize);

/* Header-only in Windows' ndkpi.h (in no dispatch table). */
typedef NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO_EX)(
    _In_ NDK_ADAPTER *pNdkAdapter, _In_ NDK_VERSION Version,
    _Out_writes_bytes_to_opt_(*pBufferSize, *pBufferSize) NDK_ADAPTER_INFO *pInfo,
    _Inout_ ULONG *pBufferSize);

/* Create statuses (see NDK_FN_CREATE_MR); CqDepth 0 or > MaxCqDepth: STATUS_INVALID_PARAMETER. */
typedef NTSTATUS (*NDK_FN_CREATE_CQ)(_In_ NDK_ADAPTER *pNdkAdapter, _In_ ULONG CqDepth,
                                     _In_ NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification,
                                     _In_opt_ PVOID CqNotificationContext,
                                     _In_opt_ GROUP_AFFINITY *Affinity,
                                     _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     _In_opt_ PVOID RequestContext, _Outptr_ NDK_CQ **ppNdkCq);

typedef NTSTATUS (*NDK_FN_CREATE_PD)(_In_ NDK_ADAPTER *pNdkAdapter,
                                     _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     _In_opt_ PVOID RequestContext, _Outptr_ NDK_PD **ppNdkPd);

/* Create statuses, plus STATUS_SHARING_VIOLATION, STATUS_INVALID_ADDRESS,
 * STATUS_TOO_MANY_ADDRESSES as for NdkListen. */
typedef NTSTATUS (*NDK_FN_CREATE_SHARED_ENDPOINT)(
    _In_ NDK_ADAPTER *pNdkAdapter, _In_reads_bytes_(AddressLength) const struct sockaddr *pAddress,
    _In_ ULONG AddressLength, _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext, _Outptr_ NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint);

typedef NTSTATUS (*NDK_FN_CREATE_CONNECTOR)(_In_ NDK_ADAPTER *pNdkAdapter,
                                            _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                            _In_opt_ PVOID RequestContext,
                                            _Outptr_ NDK_CONNECTOR **ppNdkConnector);

typedef NTSTATUS (*NDK_FN_CREATE_LISTENER)(_In_ NDK_ADAPTER *pNdkAdapter,
                                           _In_ NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                                           _In_opt_ PVOID ConnectEventContext,
                                           _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
                                           _In_opt_ PVOID RequestContext,
                                           _Outptr_ NDK_LISTENER **ppNdkListener);

/* Map a virtually contiguous range to adapter logical pages. STATUS_SUCCESS, STATUS_PENDING,
 * STATUS_BUFFER_TOO_SMALL (*pLAMSize = bytes needed), STATUS_INVALID_PARAMETER (Length 0 or
 * beyond the MDL chain, chain not contiguous), STATUS_INSUFFICIENT_RESOURCES. */
typedef NTSTATUS (*NDK_FN_BUILD_LAM)(
    _In_ NDK_ADAPTER *pNdkAdapter, _In_ MDL *Mdl, _In_ SIZE_T Length,
    _In_opt_ NDK_FN_REQUEST_COMPLETION RequestCompletion, _In_opt_ PVOID RequestContext,
    _Out_writes_bytes_to_opt_(*pLAMSize, *pLAMSize) NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM,
    _Inout_ ULONG *pLAMSize, _Out_ ULONG *pFBO);

/* Synchronous. */
typedef VOID (*NDK_FN_RELEASE_LAM)(_In_ NDK_ADAPTER *pNdkAdapter,
                                   _In_ NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM);

/* No close slot: adapters are opened and closed with SoftNdkOpenAdapter/SoftNdkCloseAdapter. */
typedef struct _NDK_ADAPTER_DISPATCH {
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_QUERY_ADAPTER_INFO NdkQueryAdapterInfo;
    NDK_FN_CREATE_CQ NdkCreateCq;
    NDK_FN_CREATE_PD NdkCreatePd;
    NDK_FN_CREATE_SHARED_ENDPOINT NdkCreateSharedEndpoint;
    NDK_FN_CREATE_CONNECTOR NdkCreateConnector;
    NDK_FN_CREATE_LISTENER NdkCreateListener;
    NDK_FN_BUILD_LAM NdkBuildLAM;
    NDK_FN_RELEASE_LAM NdkReleaseLAM;
} NDK_ADAPTER_DISPATCH;

struct _NDK_ADAPTER {
    NDK_OBJECT_HEADER Header;
    const NDK_ADAPTER_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------------------------ */
/* x86-64 layout: identical to x64 Windows (docs/ndk-rules.md [ABI-1]). */
#if defined(__x86_64__) || defined(_M_X64)
#ifdef __cplusplus
#define SOFTNDK_LAYOUT(cond, what) static_assert(cond, what)
#else
#define SOFTNDK_LAYOUT(cond, what) _Static_assert(cond, what)
#endif
SOFTNDK_LAYOUT(sizeof(NDK_OBJECT_HEADER_RESERVED_BLOCK) == 0x20, "reserved block");
SOFTNDK_LAYOUT(sizeof(NDK_OBJECT_HEADER) == 0x28, "object header");
SOFTNDK_LAYOUT(offsetof(NDK_OBJECT_HEADER, ObjectType) == 0x04, "ObjectType");
SOFTNDK_LAYOUT(offsetof(NDK_OBJECT_HEADER, NdkReserved) == 0x08, "NdkReserved");
SOFTNDK_LAYOUT(sizeof(NDK_OBJECT_TYPE) == 4, "NDK_OBJECT_TYPE");
SOFTNDK_LAYOUT(sizeof(NDK_OPERATION_TYPE) == 4, "NDK_OPERATION_TYPE");
SOFTNDK_LAYOUT(sizeof(NDK_RESULT) == 0x18, "NDK_RESULT");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT, BytesTransferred) == 0x04, "BytesTransferred");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT, QPContext) == 0x08, "QPContext");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT, RequestContext) == 0x10, "RequestContext");
SOFTNDK_LAYOUT(sizeof(NDK_RESULT_EX) == 0x28, "NDK_RESULT_EX");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT_EX, Type) == 0x18, "Type");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT_EX, ProviderErrorCode) == 0x1C, "ProviderErrorCode");
SOFTNDK_LAYOUT(offsetof(NDK_RESULT_EX, TypeSpecificCompletionOutput) == 0x20, "TypeSpecific");
SOFTNDK_LAYOUT(sizeof(NDK_SGE) == 0x10, "NDK_SGE");
SOFTNDK_LAYOUT(offsetof(NDK_SGE, Length) == 0x08, "SGE Length");
SOFTNDK_LAYOUT(offsetof(NDK_SGE, MemoryRegionToken) == 0x0C, "SGE token");
SOFTNDK_LAYOUT(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageCount) == 0x08, "LAM count");
SOFTNDK_LAYOUT(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) == 0x10, "LAM pages");
SOFTNDK_LAYOUT(sizeof(NDK_EXTENSION_INTERFACE) == 0x08, "extension interface");
SOFTNDK_LAYOUT(sizeof(MDL) == 0x30, "MDL");
SOFTNDK_LAYOUT(sizeof(NDK_ADAPTER_DISPATCH) == 0x48, "adapter dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_ADAPTER_DISPATCH, NdkReleaseLAM) == 0x40, "NdkReleaseLAM");
SOFTNDK_LAYOUT(sizeof(NDK_PD_DISPATCH) == 0x40, "PD dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_PD_DISPATCH, NdkGetPrivilegedMemoryRegionToken) == 0x38, "priv token");
SOFTNDK_LAYOUT(sizeof(NDK_CQ_DISPATCH) == 0x38, "CQ dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_CQ_DISPATCH, NdkGetCqResultsEx) == 0x30, "NdkGetCqResultsEx");
SOFTNDK_LAYOUT(sizeof(NDK_MR_DISPATCH) == 0x38, "MR dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_MR_DISPATCH, NdkGetLocalTokenFromMr) == 0x30, "local token");
SOFTNDK_LAYOUT(sizeof(NDK_MW_DISPATCH) == 0x18, "MW dispatch");
SOFTNDK_LAYOUT(sizeof(NDK_SRQ_DISPATCH) == 0x20, "SRQ dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_SRQ_DISPATCH, NdkSrqReceive) == 0x18, "NdkSrqReceive");
SOFTNDK_LAYOUT(sizeof(NDK_QP_DISPATCH) == 0x58, "QP dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_QP_DISPATCH, NdkSend) == 0x18, "NdkSend");
SOFTNDK_LAYOUT(offsetof(NDK_QP_DISPATCH, NdkWrite) == 0x48, "NdkWrite");
SOFTNDK_LAYOUT(offsetof(NDK_QP_DISPATCH, NdkSendAndInvalidate) == 0x50, "NdkSendAndInvalidate");
SOFTNDK_LAYOUT(sizeof(NDK_SHARED_ENDPOINT_DISPATCH) == 0x18, "SE dispatch");
SOFTNDK_LAYOUT(sizeof(NDK_CONNECTOR_DISPATCH) == 0x68, "connector dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkDisconnect) == 0x50, "NdkDisconnect");
SOFTNDK_LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkCompleteConnectEx) == 0x58, "CompleteConnectEx");
SOFTNDK_LAYOUT(offsetof(NDK_CONNECTOR_DISPATCH, NdkAcceptEx) == 0x60, "NdkAcceptEx");
SOFTNDK_LAYOUT(sizeof(NDK_LISTENER_DISPATCH) == 0x28, "listener dispatch");
SOFTNDK_LAYOUT(offsetof(NDK_LISTENER_DISPATCH, NdkControlConnectEvents) == 0x20, "connect events");
SOFTNDK_LAYOUT(sizeof(NDK_ADAPTER) == 0x30 && offsetof(NDK_ADAPTER, Dispatch) == 0x28, "adapter");
SOFTNDK_LAYOUT(sizeof(NDK_PD) == 0x30 && sizeof(NDK_CQ) == 0x30 && sizeof(NDK_QP) == 0x30, "objs");
SOFTNDK_LAYOUT(sizeof(NDK_SRQ) == 0x30 && sizeof(NDK_MR) == 0x30 && sizeof(NDK_MW) == 0x30, "objs");
SOFTNDK_LAYOUT(sizeof(NDK_CONNECTOR) == 0x30 && sizeof(NDK_LISTENER) == 0x30, "objs");
SOFTNDK_LAYOUT(sizeof(NDK_SHARED_ENDPOINT) == 0x30, "shared endpoint");
#undef SOFTNDK_LAYOUT
#endif

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_NDKPI_H */
