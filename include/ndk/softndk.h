/*
 * softndk.h — what Windows gets from NDIS and a Linux library must add: opening and closing an
 * adapter, options, status names, counters. Every exported symbol of libsoftndk starts with "SoftNdk"
 * (consumer code commonly defines its own NdkOpenAdapter/NdkCloseAdapter wrappers).
 */
#ifndef SOFTNDK_SOFTNDK_H
#define SOFTNDK_SOFTNDK_H

#include "ndkpi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SOFTNDK_API __attribute__((visibility("default")))
#else
#define SOFTNDK_API
#endif

/* The NDKPI versions this library implements: major 1 up to 1.2, major 2 up to 2.1. */
#define SOFTNDK_NDK_VERSION_1_MAX_MINOR 2
#define SOFTNDK_NDK_VERSION_2_MAX_MINOR 1

/* Sentinel "not set" values are zero throughout: a zero-initialised SOFTNDK_OPTIONS (with Size
 * set) means "all defaults", and each default is taken from its SOFTNDK_* environment variable
 * when that is set. An explicit option always wins over the environment. */
typedef enum _SOFTNDK_CRC_POLICY {
    SoftNdkCrcDefault = 0,
    SoftNdkCrcOn = 1,  /* ask the peer for CRC32c on every FPDU */
    SoftNdkCrcOff = 2, /* do not ask; still honour a peer that requires it */
} SOFTNDK_CRC_POLICY;

/* Source check (docs/qp.md): after the bytes of each FPDU built from consumer memory are in
 * TCP, checksum that memory again and compare with the checksum taken when the FPDU was built.
 * A difference means the consumer changed a Send/Write source (or an RDMA Read source) between
 * posting and the completion: counted in SourceModified, logged at error level and traced.
 * Costs one CRC32c pass per byte sent. */
typedef enum _SOFTNDK_SOURCE_CHECK {
    SoftNdkSourceCheckDefault = 0,
    SoftNdkSourceCheckOn = 1,
    SoftNdkSourceCheckOff = 2,
} SOFTNDK_SOURCE_CHECK;

/* The consumer verifier (docs/verifier.md): checks the NDKPI rules a consumer must keep that
 * softndk can observe, and reports each violation once per object and rule (log, trace event
 * verify.<rule>, SOFTNDK_COUNTERS.VerifyViolations, ndkstat, a summary at adapter close).
 * Strict makes a violation fatal (abort after the report), as Driver Verifier's bugcheck. */
typedef enum _SOFTNDK_VERIFY_MODE {
    SoftNdkVerifyDefault = 0, /* SOFTNDK_VERIFY=off|warn|strict, else off */
    SoftNdkVerifyOff = 1,
    SoftNdkVerifyWarn = 2,
    SoftNdkVerifyStrict = 3,
} SOFTNDK_VERIFY_MODE;

/* Index of a rule in SOFTNDK_COUNTERS.VerifyViolations (docs/verifier.md has the table). */
typedef enum _SOFTNDK_VERIFY_RULE {
    SoftNdkVerifyConnDataLate = 0,          /* CONN-6 */
    SoftNdkVerifyConnectorState = 1,        /* CONN-3, CONN-13, DISC-5 */
    SoftNdkVerifyPostNotConnected = 2,      /* POST-5 */
    SoftNdkVerifyDisconnectOutstanding = 3, /* DISC-6 */
    SoftNdkVerifyNoReceivePosted = 4,       /* early Send */
    SoftNdkVerifyStaleToken = 5,            /* MEM-3, MEM-6 */
    SoftNdkVerifyFastRegisterValid = 6,     /* MEM-6, MEM-7 */
    SoftNdkVerifyCqConcurrent = 7,          /* CQ-3 */
    SoftNdkVerifySourceModified = 8,        /* POST-7 */
    SoftNdkVerifyCallbackSlow = 9,          /* ASYNC-3 */
    SoftNdkVerifyCallbackCall = 10,         /* CLOSE-9, ASYNC-1: a call callbacks may not make */
    SoftNdkVerifyHandleInvalid = 11,        /* OBJ-6, LIFE-1: not a live object of this adapter */
    SoftNdkVerifyUseAfterClose = 12,        /* CLOSE-2 */
    SoftNdkVerifyPostConcurrent = 13,       /* POST-2: two posts on one queue of a QP */
    SoftNdkVerifySrqConcurrent = 14,        /* SRQ-7: two NdkSrqReceive on one SRQ */
    SoftNdkVerifyCloseDuringPost = 15,      /* CLOSE-3: a QP/SRQ closed while a post on it runs */
    SoftNdkVerifyRuleCount = 16,
} SOFTNDK_VERIFY_RULE;
#define SOFTNDK_VERIFY_RULE_SLOTS 16 /* VerifyViolations has room for rules to come */

typedef enum _SOFTNDK_LOG_LEVEL {
    SoftNdkLogDefault = 0,
    SoftNdkLogError = 1,
    SoftNdkLogWarn = 2,
    SoftNdkLogInfo = 3,
    SoftNdkLogDebug = 4,
} SOFTNDK_LOG_LEVEL;

/* When an RDMA Write completes (docs/qp.md, "Write completion"). */
typedef enum _SOFTNDK_WRITE_COMPLETION {
    SoftNdkWriteCompletionDefault = 0, /* SOFTNDK_WRITE_COMPLETION, else the profile's */
    SoftNdkWriteCompletionHanded = 1,  /* when its bytes are in TCP: the source may be reused
                                          (iWARP: nothing more is known) */
    SoftNdkWriteCompletionPlaced = 2,  /* when the peer has placed it: a zero-length RDMA Read
                                          behind it came back (RoCE: after the remote ACK) */
} SOFTNDK_WRITE_COMPLETION;

/* The byte stream under a connection (docs/transport-shm.md). */
typedef enum _SOFTNDK_TRANSPORT {
    SoftNdkTransportDefault = 0, /* SOFTNDK_TRANSPORT, else tcp */
    SoftNdkTransportTcp = 1,     /* TCP always */
    SoftNdkTransportShm = 2,     /* shared memory to a same-host, same-user softndk peer; TCP
                                    (and a log line) when the peer is remote or not there */
    SoftNdkTransportAuto = 3,    /* shared memory when the peer is reachable so, else TCP
                                    silently */
} SOFTNDK_TRANSPORT;

/* Spin option value for "never spin before blocking". */
#define SOFTNDK_SPIN_NONE 0xFFFFFFFFu

typedef struct _SOFTNDK_OPTIONS {
    ULONG Size;                /* sizeof(SOFTNDK_OPTIONS): the struct grows at the tail only */
    ULONG MpaRevision;         /* 0 = default (SOFTNDK_MPA_REV, else 2); 1 or 2 */
    SOFTNDK_CRC_POLICY Crc;    /* SOFTNDK_CRC, else on (over the same-host transport, else
                                  off: docs/transport-shm.md) */
    USHORT EphemeralPortLow;   /* ND ports that port 0 draws from; both 0 = default */
    USHORT EphemeralPortHigh;  /* (SOFTNDK_EPHEMERAL_PORTS, else 49152-65535) */
    ULONG ProgressThreads;     /* 0 = default (SOFTNDK_THREADS, else 1); at most 64 */
    ULONG SpinMicroseconds;    /* 0 = default (SOFTNDK_SPIN_US, else 50); SOFTNDK_SPIN_NONE */
    SOFTNDK_LOG_LEVEL LogLevel;/* SOFTNDK_LOG, else warn; logs go to stderr */
    const char *Limits;        /* NULL = default (SOFTNDK_LIMITS): "Name=value,..." over
                                  NDK_ADAPTER_INFO fields, each at most softndk's own maximum */
    ULONG ConnectTimeoutMs;    /* 0 = default (SOFTNDK_CONNECT_TIMEOUT_MS, else 10000): TCP
                                  connect + MPA exchange + RTR; then STATUS_IO_TIMEOUT */
    ULONG DisconnectTimeoutMs; /* 0 = default (SOFTNDK_DISCONNECT_TIMEOUT_MS, else 10000): how
                                  long NdkDisconnect waits for the peer's FIN */
    /* ---- observability (docs/observability.md); a Size that ends above is accepted and
     * means "all three from the environment" ---- */
    const char *StatEndpoint;  /* NULL = default (SOFTNDK_STAT, else off): "on" (a socket in
                                  $XDG_RUNTIME_DIR/softndk or /tmp/softndk-UID), "off", or the
                                  socket's path; the control endpoint ndkstat reads */
    const char *TraceFile;     /* NULL = default (SOFTNDK_TRACE, else none): JSON-lines event
                                  log, appended; "" = none. Shared by the process's adapters */
    const char *PcapFile;      /* NULL = default (SOFTNDK_PCAP, else none): pcap of every
                                  connection's bytes, both directions; "" = none */
    ULONG PeerTimeoutMs;       /* 0 = default (SOFTNDK_PEER_TIMEOUT_MS, else 30000): a connected
                                  peer that acknowledges nothing for this long (TCP keep-alive
                                  and user timeout) is declared gone: the QP aborts, every
                                  request completes, the disconnect event fires */
    /* ---- fault injection (docs/faults.md) ---- */
    const char *Faults;        /* NULL = default (SOFTNDK_FAULTS, else none): "rule;rule;...",
                                  e.g. "seed=7;drop:dir=tx,after_fpdus=100;fail:call=cq";
                                  "" = none. Every fault that fires counts in InjectedFaults */
    /* ---- consumer checks ---- */
    SOFTNDK_SOURCE_CHECK SourceCheck; /* default: SOFTNDK_SOURCE_CHECK (on/off), else off */
    /* ---- the door (docs/listener.md, "Handshake limits") ---- */
    ULONG HandshakeLimit;        /* 0 = default (SOFTNDK_HANDSHAKE_LIMIT, else 256): connections a
                                    listener holds while their MPA Request is still coming (at
                                    most an eighth of the fd limit); more evict the oldest */
    ULONG HandshakePerPeerLimit; /* 0 = default (SOFTNDK_HANDSHAKE_PER_PEER, else 64): the same
                                    per peer IP address; more evict that peer's oldest */
    ULONG RequestTimeoutMs;      /* 0 = default (SOFTNDK_REQUEST_TIMEOUT_MS, else 2000): how long
                                    an accepted TCP connection may take to deliver its MPA
                                    Request (ConnectTimeoutMs bounds the rest of the handshake) */
    /* ---- the consumer verifier (docs/verifier.md) ---- */
    SOFTNDK_VERIFY_MODE Verify; /* default: SOFTNDK_VERIFY (off, warn, strict), else off */
    /* ---- adapter families (docs/adapter.md, "Profiles") ---- */
    const char *Profile; /* NULL = default (SOFTNDK_PROFILE, else "iwarp"): a named set of
                            semantics and limits ("iwarp", "roce", "intel-e810",
                            docs/adapter.md); an explicit option or
                            variable (Limits, RnrWaitMs, WriteCompletion) overrides
                            what it sets */
    ULONG RnrWaitMs;     /* 0 = default (SOFTNDK_RNR_WAIT_MS, else the profile's: 0 for
                            iwarp): how long a Send that finds no receive posted waits
                            for one (RoCE/IB receiver-not-ready retry) before the
                            connection is terminated; SOFTNDK_RNR_WAIT_OFF = no wait */
    SOFTNDK_WRITE_COMPLETION WriteCompletion; /* default: SOFTNDK_WRITE_COMPLETION (handed,
                                                 placed), else the profile's (handed for
                                                 iwarp, placed for roce) */
    /* ---- same-host transport (docs/transport-shm.md) ---- */
    SOFTNDK_TRANSPORT Transport; /* default: SOFTNDK_TRANSPORT (tcp, shm, auto), else tcp */
} SOFTNDK_OPTIONS;

/* RnrWaitMs value for "no receiver-not-ready wait" (the iWARP Terminate at once). */
#define SOFTNDK_RNR_WAIT_OFF 0xFFFFFFFFu

/* The size of the first published SOFTNDK_OPTIONS (ending at DisconnectTimeoutMs), still
 * accepted in Size. */
#define SOFTNDK_OPTIONS_SIZE_V1 (offsetof(SOFTNDK_OPTIONS, DisconnectTimeoutMs) + sizeof(ULONG))
/* The second layout (ending at PeerTimeoutMs, padded), still accepted: Faults from the
 * environment. */
#define SOFTNDK_OPTIONS_SIZE_V2 offsetof(SOFTNDK_OPTIONS, Faults)
/* The third layout (ending at Faults): SourceCheck from the environment. */
#define SOFTNDK_OPTIONS_SIZE_V3 offsetof(SOFTNDK_OPTIONS, SourceCheck)
/* The fourth layout (ending at SourceCheck): the handshake limits from the environment. */
#define SOFTNDK_OPTIONS_SIZE_V4 offsetof(SOFTNDK_OPTIONS, HandshakeLimit)
/* The fifth layout (ending at RequestTimeoutMs): Verify from the environment. */
#define SOFTNDK_OPTIONS_SIZE_V5 offsetof(SOFTNDK_OPTIONS, Verify)
/* The sixth layout (ending at Verify): Profile and RnrWaitMs from the environment. */
#define SOFTNDK_OPTIONS_SIZE_V6 offsetof(SOFTNDK_OPTIONS, Profile)
/* The seventh layout (ending at WriteCompletion): Transport from the environment. */
#define SOFTNDK_OPTIONS_SIZE_V7 offsetof(SOFTNDK_OPTIONS, Transport)

/* Fill *Options with "all defaults" (Size set, everything else zero). */
SOFTNDK_API VOID SoftNdkInitOptions(SOFTNDK_OPTIONS *Options);

/*
 * Open an NDK adapter on network interface IfIndex (as from if_nametoindex; 0 = every local
 * address). Version is the NDKPI version the consumer was written for: Major 1 or 2 and the
 * lowest Minor it accepts; the adapter runs at the highest minor of that major and reports it in
 * NDK_ADAPTER_INFO.Version and every object header. Options may be NULL for the defaults.
 * Blocking (PASSIVE). Returns:
 *   STATUS_SUCCESS                 *ppNdkAdapter is the adapter;
 *   NDIS_STATUS_BAD_VERSION        Major not 1 or 2, or Minor above what that major offers;
 *   STATUS_NOT_FOUND               no network interface has index IfIndex;
 *   STATUS_INVALID_PARAMETER       ppNdkAdapter NULL, Options->Size unknown, or a malformed
 *                                  option or SOFTNDK_* variable (logged with its name);
 *   STATUS_INSUFFICIENT_RESOURCES  memory or threads could not be had.
 */
SOFTNDK_API NTSTATUS SoftNdkOpenAdapter(ULONG IfIndex, NDK_VERSION Version,
                                        const SOFTNDK_OPTIONS *Options,
                                        NDK_ADAPTER **ppNdkAdapter);

/* Close an adapter. Blocks until every object below it is closed (by the consumer) and every
 * callback on any of them has returned; then stops its threads. Must not be called from inside
 * a callback. Logs the objects still open every 10 s while it waits. */
SOFTNDK_API VOID SoftNdkCloseAdapter(NDK_ADAPTER *pNdkAdapter);

/* "STATUS_CONNECTION_INVALID" for a known status, "STATUS_0xC0001234" (a static buffer per
 * thread) for another; never NULL. */
SOFTNDK_API const char *SoftNdkStatusName(NTSTATUS Status);

/*
 * Counters of an adapter: NDIS_NDK_PERFORMANCE_COUNTERS by name (what perfmon shows as "RDMA
 * Activity") plus iWARP ones. Totals since the adapter opened, over every connection it ever
 * had, live ones included. A versioned struct: set Size = sizeof(SOFTNDK_COUNTERS) (or the size
 * of an older layout); fields beyond Size are not written, Size is set to what was filled.
 * Octets and frames count FPDUs (MPA framing, DDP/RDMAP headers, pad and CRC included) of
 * established connections, the RTR included; the MPA Request/Reply are in Handshake*Octets.
 * Non-blocking, any thread; each field is read atomically, the set is not a snapshot.
 *   STATUS_SUCCESS, or STATUS_INVALID_PARAMETER (not an adapter, NULL, Size too small).
 */
#define SOFTNDK_COUNTERS_TERM_SLOTS 16

typedef struct _SOFTNDK_TERM_COUNT {
    ULONG Code;     /* 0x00LLTTCC: layer (0 RDMAP, 1 DDP, 2 MPA), error type, error code */
    ULONG Reserved;
    ULONG64 Count;
} SOFTNDK_TERM_COUNT;

typedef struct _SOFTNDK_COUNTERS {
    ULONG Size;                /* in: sizeof(SOFTNDK_COUNTERS); out: bytes filled */
    ULONG Reserved;
    /* NDIS_NDK_PERFORMANCE_COUNTERS */
    ULONG64 Connect;           /* outbound connections established (NdkConnect completed) */
    ULONG64 Accept;            /* inbound connections established (NdkAccept completed) */
    ULONG64 ConnectFailure;    /* connection attempts that failed: refused, rejected, timed
                                  out, a bad MPA frame (either side) */
    ULONG64 ConnectionError;   /* established connections that ended in error (Terminate
                                  either way, reset); not the consumer's own flush/close */
    ULONG64 ActiveConnection;  /* connections established now */
    ULONG64 CQError;           /* CQ overruns */
    ULONG64 RDMAInOctets;
    ULONG64 RDMAOutOctets;
    ULONG64 RDMAInFrames;      /* FPDUs */
    ULONG64 RDMAOutFrames;
    /* iWARP */
    ULONG64 CrcErrors;         /* FPDUs received with a bad CRC32c */
    ULONG64 TerminatesSent[3]; /* by layer: [0] RDMAP, [1] DDP, [2] MPA */
    ULONG64 TerminatesReceived[3];
    ULONG64 FlushedRequests;   /* requests completed with STATUS_CANCELLED by a flush/abort */
    ULONG64 InjectedFaults;    /* faults injected (docs/faults.md) */
    ULONG64 HandshakeInOctets; /* MPA Request/Reply bytes */
    ULONG64 HandshakeOutOctets;
    ULONG64 MpaRejectsSent;
    ULONG64 MpaRejectsReceived;
    ULONG64 HandshakeTimeouts;
    /* The first SOFTNDK_COUNTERS_TERM_SLOTS distinct Terminates by layer/type/code, with
     * counts (Count 0: unused slot). */
    SOFTNDK_TERM_COUNT TerminateSentCodes[SOFTNDK_COUNTERS_TERM_SLOTS];
    SOFTNDK_TERM_COUNT TerminateReceivedCodes[SOFTNDK_COUNTERS_TERM_SLOTS];
    ULONG64 SourceModified;    /* FPDUs whose consumer source changed before its completion
                                  (only counted with SourceCheck on) */
    /* The door (docs/listener.md, "Handshake limits") */
    ULONG64 HandshakesEvicted;  /* accepted connections closed (reset) before their MPA Request
                                   arrived, to make room under HandshakeLimit / PerPeerLimit or
                                   at the fd limit */
    ULONG64 HandshakesRefused;  /* TCP connections accepted and reset at once: no fd was left
                                   (EMFILE / ENFILE) and none could be freed */
    ULONG64 HandshakesPending;  /* now: accepted connections whose MPA Request is still coming */
    ULONG64 IncomingUnanswered; /* now: connect events delivered, neither accepted, rejected
                                   nor closed yet */
    ULONG64 ResponderHeld;      /* accepted connections without an RTR whose first FPDUs waited
                                   for the Initiator's first (RFC 5044: the Responder must not
                                   send first) */
    /* The consumer verifier (docs/verifier.md): violations reported, by SOFTNDK_VERIFY_RULE
     * (each object counts once per rule); all 0 with the verifier off */
    ULONG64 VerifyViolations[SOFTNDK_VERIFY_RULE_SLOTS];
    /* Receiver not ready (RnrWaitMs, docs/datapath.md) */
    ULONG64 RnrWaits;    /* Sends that found no receive posted and waited for one */
    ULONG64 RnrTimeouts; /* of those, the waits that expired: the connection was terminated
                            (DDP untagged, no buffer) */
    ULONG64 FenceReads;  /* WriteCompletion placed: zero-length Reads sent behind Writes to
                            learn they are placed (a consumer Read behind them needs none) */
    /* What the peers did to this adapter's memory (an SMB Direct server's RDMA, say) */
    ULONG64 InboundWrites;       /* RDMA Write messages placed (counted at their last FPDU) */
    ULONG64 InboundReadRequests; /* RDMA Read Requests accepted for a response */
    ULONG64 RemoteInvalidations; /* tokens invalidated by a received Send with Invalidate */
    /* Connection setup (docs/connector.md) */
    ULONG64 SetupsAbandoned; /* connections whose peer reset or closed while they waited for the
                                consumer (NdkAccept / NdkReject after the connect event,
                                NdkCompleteConnect after NdkConnect completed) */
    ULONG64 LogLinesSuppressed; /* log lines a peer could repeat at will (a bad MPA frame, a
                                   failed handshake, ...) left out by their limit of one line a
                                   second per kind (docs/observability.md, "Logs") */
    /* The same-host transport (docs/transport-shm.md): of the connections and octets above,
     * those carried by shared memory rather than TCP */
    ULONG64 SameHostConnections; /* connections established over shared memory */
    ULONG64 SameHostInOctets;    /* RDMAInOctets of those connections */
    ULONG64 SameHostOutOctets;   /* RDMAOutOctets of those connections */
} SOFTNDK_COUNTERS;

SOFTNDK_API NTSTATUS SoftNdkQueryCounters(NDK_ADAPTER *pNdkAdapter, SOFTNDK_COUNTERS *Counters);

/* The adapter family an adapter behaves as (docs/adapter.md, "Profiles"): its profile and the
 * semantics it resolved to. Size as in SOFTNDK_COUNTERS (in: the caller's size; out: filled).
 *   STATUS_SUCCESS, or STATUS_INVALID_PARAMETER (not an adapter, NULL, Size too small). */
typedef struct _SOFTNDK_SEMANTICS {
    ULONG Size;          /* in: sizeof(SOFTNDK_SEMANTICS); out: bytes filled */
    ULONG RnrWaitMs;     /* receiver-not-ready wait of a Send without a receive; 0 = none */
    SOFTNDK_WRITE_COMPLETION WriteCompletion; /* Handed or Placed (never Default) */
    const char *Profile; /* "iwarp", "roce", ...: static, valid for the library's life */
    const char *Family;  /* what the profile stands for, e.g. "Intel E810 iWARP (...)" */
    /* The CRC32c kernel the process uses ("avx512", "hybrid256", "vpclmul256", "hybrid128",
     * "pclmul", "sse42" or "table") and why ("forced by SOFTNDK_CRC_KERNEL", or each
     * candidate's measured GB/s): static. */
    const char *CrcKernel;
    const char *CrcKernelReason;
    /* How the process takes a same-host peer's large RDMA Write and Read payloads
     * (docs/transport-shm.md, "One copy"): "one" (straight from the peer's memory) or "staged"
     * (through the shared ring), and why ("forced by SOFTNDK_SHM_COPY", each copy's measured
     * GB/s, or cross-memory attach refused): static. */
    const char *SameHostCopy;
    const char *SameHostCopyReason;
} SOFTNDK_SEMANTICS;

SOFTNDK_API NTSTATUS SoftNdkQuerySemantics(NDK_ADAPTER *pNdkAdapter, SOFTNDK_SEMANTICS *Semantics);

/* Version of this library ("0.1.0"). */
SOFTNDK_API const char *SoftNdkVersionString(void);

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_SOFTNDK_H */
