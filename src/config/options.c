#include "config/options.h"

#include "faults/faults.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
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

/* ---------------------------------------------------------------- profiles */

/* A profile is an overlay: it sets some of the settings below (by option name) and a limits
 * text applied before Limits / SOFTNDK_LIMITS. Every number and its source: docs/adapter.md,
 * "Profiles". */
struct profile_value {
    const char *field;
    unsigned value;
};

struct sndk_profile {
    const char *name;
    const char *family;
    const char *limits; /* "Name=value,..." over softndk's defaults, NULL = none */
    struct profile_value set[4];
};

#define RNR_ROCE_MS 1000u /* decisions.md: one bound for every RoCE-like profile */

static const struct sndk_profile profiles[] = {
    {"iwarp", "iWARP, softndk's own limits", NULL, {{"RnrWaitMs", 0}}},
    {"roce",
     "RoCE semantics, softndk's own limits",
     NULL,
     {{"RnrWaitMs", RNR_ROCE_MS}, {"WriteCompletion", SoftNdkWriteCompletionPlaced}}},
    /* Linux irdma, icrdma_hw.h (E810 = gen 2): ICRDMA_MAX_WQ_FRAGMENT_COUNT 13,
     * ICRDMA_MAX_SGE_RD 13, ICRDMA_MAX_IRD_SIZE 32, ICRDMA_MAX_ORD_SIZE 64 */
    {"intel-e810",
     "Intel E810 iWARP (Linux irdma, gen 2)",
     "MaxInitiatorRequestSge=13,MaxReceiveRequestSge=13,MaxReadRequestSge=13,"
     "MaxInboundReadLimit=32,MaxOutboundReadLimit=64",
     {{"RnrWaitMs", 0}}},
    /* Linux iw_cxgb4, t4.h: T4_MAX_RECV_SGE 4; T4_MAX_FR_DSGL_DEPTH 1024 / 8 = 128 pages per
     * fast registration (T5 and later use DSGL) */
    {"chelsio-t6",
     "Chelsio T6 iWARP (Linux iw_cxgb4)",
     "MaxReceiveRequestSge=4,FRMRPageCount=128",
     {{"RnrWaitMs", 0}}},
};
#define PROFILE_COUNT (sizeof profiles / sizeof profiles[0])

const char *sndk_config_profile_name(unsigned i)
{
    return i < PROFILE_COUNT ? profiles[i].name : NULL;
}

const char *sndk_config_profile_family(unsigned i)
{
    return i < PROFILE_COUNT ? profiles[i].family : NULL;
}

const char *sndk_config_profile_limits(unsigned i)
{
    return i < PROFILE_COUNT ? profiles[i].limits : NULL;
}

/* ---------------------------------------------------------------- the settings table */

enum setting_kind {
    SET_UINT,   /* a number in [lo, hi]; 0 in the option = default; none_opt = the value 0 */
    SET_ON_OFF, /* option 0 default, 1 on, 2 off; variable on/off */
    SET_NAMES,  /* option 0 default, names_base + i; variable names[i] */
};

struct setting {
    const char *field; /* the SOFTNDK_OPTIONS field */
    const char *var;   /* its SOFTNDK_* variable */
    enum setting_kind kind;
    size_t opt_off; /* a 4-byte field of SOFTNDK_OPTIONS, or NO_OPTION: a variable alone */
    size_t cfg_off;
    size_t cfg_size; /* 1 (bool) or 4 (unsigned, enum) */
    unsigned dflt;
    unsigned lo, hi;      /* SET_UINT */
    uint32_t none_opt;    /* SET_UINT: an option value meaning 0 (SOFTNDK_SPIN_NONE ...), 0: none */
    const char *none_var; /* ... and its variable spelling ("off"), NULL: none */
    const char *unit;     /* " (ms)" or "" */
    const char *const *names; /* SET_NAMES */
    int names_n, names_base;
};

#define NO_OPTION SIZE_MAX

static const char *const log_names[] = {"error", "warn", "info", "debug"};
static const char *const verify_names[] = {"off", "warn", "strict"};
static const char *const write_completion_names[] = {"handed", "placed"};
static const char *const transport_names[] = {"tcp", "shm", "auto"};
static const char *const progress_cpu_names[] = {"follow", "any"};

/* An on/off option's enum: 0 default, 1 on, 2 off (SoftNdkCrc* and SoftNdkSourceCheck* share
 * these values). */
_Static_assert(SoftNdkCrcDefault == 0 && SoftNdkCrcOn == 1 && SoftNdkCrcOff == 2 &&
                   SoftNdkSourceCheckDefault == 0 && SoftNdkSourceCheckOn == 1 &&
                   SoftNdkSourceCheckOff == 2,
               "SET_ON_OFF reads both enums as 0 default, 1 on, 2 off");
_Static_assert(sizeof(SOFTNDK_CRC_POLICY) == 4 && sizeof(SOFTNDK_LOG_LEVEL) == 4 &&
                   sizeof(SOFTNDK_WRITE_COMPLETION) == 4 && sizeof(SOFTNDK_VERIFY_MODE) == 4 &&
                   sizeof(SOFTNDK_TRANSPORT) == 4 && sizeof(ULONG) == 4,
               "option fields of the table are 4 bytes");

#define OPT(f) offsetof(SOFTNDK_OPTIONS, f)
#define CFG(f)                                                                                     \
    .cfg_off = offsetof(struct sndk_config, f), .cfg_size = sizeof(((struct sndk_config *)0)->f)
#define UINT(f, v, cf, d, l, h)                                                                    \
    .field = #f, .var = v, .kind = SET_UINT, .opt_off = OPT(f), CFG(cf), .dflt = d, .lo = l, .hi = h
static const struct setting settings[] = {
    {UINT(MpaRevision, "SOFTNDK_MPA_REV", mpa_revision, 2, 1, 2)},
    {.field = "Crc",
     .var = "SOFTNDK_CRC",
     .kind = SET_ON_OFF,
     .opt_off = OPT(Crc),
     CFG(crc),
     .dflt = 1},
    {UINT(ProgressThreads, "SOFTNDK_THREADS", threads, 1, 1, SNDK_MAX_PROGRESS_THREADS)},
    {UINT(SpinMicroseconds, "SOFTNDK_SPIN_US", spin_us, SNDK_DEFAULT_SPIN_US, 0, 1000000),
     .none_opt = SOFTNDK_SPIN_NONE},
    {.field = "LogLevel",
     .var = "SOFTNDK_LOG",
     .kind = SET_NAMES,
     .opt_off = OPT(LogLevel),
     CFG(log_level),
     .dflt = SoftNdkLogWarn,
     .names = log_names,
     .names_n = 4,
     .names_base = SoftNdkLogError},
    {UINT(ConnectTimeoutMs, "SOFTNDK_CONNECT_TIMEOUT_MS", connect_timeout_ms,
          SNDK_DEFAULT_TIMEOUT_MS, 1, SNDK_MAX_TIMEOUT_MS),
     .unit = " (ms)"},
    {UINT(DisconnectTimeoutMs, "SOFTNDK_DISCONNECT_TIMEOUT_MS", disconnect_timeout_ms,
          SNDK_DEFAULT_TIMEOUT_MS, 1, SNDK_MAX_TIMEOUT_MS),
     .unit = " (ms)"},
    {UINT(PeerTimeoutMs, "SOFTNDK_PEER_TIMEOUT_MS", peer_timeout_ms, SNDK_DEFAULT_PEER_TIMEOUT_MS,
          1, SNDK_MAX_TIMEOUT_MS),
     .unit = " (ms)"},
    {UINT(RequestTimeoutMs, "SOFTNDK_REQUEST_TIMEOUT_MS", request_timeout_ms,
          SNDK_DEFAULT_REQUEST_TIMEOUT_MS, 1, SNDK_MAX_TIMEOUT_MS),
     .unit = " (ms)"},
    {UINT(HandshakeLimit, "SOFTNDK_HANDSHAKE_LIMIT", handshake_limit, SNDK_DEFAULT_HANDSHAKE_LIMIT,
          1, SNDK_MAX_HANDSHAKE_LIMIT)},
    {UINT(HandshakePerPeerLimit, "SOFTNDK_HANDSHAKE_PER_PEER", handshake_per_peer,
          SNDK_DEFAULT_HANDSHAKE_PER_PEER, 1, SNDK_MAX_HANDSHAKE_LIMIT)},
    {.field = "SourceCheck",
     .var = "SOFTNDK_SOURCE_CHECK",
     .kind = SET_ON_OFF,
     .opt_off = OPT(SourceCheck),
     CFG(source_check),
     .dflt = 0},
    {.field = "Verify",
     .var = "SOFTNDK_VERIFY",
     .kind = SET_NAMES,
     .opt_off = OPT(Verify),
     CFG(verify),
     .dflt = SoftNdkVerifyOff,
     .names = verify_names,
     .names_n = 3,
     .names_base = SoftNdkVerifyOff},
    {UINT(RnrWaitMs, "SOFTNDK_RNR_WAIT_MS", rnr_wait_ms, 0, 1, SNDK_MAX_TIMEOUT_MS),
     .none_opt = SOFTNDK_RNR_WAIT_OFF, .none_var = "off", .unit = " (ms)"},
    {.field = "WriteCompletion",
     .var = "SOFTNDK_WRITE_COMPLETION",
     .kind = SET_NAMES,
     .opt_off = OPT(WriteCompletion),
     CFG(write_completion),
     .dflt = SoftNdkWriteCompletionHanded,
     .names = write_completion_names,
     .names_n = 2,
     .names_base = SoftNdkWriteCompletionHanded},
    {.field = "Transport",
     .var = "SOFTNDK_TRANSPORT",
     .kind = SET_NAMES,
     .opt_off = OPT(Transport),
     CFG(transport),
     .dflt = SoftNdkTransportTcp,
     .names = transport_names,
     .names_n = 3,
     .names_base = SoftNdkTransportTcp},
    {.field = "VerifyCallbackMs",
     .var = "SOFTNDK_VERIFY_CALLBACK_MS",
     .kind = SET_UINT,
     .opt_off = NO_OPTION,
     CFG(verify_callback_ms),
     .dflt = SNDK_DEFAULT_VERIFY_CALLBACK_MS,
     .lo = 1,
     .hi = SNDK_MAX_VERIFY_CALLBACK_MS,
     .unit = " (ms)"},
    {.field = "ProgressCpu",
     .var = "SOFTNDK_PROGRESS_CPU",
     .kind = SET_NAMES,
     .opt_off = NO_OPTION,
     CFG(progress_cpu),
     .dflt = SNDK_PROGRESS_CPU_FOLLOW,
     .names = progress_cpu_names,
     .names_n = 2,
     .names_base = SNDK_PROGRESS_CPU_FOLLOW},
};
#undef UINT
#undef OPT
#undef CFG
#define SETTING_COUNT (sizeof settings / sizeof settings[0])

static void cfg_put(struct sndk_config *cfg, const struct setting *s, unsigned v)
{
    char *p = (char *)cfg + s->cfg_off;
    if (s->cfg_size == 1) {
        bool b = v != 0;
        memcpy(p, &b, 1);
    } else {
        memcpy(p, &v, 4);
    }
}

/* The default of s under profile pr. */
static unsigned setting_default(const struct setting *s, const struct sndk_profile *pr)
{
    for (size_t i = 0; i < sizeof pr->set / sizeof pr->set[0] && pr->set[i].field; i++)
        if (strcmp(pr->set[i].field, s->field) == 0)
            return pr->set[i].value;
    return s->dflt;
}

/* One setting: the option (validated), else the variable (parsed, validated), else the
 * profile's or the built-in default. */
static bool resolve_setting(const struct setting *s, const SOFTNDK_OPTIONS *opt,
                            const struct sndk_profile *pr, struct sndk_config *cfg, char *err,
                            size_t errlen)
{
    uint32_t given = 0;
    if (s->opt_off != NO_OPTION)
        memcpy(&given, (const char *)opt + s->opt_off, 4);
    const char *v = given ? NULL : env(s->var);
    unsigned out = setting_default(s, pr);
    uint64_t n;
    switch (s->kind) {
    case SET_UINT:
        if (given && s->none_opt && given == s->none_opt) {
            out = 0;
        } else if (given) {
            if (given < s->lo || given > s->hi) {
                snprintf(err, errlen, "%s %u: must be %u-%u%s", s->field, (unsigned)given, s->lo,
                         s->hi, s->unit ? s->unit : "");
                return false;
            }
            out = given;
        } else if (v && s->none_var && strcasecmp(v, s->none_var) == 0) {
            out = 0;
        } else if (v) {
            if (!parse_u64(v, strlen(v), &n) || n < s->lo || n > s->hi) {
                snprintf(err, errlen, "%s='%s': must be %u-%u%s%s%s", s->var, v, s->lo, s->hi,
                         s->unit ? s->unit : "", s->none_var ? " or " : "",
                         s->none_var ? s->none_var : "");
                return false;
            }
            out = (unsigned)n;
        }
        break;
    case SET_ON_OFF:
        if (given == 1 || given == 2) {
            out = given == 1;
        } else if (given) {
            snprintf(err, errlen, "%s %d: not on (1) or off (2)", s->field, (int)given);
            return false;
        } else if (v) {
            if (strcasecmp(v, "on") == 0)
                out = 1;
            else if (strcasecmp(v, "off") == 0)
                out = 0;
            else {
                snprintf(err, errlen, "%s='%s': must be on or off", s->var, v);
                return false;
            }
        }
        break;
    case SET_NAMES:
        if (given) {
            if ((int)given < s->names_base || (int)given >= s->names_base + s->names_n) {
                snprintf(err, errlen, "%s %d: not one of its enum values", s->field, (int)given);
                return false;
            }
            out = given;
        } else if (v) {
            int found = -1;
            for (int i = 0; i < s->names_n; i++)
                if (strcasecmp(v, s->names[i]) == 0)
                    found = i;
            if (found < 0) {
                char list[96] = "";
                for (int i = 0; i < s->names_n; i++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                             i == 0                ? ""
                             : i == s->names_n - 1 ? " or "
                                                   : ", ",
                             s->names[i]);
                snprintf(err, errlen, "%s='%s': must be %s", s->var, v, list);
                return false;
            }
            out = (unsigned)(s->names_base + found);
        }
        break;
    }
    cfg_put(cfg, s, out);
    return true;
}

/* ---------------------------------------------------------------- the rest: own shapes */

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

/* Ephemeral ND ports: both options, else SOFTNDK_EPHEMERAL_PORTS=LO-HI, else 49152-65535. */
static bool resolve_ports(const SOFTNDK_OPTIONS *opt, struct sndk_config *cfg, char *err,
                          size_t errlen)
{
    const char *v;
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
            return false;
        }
        cfg->port_low = (uint16_t)lo;
        cfg->port_high = (uint16_t)hi;
    }
    if (cfg->port_low == 0 || cfg->port_low > cfg->port_high) {
        snprintf(err, errlen, "ephemeral ports %u-%u: need 1 <= LO <= HI <= 65535", cfg->port_low,
                 cfg->port_high);
        return false;
    }
    return true;
}

/* Profile: the option, else SOFTNDK_PROFILE, else iwarp. */
static bool resolve_profile(const SOFTNDK_OPTIONS *opt, struct sndk_config *cfg, char *err,
                            size_t errlen)
{
    const char *v = opt->Profile ? opt->Profile : env("SOFTNDK_PROFILE");
    cfg->profile = 0;
    if (!v || !*v)
        return true;
    for (unsigned i = 0; i < PROFILE_COUNT; i++)
        if (strcasecmp(v, profiles[i].name) == 0) {
            cfg->profile = i;
            return true;
        }
    char list[160] = "";
    for (unsigned i = 0; i < PROFILE_COUNT; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 profiles[i].name);
    snprintf(err, errlen, "%s='%s': not a profile (%s)",
             opt->Profile ? "Profile" : "SOFTNDK_PROFILE", v, list);
    return false;
}

static bool size_known(ULONG size)
{
    static const size_t layouts[] = {SOFTNDK_OPTIONS_SIZE_V1, SOFTNDK_OPTIONS_SIZE_V2,
                                     SOFTNDK_OPTIONS_SIZE_V3, SOFTNDK_OPTIONS_SIZE_V4,
                                     SOFTNDK_OPTIONS_SIZE_V5, SOFTNDK_OPTIONS_SIZE_V6,
                                     SOFTNDK_OPTIONS_SIZE_V7};
    if (size > 4096)
        return false;
    if (size >= sizeof(SOFTNDK_OPTIONS))
        return true; /* the current layout, or a later, larger one */
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (size == layouts[i])
            return true;
    return false;
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
        if (!size_known(given->Size)) {
            snprintf(err, errlen,
                     "SOFTNDK_OPTIONS.Size %u is not sizeof(SOFTNDK_OPTIONS) (%zu, or %zu / %zu / "
                     "%zu / %zu / %zu / %zu / %zu for the earlier layouts)",
                     given->Size, sizeof(SOFTNDK_OPTIONS), (size_t)SOFTNDK_OPTIONS_SIZE_V1,
                     (size_t)SOFTNDK_OPTIONS_SIZE_V2, (size_t)SOFTNDK_OPTIONS_SIZE_V3,
                     (size_t)SOFTNDK_OPTIONS_SIZE_V4, (size_t)SOFTNDK_OPTIONS_SIZE_V5,
                     (size_t)SOFTNDK_OPTIONS_SIZE_V6, (size_t)SOFTNDK_OPTIONS_SIZE_V7);
            return STATUS_INVALID_PARAMETER;
        }
        memcpy(&copy, given, given->Size < sizeof copy ? given->Size : sizeof copy);
    }
    const SOFTNDK_OPTIONS *opt = &copy;

    if (!resolve_profile(opt, cfg, err, errlen))
        return STATUS_INVALID_PARAMETER;
    const struct sndk_profile *pr = &profiles[cfg->profile];
    for (size_t i = 0; i < SETTING_COUNT; i++)
        if (!resolve_setting(&settings[i], opt, pr, cfg, err, errlen))
            return STATUS_INVALID_PARAMETER;
    if (!resolve_ports(opt, cfg, err, errlen))
        return STATUS_INVALID_PARAMETER;
    cfg->crc_explicit = opt->Crc != SoftNdkCrcDefault || env("SOFTNDK_CRC") != NULL;

    /* Adapter limits: softndk's, the profile's over them, the explicit ones over both. */
    sndk_config_default_limits(&cfg->limits);
    cfg->flags_given = false;
    if (pr->limits &&
        !sndk_config_parse_limits(pr->limits, &cfg->limits, &cfg->flags_given, err, errlen))
        return STATUS_INVALID_PARAMETER; /* a bad built-in profile: caught by the unit test */
    const char *limits = opt->Limits ? opt->Limits : env("SOFTNDK_LIMITS");
    if (limits && !sndk_config_parse_limits(limits, &cfg->limits, &cfg->flags_given, err, errlen))
        return STATUS_INVALID_PARAMETER;

    /* Observability */
    if (!resolve_stat(opt->StatEndpoint, cfg, err, errlen) ||
        !resolve_file(opt->TraceFile, "SOFTNDK_TRACE", cfg->trace_path, sizeof cfg->trace_path,
                      err, errlen) ||
        !resolve_file(opt->PcapFile, "SOFTNDK_PCAP", cfg->pcap_path, sizeof cfg->pcap_path, err,
                      errlen))
        return STATUS_INVALID_PARAMETER;

    /* Fault injection: parsed last, so that nothing after it can fail and leak the rules. */
    const char *faults = opt->Faults ? opt->Faults : env("SOFTNDK_FAULTS");
    char ferr[200];
    if (!sndk_faults_parse(faults, &cfg->faults, ferr, sizeof ferr)) {
        snprintf(err, errlen, "%s: %s", opt->Faults ? "Faults" : "SOFTNDK_FAULTS", ferr);
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}
