/*
 * ndkinfo.h — NDK version and adapter information (shared with user mode on Windows).
 * Also holds the Windows base types NDKPI is written in, with LP64-correct widths.
 */
#ifndef SOFTNDK_NDKINFO_H
#define SOFTNDK_NDKINFO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Windows base types. ULONG is 32 bits (Windows is LLP64): never `unsigned long` here.
 * A kernel-consumer harness that already defines them sets SOFTNDK_NT_TYPES_DEFINED. */
#ifndef SOFTNDK_NT_TYPES_DEFINED
#define SOFTNDK_NT_TYPES_DEFINED
typedef int32_t NTSTATUS;
typedef uint32_t ULONG;
typedef int32_t LONG;
typedef uint16_t USHORT;
typedef uint8_t UCHAR;
typedef uint8_t BOOLEAN;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uint64_t ULONG64;
typedef size_t SIZE_T;
typedef uintptr_t ULONG_PTR;
typedef uintptr_t KAFFINITY;
typedef void *PVOID;
#ifndef VOID
#define VOID void
#endif
#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
#ifndef MAXULONG
#define MAXULONG 0xFFFFFFFFu
#endif

typedef struct _GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} GUID;

/* The anonymous member is standard C11; C++ knows it only as an extension. */
#if defined(__cplusplus) && defined(__GNUC__)
#define SOFTNDK_ANON_STRUCT __extension__ struct
#else
#define SOFTNDK_ANON_STRUCT struct
#endif
typedef union _LARGE_INTEGER {
    SOFTNDK_ANON_STRUCT {
        uint32_t LowPart;
        int32_t HighPart;
    };
    struct {
        uint32_t LowPart;
        int32_t HighPart;
    } u;
    int64_t QuadPart;
} LARGE_INTEGER, PHYSICAL_ADDRESS;

typedef struct _GROUP_AFFINITY {
    KAFFINITY Mask;
    USHORT Group;
    USHORT Reserved[3];
} GROUP_AFFINITY;
#endif /* SOFTNDK_NT_TYPES_DEFINED */

/* NDKPI version: Major.Minor. Passed by value. */
typedef struct {
    USHORT Major;
    USHORT Minor;
} NDK_VERSION;

typedef enum _NDK_RDMA_TECHNOLOGY {
    NdkUndefined = 0,
    NdkiWarp = 1,
    NdkInfiniBand = 2,
    NdkRoCE = 3,
    NdkRoCEv2 = 4,
    NdkMaxTechnology = 5
} NDK_RDMA_TECHNOLOGY;

/* Placed in order: the last byte of a buffer is never written before earlier bytes. */
#define NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED 0x00000001
/* No special rights needed for RDMA Read sinks; LAM + privileged token usable as sinks. */
#define NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED 0x00000002
#define NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED 0x00000004
#define NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED 0x00000008
#define NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED 0x00000010 /* 1.2 */
#define NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED 0x00000100
#define NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED 0x00010000

typedef struct _NDK_ADAPTER_INFO {
    NDK_VERSION Version; /* the version the adapter runs at */
    UINT32 VendorId;     /* IEEE OUI */
    UINT32 DeviceId;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    ULONG FRMRPageCount; /* >= 16 */
    ULONG MaxInitiatorRequestSge;
    ULONG MaxReceiveRequestSge;
    ULONG MaxReadRequestSge; /* overrides MaxInitiatorRequestSge for reads */
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSrqDepth; /* 0 = no SRQ */
    ULONG MaxCqDepth;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData;
    ULONG MaxCalleeData;
    ULONG AdapterFlags; /* NDK_ADAPTER_FLAG_* */
    NDK_RDMA_TECHNOLOGY RdmaTechnology;
} NDK_ADAPTER_INFO;

#if defined(__x86_64__) || defined(_M_X64)
#ifdef __cplusplus
#define SOFTNDK_INFO_LAYOUT(cond, what) static_assert(cond, what)
#else
#define SOFTNDK_INFO_LAYOUT(cond, what) _Static_assert(cond, what)
#endif
SOFTNDK_INFO_LAYOUT(sizeof(NDK_VERSION) == 4, "NDK_VERSION");
SOFTNDK_INFO_LAYOUT(sizeof(GUID) == 16, "GUID");
SOFTNDK_INFO_LAYOUT(sizeof(PHYSICAL_ADDRESS) == 8, "PHYSICAL_ADDRESS");
SOFTNDK_INFO_LAYOUT(sizeof(GROUP_AFFINITY) == 16, "GROUP_AFFINITY");
SOFTNDK_INFO_LAYOUT(sizeof(NDK_RDMA_TECHNOLOGY) == 4, "NDK_RDMA_TECHNOLOGY");
SOFTNDK_INFO_LAYOUT(sizeof(NDK_ADAPTER_INFO) == 0x68, "NDK_ADAPTER_INFO");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, VendorId) == 0x04, "VendorId");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, MaxRegistrationSize) == 0x10, "MaxRegistrationSize");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, FRMRPageCount) == 0x20, "FRMRPageCount");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, MaxTransferLength) == 0x30, "MaxTransferLength");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, MaxInboundReadLimit) == 0x38, "MaxInboundReadLimit");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, MaxSrqDepth) == 0x48, "MaxSrqDepth");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, MaxCallerData) == 0x54, "MaxCallerData");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, AdapterFlags) == 0x5C, "AdapterFlags");
SOFTNDK_INFO_LAYOUT(offsetof(NDK_ADAPTER_INFO, RdmaTechnology) == 0x60, "RdmaTechnology");
#undef SOFTNDK_INFO_LAYOUT
#endif

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_NDKINFO_H */
