/* Resolved adapter configuration: explicit SOFTNDK_OPTIONS, else SOFTNDK_* environment
 * variables, else built-in defaults. Every value is validated; a malformed one is an error
 * naming the option, never silently ignored. */
#ifndef SOFTNDK_CONFIG_OPTIONS_H
#define SOFTNDK_CONFIG_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/softndk.h>

#define SNDK_MAX_PROGRESS_THREADS 64
#define SNDK_DEFAULT_SPIN_US      50
#define SNDK_DEFAULT_TIMEOUT_MS   10000
#define SNDK_DEFAULT_PEER_TIMEOUT_MS 30000
#define SNDK_DEFAULT_REQUEST_TIMEOUT_MS 2000
#define SNDK_DEFAULT_HANDSHAKE_LIMIT    256
#define SNDK_DEFAULT_HANDSHAKE_PER_PEER 64
#define SNDK_MAX_HANDSHAKE_LIMIT        65536
#define SNDK_MAX_TIMEOUT_MS       3600000
#define SNDK_OBS_PATH_MAX         512
#define SNDK_DEFAULT_VERIFY_CALLBACK_MS 5
#define SNDK_MAX_VERIFY_CALLBACK_MS     60000

struct sndk_faults;

struct sndk_config {
    unsigned mpa_revision; /* 1 or 2 */
    bool crc;              /* ask for CRC */
    /* crc came from Crc or SOFTNDK_CRC, not the default: only then does a connection over the
     * same-host transport ask for CRC (docs/decisions.md) */
    bool crc_explicit;
    bool source_check;     /* SourceCheck: re-checksum consumer sources after sending */
    SOFTNDK_VERIFY_MODE verify; /* Off, Warn or Strict (never Default): docs/verifier.md */
    unsigned profile;           /* index of the profile (sndk_config_profile_name); 0 = iwarp */
    unsigned write_completion;  /* SOFTNDK_WRITE_COMPLETION: Handed or Placed */
    unsigned rnr_wait_ms;       /* receiver not ready: how long a Send waits for a receive; 0 = it
                                   does not (the iWARP Terminate at once) */
    unsigned transport;         /* SOFTNDK_TRANSPORT: Tcp, Shm or Auto (never Default) */
    unsigned verify_callback_ms; /* SOFTNDK_VERIFY_CALLBACK_MS: a longer callback is reported */
    uint16_t port_low, port_high;
    unsigned threads;
    unsigned spin_us;
    unsigned progress_cpu; /* SOFTNDK_PROGRESS_CPU: SNDK_PROGRESS_CPU_FOLLOW or _ANY */
    SOFTNDK_LOG_LEVEL log_level;
    unsigned connect_timeout_ms;
    unsigned disconnect_timeout_ms;
    unsigned peer_timeout_ms; /* keep-alive + TCP_USER_TIMEOUT on connected sockets */
    unsigned request_timeout_ms; /* passive: the MPA Request must arrive within this */
    unsigned handshake_limit;    /* per listener: connections waiting for their Request */
    unsigned handshake_per_peer; /* ... of them from one peer IP address */
    NDK_ADAPTER_INFO limits; /* what the adapter advertises and enforces (Version set later) */
    bool flags_given;        /* SOFTNDK_LIMITS / Limits set AdapterFlags explicitly */
    /* observability (docs/observability.md): empty = off */
    bool stat;                       /* open the ndkstat control endpoint */
    char stat_path[108];             /* its socket path ("" = the default place) */
    char trace_path[SNDK_OBS_PATH_MAX];
    char pcap_path[SNDK_OBS_PATH_MAX];
    struct sndk_faults *faults;      /* parsed fault rules (docs/faults.md), NULL = none; owned:
                                        the adapter takes it, sndk_faults_free otherwise */
};

/* SOFTNDK_PROGRESS_CPU: a progress thread follows the consumers it notifies to their CPU, or
 * runs on any (docs/engine.md, "Following the waiter"). */
enum { SNDK_PROGRESS_CPU_FOLLOW = 0, SNDK_PROGRESS_CPU_ANY = 1 };

/* softndk's own maxima: the ceiling of SOFTNDK_LIMITS. */
void sndk_config_default_limits(NDK_ADAPTER_INFO *info);

/* The built-in profiles, by index (NULL past the last): name, family, the limits it sets. */
const char *sndk_config_profile_name(unsigned i);
const char *sndk_config_profile_family(unsigned i);
const char *sndk_config_profile_limits(unsigned i);

/* Fill cfg. Returns STATUS_SUCCESS or STATUS_INVALID_PARAMETER, having logged the culprit into
 * err (at most errlen bytes). */
NTSTATUS sndk_config_resolve(const SOFTNDK_OPTIONS *opt, struct sndk_config *cfg, char *err,
                             size_t errlen);

/* Parse "Name=value,..." over NDK_ADAPTER_INFO fields into info, each value at most the
 * default maximum (AdapterFlags: a subset of the default flags, plus MULTI_ENGINE). Values are
 * decimal, or hexadecimal with 0x. *flags_given tells whether AdapterFlags was among them. */
bool sndk_config_parse_limits(const char *text, NDK_ADAPTER_INFO *info, bool *flags_given,
                              char *err, size_t errlen);

#endif
