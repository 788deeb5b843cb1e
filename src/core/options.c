#include "core/options.h"

#include "core/faults.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sndk_config_default_limits(NDK_ADAPTER_INFO *info)
{
    memset(info, 0, sizeof *info);
    /* softndk has no OUI of its own; DeviceId spells "SNDK". */
    info->VendorId = 0;
    info->DeviceId = 0x534e444b;
    /* Regions index user virtual memory (47 bits on x86-64); windows likewise. */
    info->MaxRegistrationSize = (SIZE_T)1 << 46;
    info->MaxWindowSize = (SIZE_T)1 << 46;
    /* 4096 pages of 4 KiB = 16 MiB per fast registration, beyond any SMB Direct I/O. */
    info->FRMRPageCount = 4096;
    /* Gathered with writev: 64 SGEs + MPA/DDP header, pad and CRC stay far below IOV_MAX. */
    info->MaxInitiatorRequestSge = 64;
    info->MaxReceiveRequestSge = 64;
    info->MaxReadRequestSge = 64;
    /* A DDP message offset is 32 bits; BytesTransferred is a ULONG. */
    info->MaxTransferLength = 0xFFFFFFFFu;
    info->MaxInlineDataSize = 1024;
    /* RFC 6581 carries IRD/ORD in 14 bits; 128 matches what siw offers. */
    info->MaxInboundReadLimit = 128;
    info->MaxOutboundReadLimit = 128;
    info->MaxReceiveQueueDepth = 65535;
    info->MaxInitiatorQueueDepth = 65535;
    info->MaxSrqDepth = 65535;
    info->MaxCqDepth = 1u << 20;
    /* Sends land straight in the posted buffer, so send/receive stays competitive longer
     * than on hardware; above 64 KiB one-sided transfers save the receive bookkeeping. */
    info->LargeRequestThreshold = 64 * 1024;
    /* MPA private data is at most 256 bytes including the 4-byte rev-2 IRD/ORD word. */
    info->MaxCallerData = 252;
    info->MaxCalleeData = 252;
    /* Read sinks are named by a private STag per Read, so local SGEs need no remote rights; a
     * Read with RDMA_READ_LOCAL_INVALIDATE invalidates its first SGE's token before it
     * completes (docs/datapath.md). */
    info->AdapterFlags = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                         NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                         NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                         NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    info->RdmaTechnology = NdkiWarp;
}

static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] == '-' || buf[0] == '+')
        return false;
    char *end;
    errno = 0;
    /* Decimal, or hexadecimal with 0x: a leading zero is not octal (MaxCqDepth=010 is 10). */
    bool hex = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
    unsigned long long v = strtoull(buf, &end, hex ? 16 : 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

struct limit_field {
    const char *name;
    size_t offset;
    size_t size; /* 4 or 8 */
};

#define LIMIT(f) {#f, offsetof(NDK_ADAPTER_INFO, f), sizeof(((NDK_ADAPTER_INFO *)0)->f)}
static const struct limit_field limit_fields[] = {
    LIMIT(VendorId),
    LIMIT(DeviceId),
    LIMIT(MaxRegistrationSize),
    LIMIT(MaxWindowSize),
    LIMIT(FRMRPageCount),
    LIMIT(MaxInitiatorRequestSge),
    LIMIT(MaxReceiveRequestSge),
    LIMIT(MaxReadRequestSge),
    LIMIT(MaxTransferLength),
    LIMIT(MaxInlineDataSize),
    LIMIT(MaxInboundReadLimit),
    LIMIT(MaxOutboundReadLimit),
    LIMIT(MaxReceiveQueueDepth),
    LIMIT(MaxInitiatorQueueDepth),
    LIMIT(MaxSrqDepth),
    LIMIT(MaxCqDepth),
    LIMIT(LargeRequestThreshold),
    LIMIT(MaxCallerData),
    LIMIT(MaxCalleeData),
    LIMIT(AdapterFlags),
};
#undef LIMIT

static uint64_t field_get(const NDK_ADAPTER_INFO *info, const struct limit_field *f)
{
    const char *p = (const char *)info + f->offset;
    if (f->size == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void field_set(NDK_ADAPTER_INFO *info, const struct limit_field *f, uint64_t v)
{
    char *p = (char *)info + f->offset;
    if (f->size == 8) {
        memcpy(p, &v, 8);
    } else {
        uint32_t v32 = (uint32_t)v;
        memcpy(p, &v32, 4);
    }
}

bool sndk_config_parse_limits(const char *text, NDK_ADAPTER_INFO *info, bool *flags_given,
                              char *err, size_t errlen)
{
    NDK_ADAPTER_INFO max;
    sndk_config_default_limits(&max);
    const char *p = text;
    while (*p) {
        const char *item_end = strchr(p, ',');
        size_t item_len = item_end ? (size_t)(item_end - p) : strlen(p);
        const char *eq = memchr(p, '=', item_len);
        if (!eq) {
            snprintf(err, errlen, "SOFTNDK_LIMITS: '%.*s' is not Name=value", (int)item_len, p);
            return false;
        }
        size_t name_len = (size_t)(eq - p);
        const struct limit_field *f = NULL;
        for (size_t i = 0; i < sizeof limit_fields / sizeof limit_fields[0]; i++)
            if (strlen(limit_fields[i].name) == name_len &&
                strncasecmp(limit_fields[i].name, p, name_len) == 0)
                f = &limit_fields[i];
        if (!f) {
            snprintf(err, errlen, "SOFTNDK_LIMITS: unknown field '%.*s'", (int)name_len, p);
            return false;
        }
        uint64_t v;
        if (!parse_u64(eq + 1, item_len - name_len - 1, &v)) {
            snprintf(err, errlen, "SOFTNDK_LIMITS: %s: '%.*s' is not a number", f->name,
                     (int)(item_len - name_len - 1), eq + 1);
            return false;
        }
        uint64_t ceiling = field_get(&max, f);
        bool is_id = strcmp(f->name, "VendorId") == 0 || strcmp(f->name, "DeviceId") == 0;
        if (is_id) {
            if (v > 0xFFFFFFFFu) {
                snprintf(err, errlen, "SOFTNDK_LIMITS: %s=%llu does not fit 32 bits", f->name,
                         (unsigned long long)v);
                return false;
            }
        } else if (strcmp(f->name, "AdapterFlags") == 0) {
            ceiling |= NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED;
            if (v & ~ceiling) {
                snprintf(err, errlen,
                         "SOFTNDK_LIMITS: AdapterFlags=0x%llx asks for flags softndk does not "
                         "implement (it offers 0x%llx)",
                         (unsigned long long)v, (unsigned long long)ceiling);
                return false;
            }
        } else if (v > ceiling) {
            snprintf(err, errlen, "SOFTNDK_LIMITS: %s=%llu is above softndk's maximum %llu",
                     f->name, (unsigned long long)v, (unsigned long long)ceiling);
            return false;
        } else if (strcmp(f->name, "FRMRPageCount") == 0 && v < 16) {
            snprintf(err, errlen, "SOFTNDK_LIMITS: FRMRPageCount must be at least 16 (NDKPI)");
            return false;
        }
        field_set(info, f, v);
        if (strcmp(f->name, "AdapterFlags") == 0)
            *flags_given = true;
        p += item_len;
        if (*p == ',')
            p++;
    }
    return true;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

/* SOFTNDK_TRACE / SOFTNDK_PCAP: a file path, or off. */
static bool resolve_file(const char *given, const char *var, char *out, size_t outlen, char *err,
                         size_t errlen)
{
    out[0] = '\0';
    const char *v = given ? given : env(var);
    if (!v || !*v || strcasecmp(v, "off") == 0)
        return true;
    if (strlen(v) >= outlen) {
        snprintf(err, errlen, "%s: path longer than %zu bytes", var, outlen - 1);
        return false;
    }
    if (strcasecmp(v, "on") == 0) {
        snprintf(err, errlen, "%s='%s': must be a file path (or off)", var, v);
        return false;
    }
    strcpy(out, v);
    return true;
}

/* SOFTNDK_STAT: on, off, or the socket path (absolute; '@name' = abstract namespace). */
static bool resolve_stat(const char *given, struct sndk_config *cfg, char *err, size_t errlen)
{
    cfg->stat = false;
    cfg->stat_path[0] = '\0';
    const char *v = given ? given : env("SOFTNDK_STAT");
    if (!v || !*v || strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return true;
    if (strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0) {
        cfg->stat = true;
        return true;
    }
    if ((v[0] != '/' && v[0] != '@') || v[1] == '\0' || strlen(v) >= sizeof cfg->stat_path) {
        snprintf(err, errlen,
                 "SOFTNDK_STAT='%s': must be on, off, an absolute socket path or @name "
                 "(at most %zu bytes)",
                 v, sizeof cfg->stat_path - 1);
        return false;
    }
    cfg->stat = true;
    strcpy(cfg->stat_path, v);
    return true;
}

/* An on/off option: its enum (0 default, 1 on, 2 off; SoftNdkCrc* and SoftNdkSourceCheck*
 * share these values), else the variable ("on"/"off", any case), else dflt. */
_Static_assert(SoftNdkCrcDefault == 0 && SoftNdkCrcOn == 1 && SoftNdkCrcOff == 2 &&
                   SoftNdkSourceCheckDefault == 0 && SoftNdkSourceCheckOn == 1 &&
                   SoftNdkSourceCheckOff == 2,
               "resolve_on_off reads both enums as 0 default, 1 on, 2 off");

static bool resolve_on_off(int given, const char *field, const char *type, const char *var,
                           bool dflt, bool *out, char *err, size_t errlen)
{
    const char *v;
    *out = dflt;
    if (given == 1 || given == 2) {
        *out = given == 1;
    } else if (given != 0) {
        snprintf(err, errlen, "%s %d: not a %s", field, given, type);
        return false;
    } else if ((v = env(var))) {
        if (strcasecmp(v, "on") == 0)
            *out = true;
        else if (strcasecmp(v, "off") == 0)
            *out = false;
        else {
            snprintf(err, errlen, "%s='%s': must be on or off", var, v);
            return false;
        }
    }
    return true;
}

NTSTATUS sndk_config_resolve(const SOFTNDK_OPTIONS *given, struct sndk_config *cfg, char *err,
                             size_t errlen)
{
    /* Size is the struct's version: the first published layout is the smallest we accept;
     * fields beyond the caller's Size are "default". */
    cfg->faults = NULL;
    SOFTNDK_OPTIONS copy;
    memset(&copy, 0, sizeof copy);
    copy.Size = sizeof copy;
    if (given) {
        /* a published layout: the first one, or the current one (or a later, larger one) */
        if ((given->Size != SOFTNDK_OPTIONS_SIZE_V1 && given->Size != SOFTNDK_OPTIONS_SIZE_V2 &&
             given->Size != SOFTNDK_OPTIONS_SIZE_V3 && given->Size != SOFTNDK_OPTIONS_SIZE_V4 &&
             given->Size != SOFTNDK_OPTIONS_SIZE_V5 && given->Size < sizeof(SOFTNDK_OPTIONS)) ||
            given->Size > 4096) {
            snprintf(err, errlen,
                     "SOFTNDK_OPTIONS.Size %u is not sizeof(SOFTNDK_OPTIONS) (%zu, or %zu / %zu / "
                     "%zu / %zu / %zu for the earlier layouts)",
                     given->Size, sizeof(SOFTNDK_OPTIONS), (size_t)SOFTNDK_OPTIONS_SIZE_V1,
                     (size_t)SOFTNDK_OPTIONS_SIZE_V2, (size_t)SOFTNDK_OPTIONS_SIZE_V3,
                     (size_t)SOFTNDK_OPTIONS_SIZE_V4, (size_t)SOFTNDK_OPTIONS_SIZE_V5);
            return STATUS_INVALID_PARAMETER;
        }
        memcpy(&copy, given, given->Size < sizeof copy ? given->Size : sizeof copy);
    }
    const SOFTNDK_OPTIONS *opt = &copy;
    const char *v;
    uint64_t n;

    /* MPA revision */
    cfg->mpa_revision = 2;
    if (opt->MpaRevision) {
        cfg->mpa_revision = opt->MpaRevision;
    } else if ((v = env("SOFTNDK_MPA_REV"))) {
        if (!parse_u64(v, strlen(v), &n) || (n != 1 && n != 2)) {
            snprintf(err, errlen, "SOFTNDK_MPA_REV='%s': must be 1 or 2", v);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->mpa_revision = (unsigned)n;
    }
    if (cfg->mpa_revision != 1 && cfg->mpa_revision != 2) {
        snprintf(err, errlen, "MpaRevision %u: must be 1 or 2", cfg->mpa_revision);
        return STATUS_INVALID_PARAMETER;
    }

    /* CRC */
    if (!resolve_on_off((int)opt->Crc, "Crc", "SOFTNDK_CRC_POLICY", "SOFTNDK_CRC", true, &cfg->crc,
                        err, errlen))
        return STATUS_INVALID_PARAMETER;

    /* Ephemeral ND ports */
    cfg->port_low = 49152;
    cfg->port_high = 65535;
    if (opt->EphemeralPortLow || opt->EphemeralPortHigh) {
        cfg->port_low = opt->EphemeralPortLow;
        cfg->port_high = opt->EphemeralPortHigh;
    } else if ((v = env("SOFTNDK_EPHEMERAL_PORTS"))) {
        const char *dash = strchr(v, '-');
        uint64_t lo, hi;
        if (!dash || !parse_u64(v, (size_t)(dash - v), &lo) ||
            !parse_u64(dash + 1, strlen(dash + 1), &hi) || lo > 65535 || hi > 65535) {
            snprintf(err, errlen, "SOFTNDK_EPHEMERAL_PORTS='%s': must be LO-HI, ports 1-65535", v);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->port_low = (uint16_t)lo;
        cfg->port_high = (uint16_t)hi;
    }
    if (cfg->port_low == 0 || cfg->port_low > cfg->port_high) {
        snprintf(err, errlen, "ephemeral ports %u-%u: need 1 <= LO <= HI <= 65535",
                 cfg->port_low, cfg->port_high);
        return STATUS_INVALID_PARAMETER;
    }

    /* Progress threads */
    cfg->threads = 1;
    if (opt->ProgressThreads) {
        cfg->threads = opt->ProgressThreads;
    } else if ((v = env("SOFTNDK_THREADS"))) {
        if (!parse_u64(v, strlen(v), &n) || n == 0 || n > SNDK_MAX_PROGRESS_THREADS) {
            snprintf(err, errlen, "SOFTNDK_THREADS='%s': must be 1-%d", v,
                     SNDK_MAX_PROGRESS_THREADS);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->threads = (unsigned)n;
    }
    if (cfg->threads > SNDK_MAX_PROGRESS_THREADS) {
        snprintf(err, errlen, "ProgressThreads %u: at most %d", cfg->threads,
                 SNDK_MAX_PROGRESS_THREADS);
        return STATUS_INVALID_PARAMETER;
    }

    /* Spin before blocking */
    cfg->spin_us = SNDK_DEFAULT_SPIN_US;
    if (opt->SpinMicroseconds == SOFTNDK_SPIN_NONE) {
        cfg->spin_us = 0;
    } else if (opt->SpinMicroseconds) {
        cfg->spin_us = opt->SpinMicroseconds;
    } else if ((v = env("SOFTNDK_SPIN_US"))) {
        if (!parse_u64(v, strlen(v), &n) || n > 1000000) {
            snprintf(err, errlen, "SOFTNDK_SPIN_US='%s': must be 0-1000000", v);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->spin_us = (unsigned)n;
    }
    if (cfg->spin_us > 1000000) {
        snprintf(err, errlen, "SpinMicroseconds %u: at most 1000000", cfg->spin_us);
        return STATUS_INVALID_PARAMETER;
    }

    /* Log level */
    cfg->log_level = SoftNdkLogWarn;
    if (opt->LogLevel != SoftNdkLogDefault) {
        if (opt->LogLevel < SoftNdkLogError || opt->LogLevel > SoftNdkLogDebug) {
            snprintf(err, errlen, "LogLevel %d: not a SOFTNDK_LOG_LEVEL", (int)opt->LogLevel);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->log_level = opt->LogLevel;
    } else if ((v = env("SOFTNDK_LOG"))) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        SOFTNDK_LOG_LEVEL level = SoftNdkLogDefault;
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, names[i]) == 0)
                level = (SOFTNDK_LOG_LEVEL)(SoftNdkLogError + i);
        if (level == SoftNdkLogDefault) {
            snprintf(err, errlen, "SOFTNDK_LOG='%s': must be error, warn, info or debug", v);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->log_level = level;
    }

    /* Timeouts */
    struct {
        ULONG given;
        const char *env;
        unsigned *out;
        unsigned dflt;
    } timeouts[] = {
        {opt->ConnectTimeoutMs, "SOFTNDK_CONNECT_TIMEOUT_MS", &cfg->connect_timeout_ms,
         SNDK_DEFAULT_TIMEOUT_MS},
        {opt->DisconnectTimeoutMs, "SOFTNDK_DISCONNECT_TIMEOUT_MS", &cfg->disconnect_timeout_ms,
         SNDK_DEFAULT_TIMEOUT_MS},
        {opt->PeerTimeoutMs, "SOFTNDK_PEER_TIMEOUT_MS", &cfg->peer_timeout_ms,
         SNDK_DEFAULT_PEER_TIMEOUT_MS},
        {opt->RequestTimeoutMs, "SOFTNDK_REQUEST_TIMEOUT_MS", &cfg->request_timeout_ms,
         SNDK_DEFAULT_REQUEST_TIMEOUT_MS},
    };
    for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
        *timeouts[i].out = timeouts[i].dflt;
        if (timeouts[i].given) {
            *timeouts[i].out = timeouts[i].given;
        } else if ((v = env(timeouts[i].env))) {
            if (!parse_u64(v, strlen(v), &n) || n == 0 || n > SNDK_MAX_TIMEOUT_MS) {
                snprintf(err, errlen, "%s='%s': must be 1-%d (ms)", timeouts[i].env, v,
                         SNDK_MAX_TIMEOUT_MS);
                return STATUS_INVALID_PARAMETER;
            }
            *timeouts[i].out = (unsigned)n;
        }
        if (*timeouts[i].out > SNDK_MAX_TIMEOUT_MS) {
            snprintf(err, errlen, "%s %u: at most %d ms", timeouts[i].env, *timeouts[i].out,
                     SNDK_MAX_TIMEOUT_MS);
            return STATUS_INVALID_PARAMETER;
        }
    }

    /* Handshake limits (the listener's door) */
    struct {
        ULONG given;
        const char *field, *env;
        unsigned *out;
        unsigned dflt;
    } door[] = {
        {opt->HandshakeLimit, "HandshakeLimit", "SOFTNDK_HANDSHAKE_LIMIT", &cfg->handshake_limit,
         SNDK_DEFAULT_HANDSHAKE_LIMIT},
        {opt->HandshakePerPeerLimit, "HandshakePerPeerLimit", "SOFTNDK_HANDSHAKE_PER_PEER",
         &cfg->handshake_per_peer, SNDK_DEFAULT_HANDSHAKE_PER_PEER},
    };
    for (size_t i = 0; i < sizeof door / sizeof door[0]; i++) {
        *door[i].out = door[i].dflt;
        if (door[i].given) {
            *door[i].out = door[i].given;
        } else if ((v = env(door[i].env))) {
            if (!parse_u64(v, strlen(v), &n) || n == 0 || n > SNDK_MAX_HANDSHAKE_LIMIT) {
                snprintf(err, errlen, "%s='%s': must be 1-%d", door[i].env, v,
                         SNDK_MAX_HANDSHAKE_LIMIT);
                return STATUS_INVALID_PARAMETER;
            }
            *door[i].out = (unsigned)n;
        }
        if (*door[i].out > SNDK_MAX_HANDSHAKE_LIMIT) {
            snprintf(err, errlen, "%s %u: at most %d", door[i].field, *door[i].out,
                     SNDK_MAX_HANDSHAKE_LIMIT);
            return STATUS_INVALID_PARAMETER;
        }
    }

    /* Adapter limits */
    sndk_config_default_limits(&cfg->limits);
    const char *limits = opt->Limits ? opt->Limits : env("SOFTNDK_LIMITS");
    cfg->flags_given = false;
    if (limits && !sndk_config_parse_limits(limits, &cfg->limits, &cfg->flags_given, err, errlen))
        return STATUS_INVALID_PARAMETER;

    /* Observability */
    if (!resolve_stat(opt->StatEndpoint, cfg, err, errlen) ||
        !resolve_file(opt->TraceFile, "SOFTNDK_TRACE", cfg->trace_path, sizeof cfg->trace_path,
                      err, errlen) ||
        !resolve_file(opt->PcapFile, "SOFTNDK_PCAP", cfg->pcap_path, sizeof cfg->pcap_path, err,
                      errlen))
        return STATUS_INVALID_PARAMETER;

    /* Source check */
    if (!resolve_on_off((int)opt->SourceCheck, "SourceCheck", "SOFTNDK_SOURCE_CHECK",
                        "SOFTNDK_SOURCE_CHECK", false, &cfg->source_check, err, errlen))
        return STATUS_INVALID_PARAMETER;

    /* Consumer verifier */
    cfg->verify = SoftNdkVerifyOff;
    if (opt->Verify != SoftNdkVerifyDefault) {
        if (opt->Verify < SoftNdkVerifyOff || opt->Verify > SoftNdkVerifyStrict) {
            snprintf(err, errlen, "Verify %d: not a SOFTNDK_VERIFY_MODE", (int)opt->Verify);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->verify = opt->Verify;
    } else if ((v = env("SOFTNDK_VERIFY"))) {
        static const char *const names[] = {"off", "warn", "strict"};
        SOFTNDK_VERIFY_MODE mode = SoftNdkVerifyDefault;
        for (int i = 0; i < 3; i++)
            if (strcasecmp(v, names[i]) == 0)
                mode = (SOFTNDK_VERIFY_MODE)(SoftNdkVerifyOff + i);
        if (mode == SoftNdkVerifyDefault) {
            snprintf(err, errlen, "SOFTNDK_VERIFY='%s': must be off, warn or strict", v);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->verify = mode;
    }
    cfg->verify_callback_us = SNDK_DEFAULT_VERIFY_CALLBACK_MS * 1000u;
    if ((v = env("SOFTNDK_VERIFY_CALLBACK_MS"))) {
        if (!parse_u64(v, strlen(v), &n) || n == 0 || n > SNDK_MAX_VERIFY_CALLBACK_MS) {
            snprintf(err, errlen, "SOFTNDK_VERIFY_CALLBACK_MS='%s': must be 1-%d (ms)", v,
                     SNDK_MAX_VERIFY_CALLBACK_MS);
            return STATUS_INVALID_PARAMETER;
        }
        cfg->verify_callback_us = (unsigned)n * 1000u;
    }

    /* Fault injection: parsed last, so that nothing after it can fail and leak the rules. */
    const char *faults = opt->Faults ? opt->Faults : env("SOFTNDK_FAULTS");
    char ferr[200];
    if (!sndk_faults_parse(faults, &cfg->faults, ferr, sizeof ferr)) {
        snprintf(err, errlen, "%s: %s", opt->Faults ? "Faults" : "SOFTNDK_FAULTS", ferr);
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}
