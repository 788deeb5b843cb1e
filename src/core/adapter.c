/* Adapter: SoftNdkOpenAdapter / SoftNdkCloseAdapter, NdkQueryAdapterInfo, version negotiation
 * (docs/ndk-rules.md [ADP-4]). */
#include "core/create.h"
#include "datapath/stream.h"
#include "device/cq.h"
#include "device/adapter_state.h"

#include "faults/faults.h"
#include "iwarp/crc32c.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "observe/stat.h"
#include "verify/verify.h"
#include "util/log.h"
#include "observe/pcap.h"
#include "observe/trace.h"

static atomic_uint adapter_seq;

/* The device behind every adapter instance opened on one interface: what an RNIC's instances
 * share (docs/adapter.md, "Instances of one interface"). Created by the first open on the
 * interface, with that open's progress-thread options; destroyed when the last instance closes. */
struct sndk_device {
    struct sndk_device *next; /* devices_lock */
    ULONG if_index;
    unsigned instances;        /* devices_lock: adapter instances that hold the device */
    unsigned threads, spin_us, progress_cpu; /* what the engine was created with */
    struct sndk_engine *engine;
    struct sndk_stag_table stags;
};

static struct sndk_mutex devices_lock = SNDK_MUTEX_INITIALIZER(SNDK_LOCK_DEVICES);
static struct sndk_device *devices; /* devices_lock */

/* The device of if_index, created on first use; NULL with *st set on failure. */
static struct sndk_device *device_acquire(ULONG if_index, const struct sndk_config *cfg,
                                          NTSTATUS *st)
{
    sndk_mutex_lock(&devices_lock);
    struct sndk_device *d = devices;
    while (d && d->if_index != if_index)
        d = d->next;
    if (d) {
        d->instances++;
        sndk_mutex_unlock(&devices_lock);
        if (cfg->threads != d->threads || cfg->spin_us != d->spin_us ||
            cfg->progress_cpu != d->progress_cpu)
            sndk_info("adapter",
                      "if %u: another instance of the device: its %u progress "
                      "thread(s) serve this one (asked %u)",
                      if_index, d->threads, cfg->threads);
        return d;
    }
    d = calloc(1, sizeof *d);
    if (!d || !sndk_stag_table_init(&d->stags)) {
        free(d);
        sndk_mutex_unlock(&devices_lock);
        *st = STATUS_INSUFFICIENT_RESOURCES;
        return NULL;
    }
    struct sndk_engine_options eo;
    sndk_engine_options_default(&eo);
    eo.threads = cfg->threads;
    eo.spin_us = cfg->spin_us;
    eo.follow_waiters = cfg->progress_cpu == SNDK_PROGRESS_CPU_FOLLOW;
    eo.name = "sndk";
    int rc = sndk_engine_create(&eo, &d->engine);
    if (rc != 0) {
        sndk_err("adapter", "cannot start progress threads: %s", strerror(-rc));
        sndk_stag_table_destroy(&d->stags);
        free(d);
        sndk_mutex_unlock(&devices_lock);
        *st = STATUS_INSUFFICIENT_RESOURCES;
        return NULL;
    }
    d->if_index = if_index;
    d->instances = 1;
    d->threads = cfg->threads;
    d->spin_us = cfg->spin_us;
    d->progress_cpu = cfg->progress_cpu;
    d->next = devices;
    devices = d;
    sndk_mutex_unlock(&devices_lock);
    return d;
}

/* An instance lets go of its device; the last one destroys it. Every object of the instance is
 * gone, but objects of other instances may still run on the engine. */
static void device_release(struct sndk_device *d)
{
    sndk_mutex_lock(&devices_lock);
    bool last = --d->instances == 0;
    if (last) {
        struct sndk_device **pp = &devices;
        while (*pp != d)
            pp = &(*pp)->next;
        *pp = d->next;
    }
    sndk_mutex_unlock(&devices_lock);
    if (!last)
        return;
    /* The engine may still be returning from the last close work. */
    sndk_engine_destroy(d->engine);
    sndk_stag_table_destroy(&d->stags);
    free(d);
}

static NTSTATUS query_adapter_info(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo,
                                   ULONG *pBufferSize);

static const NDK_ADAPTER_DISPATCH adapter_dispatch = {
    .NdkQueryExtension = sndk_obj_query_extension,
    .NdkQueryAdapterInfo = query_adapter_info,
    .NdkCreateCq = sndk_cq_create,
    .NdkCreatePd = sndk_pd_create,
    .NdkCreateSharedEndpoint = sndk_endpoint_create,
    .NdkCreateConnector = sndk_connector_create,
    .NdkCreateListener = sndk_listener_create,
    .NdkBuildLAM = sndk_lam_build,
    .NdkReleaseLAM = sndk_lam_release,
};

/* The adapter's last reference went: its close is waiting for that. */
static void adapter_released(struct sndk_obj *o)
{
    struct sndk_adapter *a = sndk_container_of(o, struct sndk_adapter, base);
    sndk_mutex_lock(&a->lock);
    a->released = true;
    sndk_cond_broadcast(&a->released_cond);
    sndk_mutex_unlock(&a->lock);
}

static const struct sndk_obj_ops adapter_ops = {.type = NdkObjectTypeAdapter,
                                                .last_ref = adapter_released};

static void track(struct sndk_obj_tracker *t, struct sndk_obj *o)
{
    struct sndk_adapter *a = sndk_container_of(t, struct sndk_adapter, objects);
    sndk_mutex_lock(&a->lock);
    o->live_prev = NULL;
    o->live_next = a->live;
    if (a->live)
        a->live->live_prev = o;
    a->live = o;
    a->live_count[o->ops->type]++;
    sndk_mutex_unlock(&a->lock);
}

static void untrack(struct sndk_obj_tracker *t, struct sndk_obj *o)
{
    struct sndk_adapter *a = sndk_container_of(t, struct sndk_adapter, objects);
    sndk_mutex_lock(&a->lock);
    if (o->live_prev)
        o->live_prev->live_next = o->live_next;
    else
        a->live = o->live_next;
    if (o->live_next)
        o->live_next->live_prev = o->live_prev;
    a->live_count[o->ops->type]--;
    sndk_mutex_unlock(&a->lock);
}

/* [ADP-4]: Major must be known; the consumer's Minor is the lowest it accepts; we run at our
 * highest minor of that major. */
static bool negotiate_version(NDK_VERSION asked, NDK_VERSION *run)
{
    unsigned max_minor;
    if (asked.Major == 1)
        max_minor = SOFTNDK_NDK_VERSION_1_MAX_MINOR;
    else if (asked.Major == 2)
        max_minor = SOFTNDK_NDK_VERSION_2_MAX_MINOR;
    else
        return false;
    if (asked.Minor > max_minor)
        return false;
    run->Major = asked.Major;
    run->Minor = (USHORT)max_minor;
    return true;
}

VOID SoftNdkInitOptions(SOFTNDK_OPTIONS *Options)
{
    if (!Options)
        return;
    memset(Options, 0, sizeof *Options);
    Options->Size = sizeof *Options;
}

NTSTATUS SoftNdkOpenAdapter(ULONG IfIndex, NDK_VERSION Version, const SOFTNDK_OPTIONS *Options,
                            NDK_ADAPTER **ppNdkAdapter)
{
    sndk_verify_not_from_callback("SoftNdkOpenAdapter (OPEN_NDK_ADAPTER_HANDLER)",
                                  "opening an adapter runs at PASSIVE_LEVEL and may block, "
                                  "callbacks at DISPATCH_LEVEL (softndk still opens it)");
    if (!ppNdkAdapter)
        return STATUS_INVALID_PARAMETER;
    *ppNdkAdapter = NULL;
    NDK_VERSION run;
    if (!negotiate_version(Version, &run)) {
        sndk_err("adapter", "NDKPI version %u.%u not offered (1.0-1.%d, 2.0-2.%d)", Version.Major,
                 Version.Minor, SOFTNDK_NDK_VERSION_1_MAX_MINOR, SOFTNDK_NDK_VERSION_2_MAX_MINOR);
        return NDIS_STATUS_BAD_VERSION;
    }
    struct sndk_config cfg;
    char err[256];
    NTSTATUS st = sndk_config_resolve(Options, &cfg, err, sizeof err);
    if (st != STATUS_SUCCESS) {
        sndk_err("adapter", "%s", err);
        return st;
    }
    /* The most verbose level asked for by any adapter wins: the log is per process. */
    enum sndk_log_level level = (enum sndk_log_level)(cfg.log_level - SoftNdkLogError);
    if (level > sndk_log_get_level())
        sndk_log_set_level(level);
    /* The CRC32c kernel is chosen once per process (iwarp/crc32c.h), here at the first open rather
     * than at the first FPDU, so the brief measurement stays off the data path and a
     * SOFTNDK_CRC_KERNEL that cannot be followed fails the open like any other bad setting. */
    int crc_env = sndk_crc32c_env_status();
    if (crc_env != 0) {
        sndk_err("adapter",
                 "SOFTNDK_CRC_KERNEL=%s: %s (avx512, hybrid256, vpclmul256, hybrid128, pclmul, "
                 "sse42, table or auto)",
                 getenv("SOFTNDK_CRC_KERNEL"),
                 crc_env == -EINVAL ? "no such CRC32c kernel" : "this CPU cannot run that kernel");
        sndk_faults_free(cfg.faults);
        return STATUS_INVALID_PARAMETER;
    }

    char ifname[IF_NAMESIZE] = "*";
    if (IfIndex != 0 && !if_indextoname(IfIndex, ifname)) {
        sndk_err("adapter", "no network interface has index %u", IfIndex);
        sndk_faults_free(cfg.faults);
        return STATUS_NOT_FOUND;
    }

    struct sndk_adapter *a = calloc(1, sizeof *a);
    if (!a) {
        sndk_faults_free(cfg.faults);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    a->faults = cfg.faults;
    if (a->faults) {
        a->faults->ctrs = &a->ctrs; /* the rules count their firings in this adapter's counters */
        sndk_info("adapter", "fault injection: %u rule(s), seed %llu", a->faults->n,
                  (unsigned long long)a->faults->seed);
    }
    a->version = run;
    a->if_index = IfIndex;
    a->cfg = cfg;
    a->info = cfg.limits;
    a->info.Version = run;
    sndk_mutex_init_ranked(&a->lock, SNDK_LOCK_ADAPTER);
    sndk_cond_init(&a->released_cond); /* CLOCK_MONOTONIC deadlines */
    a->dev = device_acquire(IfIndex, &cfg, &st);
    if (!a->dev)
        goto fail_device;
    a->engine = a->dev->engine;
    a->stags = &a->dev->stags;
    /* Connections spread over several progress threads are served concurrently; an explicit
     * AdapterFlags limit is taken as it is. The threads are the device's (its first open's). */
    if (a->dev->threads > 1 && !cfg.flags_given)
        a->info.AdapterFlags |= NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED;
    a->root = (struct sndk_obj_root){.version = run,
                                     .engine = a->engine,
                                     .device = a->dev,
                                     .verify = {.mode = cfg.verify,
                                                .callback_ms = cfg.verify_callback_ms,
                                                .violations = a->ctrs.verify}};
    sndk_obj_init_root(&a->base, a, &a->root, &adapter_ops, &adapter_dispatch);
    /* from now on, not before: the adapter is the root, not on its own list */
    a->objects = (struct sndk_obj_tracker){.track = track, .untrack = untrack};
    a->root.tracker = &a->objects;
    a->seq = atomic_fetch_add(&adapter_seq, 1);
    clock_gettime(CLOCK_MONOTONIC, &a->opened);
    sndk_counters_init(&a->ctrs);
    int rc;
    if (cfg.trace_path[0]) {
        rc = sndk_trace_acquire(cfg.trace_path);
        if (rc != 0) {
            sndk_err("adapter", "SOFTNDK_TRACE: cannot open %s: %s", cfg.trace_path, strerror(-rc));
            st = STATUS_INVALID_PARAMETER;
            goto fail_obs;
        }
        a->trace = true;
    }
    if (cfg.pcap_path[0]) {
        a->pcap = sndk_pcap_acquire(cfg.pcap_path);
        if (!a->pcap) {
            sndk_err("adapter", "SOFTNDK_PCAP: cannot open %s: %s", cfg.pcap_path, strerror(errno));
            st = STATUS_INVALID_PARAMETER;
            goto fail_obs;
        }
    }
    if (cfg.stat) {
        const struct sndk_stat_where where = {
            .path = cfg.stat_path, .seq = a->seq, .engine = a->engine, .ctrs = &a->ctrs};
        rc = sndk_stat_open(&where, sndk_adapter_snapshot, a, &a->stat);
    } else {
        rc = 0;
    }
    if (rc != 0) {
        sndk_err("adapter", "SOFTNDK_STAT: cannot open the control endpoint: %s", strerror(-rc));
        st = STATUS_INVALID_PARAMETER;
        goto fail_obs;
    }
    SNDK_TRACE("adapter.open", "adapter", a,
               "\"if\":%u,\"ndk\":\"%u.%u\",\"mpa_rev\":%u,\"crc\":%s,\"crc_kernel\":\"%s\","
               "\"threads\":%u,\"stat\":\"%s\",\"pcap\":\"%s\"",
               IfIndex, run.Major, run.Minor, cfg.mpa_revision, cfg.crc ? "true" : "false",
               sndk_crc32c_impl_name(sndk_crc32c_current()), cfg.threads,
               a->stat ? sndk_stat_path(a->stat) : "", cfg.pcap_path);
    sndk_info("adapter",
              "open on %s (if %u), NDKPI %u.%u, MPA rev %u, CRC %s, %u thread(s); CRC32c kernel %s "
              "(%s)",
              ifname, IfIndex, run.Major, run.Minor, cfg.mpa_revision, cfg.crc ? "on" : "off",
              cfg.threads, sndk_crc32c_impl_name(sndk_crc32c_current()), sndk_crc32c_reason());
    *ppNdkAdapter = &a->base.pub.adapter;
    return STATUS_SUCCESS;

fail_obs:
    sndk_pcap_release(a->pcap);
    if (a->trace)
        sndk_trace_release();
    sndk_counters_destroy(&a->ctrs);
    device_release(a->dev);
fail_device:
    sndk_faults_free(a->faults);
    sndk_cond_destroy(&a->released_cond);
    sndk_mutex_destroy(&a->lock);
    free(a);
    return st;
}

static void log_still_open(struct sndk_adapter *a)
{
    char line[512];
    size_t n = 0;
    for (int t = 0; t < NdkObjectTypeMax; t++)
        if (a->live_count[t] && n < sizeof line)
            n += (size_t)snprintf(line + n, sizeof line - n, " %u %s", a->live_count[t],
                                  sndk_obj_type_name((NDK_OBJECT_TYPE)t));
    sndk_warn("adapter", "SoftNdkCloseAdapter waits for objects still open:%s",
              n ? line : " (closes in progress)");
}

VOID SoftNdkCloseAdapter(NDK_ADAPTER *pNdkAdapter)
{
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a) {
        sndk_err("adapter", "SoftNdkCloseAdapter(%p): not an adapter", (void *)pNdkAdapter);
        return;
    }
    if (sndk_engine_on_progress_thread(a->engine)) {
        sndk_verify_not_from_callback("SoftNdkCloseAdapter (CLOSE_NDK_ADAPTER_HANDLER)",
                                      "adapter close blocks until every callback returned and "
                                      "is never called from one (softndk refuses it)");
        sndk_err("adapter", "SoftNdkCloseAdapter called from a callback: refused (it would wait "
                            "for itself)");
        return;
    }
    int expected = SNDK_OBJ_OPEN;
    if (!atomic_compare_exchange_strong(&a->base.state, &expected, SNDK_OBJ_CLOSING)) {
        sndk_err("adapter", "adapter %p closed twice", (void *)a);
        return;
    }
    SNDK_TRACE("adapter.close", "adapter", a, NULL);
    /* ndkstat first: it reads the adapter without a reference */
    sndk_stat_close(a->stat);
    a->stat = NULL;
    sndk_obj_put(&a->base); /* the open reference */
    sndk_mutex_lock(&a->lock);
    while (!a->released) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 10;
        if (sndk_cond_timedwait(&a->released_cond, &a->lock, &deadline) == ETIMEDOUT &&
            !a->released)
            log_still_open(a);
    }
    sndk_mutex_unlock(&a->lock);
    sndk_verify_summary(&a->root.verify, a);
    /* Every object of this instance is gone; the device goes with its last instance. */
    device_release(a->dev);
    sndk_counters_destroy(&a->ctrs);
    sndk_pcap_release(a->pcap);
    if (a->trace)
        sndk_trace_release();
    sndk_faults_free(a->faults);
    sndk_cond_destroy(&a->released_cond);
    sndk_mutex_destroy(&a->lock);
    a->base.magic = 0;
    free(a);
}

static NTSTATUS query_adapter_info(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo,
                                   ULONG *pBufferSize)
{
    /* PASSIVE_LEVEL and blocking on Windows: softndk answers, the verifier names the call. */
    sndk_verify_not_from_callback("NdkQueryAdapterInfo",
                                  "it runs at PASSIVE_LEVEL and may block, callbacks at "
                                  "DISPATCH_LEVEL (softndk still answers)");
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !pBufferSize)
        return STATUS_INVALID_PARAMETER;
    if (!pInfo || *pBufferSize < sizeof(NDK_ADAPTER_INFO)) {
        *pBufferSize = sizeof(NDK_ADAPTER_INFO);
        return STATUS_BUFFER_TOO_SMALL;
    }
    *pInfo = a->info;
    *pBufferSize = sizeof(NDK_ADAPTER_INFO);
    return STATUS_SUCCESS;
}

NTSTATUS SoftNdkQueryCounters(NDK_ADAPTER *pNdkAdapter, SOFTNDK_COUNTERS *Counters)
{
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !Counters || Counters->Size < offsetof(SOFTNDK_COUNTERS, CrcErrors))
        return STATUS_INVALID_PARAMETER;
    sndk_counters_read(&a->ctrs, Counters);
    return STATUS_SUCCESS;
}

NTSTATUS SoftNdkQuerySemantics(NDK_ADAPTER *pNdkAdapter, SOFTNDK_SEMANTICS *Semantics)
{
    struct sndk_adapter *a = sndk_adapter_from(pNdkAdapter);
    if (!a || !Semantics || Semantics->Size < offsetof(SOFTNDK_SEMANTICS, Profile))
        return STATUS_INVALID_PARAMETER;
    const char *copy_why = NULL;
    bool one_copy = sndk_stream_shm_one_copy(&copy_why);
    SOFTNDK_SEMANTICS s = {
        .Size = sizeof s,
        .RnrWaitMs = a->cfg.rnr_wait_ms,
        .WriteCompletion = (SOFTNDK_WRITE_COMPLETION)a->cfg.write_completion,
        .Profile = sndk_config_profile_name(a->cfg.profile),
        .Family = sndk_config_profile_family(a->cfg.profile),
        .CrcKernel = sndk_crc32c_impl_name(sndk_crc32c_current()),
        .CrcKernelReason = sndk_crc32c_reason(),
        .SameHostCopy = one_copy ? "one" : "staged",
        .SameHostCopyReason = copy_why,
    };
    ULONG size = Semantics->Size < sizeof s ? Semantics->Size : (ULONG)sizeof s;
    s.Size = size;
    memcpy(Semantics, &s, size);
    return STATUS_SUCCESS;
}
