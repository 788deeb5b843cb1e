/* Adapter: open/close, version negotiation (decision 2), options and SOFTNDK_* variables,
 * NdkQueryAdapterInfo, limits enforcement, NdkQueryExtension, status names, dispatch tables.
 * docs/ndk-rules.md#adp, #ext; docs/decisions.md 1, 2, 20 and "Adapter limits". */
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"

/* ---- version negotiation (decision 2) -------------------------------------------------- */

static void check_version(USHORT major, USHORT minor, NTSTATUS expect, USHORT run_minor)
{
    NDK_ADAPTER *a = (NDK_ADAPTER *)0x1;
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NTSTATUS st = SoftNdkOpenAdapter(0, conf_version(major, minor), &o, &a);
    CHECK_STATUS(st, expect);
    if (expect != STATUS_SUCCESS) {
        CHECK(a == NULL);
        return;
    }
    CHECK_EQ_U64(a->Header.Version.Major, major);
    CHECK_EQ_U64(a->Header.Version.Minor, run_minor);
    CHECK_EQ_U64(a->Header.ObjectType, NdkObjectTypeAdapter);
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.Version.Major, major);
    CHECK_EQ_U64(info.Version.Minor, run_minor);
    ndk_close_adapter(a);
}

TEST(adapter_version_1_0_runs_1_2) { check_version(1, 0, STATUS_SUCCESS, 2); }
TEST(adapter_version_1_1_runs_1_2) { check_version(1, 1, STATUS_SUCCESS, 2); }
TEST(adapter_version_1_2_ok) { check_version(1, 2, STATUS_SUCCESS, 2); }
TEST(adapter_version_1_3_bad) { check_version(1, 3, NDIS_STATUS_BAD_VERSION, 0); }
TEST(adapter_version_2_0_runs_2_1) { check_version(2, 0, STATUS_SUCCESS, 1); }
TEST(adapter_version_2_1_ok) { check_version(2, 1, STATUS_SUCCESS, 1); }
TEST(adapter_version_2_2_bad) { check_version(2, 2, NDIS_STATUS_BAD_VERSION, 0); }
TEST(adapter_version_0_x_bad)
{
    check_version(0, 0, NDIS_STATUS_BAD_VERSION, 0);
    check_version(0, 2, NDIS_STATUS_BAD_VERSION, 0);
}
TEST(adapter_version_3_0_bad) { check_version(3, 0, NDIS_STATUS_BAD_VERSION, 0); }
TEST(adapter_bad_version_status_value)
{
    /* NDIS_STATUS_BAD_VERSION is 0xC0010004 (decision 2). */
    CHECK_EQ_U64((uint32_t)NDIS_STATUS_BAD_VERSION, 0xC0010004u);
}

static void check_header(const NDK_OBJECT_HEADER *h, NDK_OBJECT_TYPE type, NDK_VERSION v)
{
    CHECK_EQ_U64(h->ObjectType, type);
    CHECK_EQ_U64(h->Version.Major, v.Major);
    CHECK_EQ_U64(h->Version.Minor, v.Minor);
    NDK_OBJECT_HEADER_RESERVED_BLOCK zero;
    memset(&zero, 0, sizeof zero);
    CHECK_MEM(&h->NdkReserved, &zero, sizeof zero);
}

/* Every object header carries the run version, its type, and a zeroed reserved block. */
static void headers_at(USHORT major, USHORT minor, USHORT run_minor)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(if_nametoindex("lo"), conf_version(major, minor), &o, &a),
                 STATUS_SUCCESS);
    NDK_VERSION run = conf_version(major, run_minor);
    check_header(&a->Header, NdkObjectTypeAdapter, run);
    NDK_PD *pd = conf_pd(a);
    check_header(&pd->Header, NdkObjectTypePd, run);
    struct conf_cq cq;
    conf_cq_create(a, &cq, 8);
    check_header(&cq.cq->Header, NdkObjectTypeCq, run);
    NDK_MR *mr = NULL, *fmr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    check_header(&mr->Header, NdkObjectTypeMr, run);
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, TRUE, ndk_create_never, NULL, &fmr), STATUS_SUCCESS);
    check_header(&fmr->Header, NdkObjectTypeMr, run);
    NDK_MW *mw = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
    check_header(&mw->Header, NdkObjectTypeMw, run);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    check_header(&srq->Header, NdkObjectTypeSrq, run);
    NDK_QP *qp = conf_qp(pd, cq.cq, cq.cq, NULL, 4);
    check_header(&qp->Header, NdkObjectTypeQp, run);
    NDK_QP *sqp = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateQpWithSrq(pd, cq.cq, cq.cq, srq, NULL, 4, 1, 0,
                                                  ndk_create_never, NULL, &sqp),
                 STATUS_SUCCESS);
    check_header(&sqp->Header, NdkObjectTypeQp, run);
    NDK_CONNECTOR *conn = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &conn), STATUS_SUCCESS);
    check_header(&conn->Header, NdkObjectTypeConnector, run);

    conf_close(&conn->Header);
    conf_close(&sqp->Header);
    conf_close(&qp->Header);
    conf_close(&srq->Header);
    conf_close(&mw->Header);
    conf_close(&fmr->Header);
    conf_close(&mr->Header);
    conf_close(&pd->Header);
    conf_cq_destroy(&cq);
    ndk_close_adapter(a);
}

TEST(adapter_object_headers_v1) { headers_at(1, 0, 2); }
TEST(adapter_object_headers_v2) { headers_at(2, 0, 1); }

/* ---- open arguments (decision 1) ------------------------------------------------------- */

TEST(adapter_open_ifindex_0)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_SUCCESS);
    ndk_close_adapter(a);
}

TEST(adapter_open_loopback_index)
{
    unsigned lo = if_nametoindex("lo");
    CHECK(lo != 0);
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(lo, conf_version(1, 0), &o, &a), STATUS_SUCCESS);
    ndk_close_adapter(a);
}

TEST(adapter_open_unknown_ifindex_not_found)
{
    /* Find an index no interface has. */
    ULONG idx = 0;
    char name[IF_NAMESIZE];
    for (ULONG i = 100000; i < 100100; i++)
        if (!if_indextoname(i, name)) {
            idx = i;
            break;
        }
    CHECK(idx != 0);
    NDK_ADAPTER *a = (NDK_ADAPTER *)0x1;
    CHECK_STATUS(SoftNdkOpenAdapter(idx, conf_version(1, 0), NULL, &a), STATUS_NOT_FOUND);
    CHECK(a == NULL);
}

TEST(adapter_open_null_out_pointer)
{
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), NULL, NULL), STATUS_INVALID_PARAMETER);
}

TEST(adapter_open_null_options_defaults)
{
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), NULL, &a), STATUS_SUCCESS);
    ndk_close_adapter(a);
}

/* ---- the CRC32c kernel (docs/wire.md, "CRC32c"): one per process, chosen at the first open -- */

static void crc_kernel_of(NDK_ADAPTER *a, const char **kernel, const char **why)
{
    SOFTNDK_SEMANTICS sem;
    memset(&sem, 0, sizeof sem);
    sem.Size = sizeof sem;
    CHECK_STATUS(SoftNdkQuerySemantics(a, &sem), STATUS_SUCCESS);
    CHECK_EQ_U64(sem.Size, sizeof sem);
    CHECK(sem.CrcKernel && sem.CrcKernelReason);
    *kernel = sem.CrcKernel;
    *why = sem.CrcKernelReason;
}

TEST(adapter_crc_kernel_reported)
{
    unsetenv("SOFTNDK_CRC_KERNEL");
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(2, 0), NULL, &a), STATUS_SUCCESS);
    const char *kernel, *why;
    crc_kernel_of(a, &kernel, &why);
    static const char *const names[] = {"avx512", "hybrid256", "vpclmul256", "hybrid128",
                                        "pclmul", "sse42",     "table"};
    int known = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        known |= strcmp(kernel, names[i]) == 0;
    CHECK_MSG(known, "CrcKernel %s", kernel);
    CHECK_MSG(strcmp(why, "forced by SOFTNDK_CRC_KERNEL") != 0 && why[0], "reason: %s", why);
    ndk_close_adapter(a);
}

TEST(adapter_crc_kernel_forced)
{
    setenv("SOFTNDK_CRC_KERNEL", "table", 1); /* every CPU runs the table */
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(2, 0), NULL, &a), STATUS_SUCCESS);
    const char *kernel, *why;
    crc_kernel_of(a, &kernel, &why);
    CHECK_MSG(strcmp(kernel, "table") == 0, "CrcKernel %s", kernel);
    CHECK_MSG(strcmp(why, "forced by SOFTNDK_CRC_KERNEL") == 0, "reason: %s", why);
    ndk_close_adapter(a);
}

TEST(adapter_crc_kernel_unknown_invalid)
{
    setenv("SOFTNDK_CRC_KERNEL", "avx1024", 1);
    NDK_ADAPTER *a = (NDK_ADAPTER *)0x1;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(2, 0), NULL, &a), STATUS_INVALID_PARAMETER);
    CHECK(a == NULL);
}

TEST(adapter_open_options_size_wrong)
{
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = NULL;
    o.Size = 0;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    o.Size = sizeof o - 1;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    o.Size = 8;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    o.Size = 0x10000;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    CHECK(a == NULL);
}

TEST(adapter_init_options_defaults)
{
    SOFTNDK_OPTIONS o;
    memset(&o, 0xAB, sizeof o);
    SoftNdkInitOptions(&o);
    CHECK_EQ_U64(o.Size, sizeof o);
    CHECK_EQ_U64(o.MpaRevision, 0);
    CHECK_EQ_U64(o.ProgressThreads, 0);
    CHECK(o.Limits == NULL);
    SoftNdkInitOptions(NULL); /* tolerated */
}

TEST(adapter_explicit_option_values_checked)
{
    SOFTNDK_OPTIONS o;
    NDK_ADAPTER *a = NULL;
    conf_options(&o);
    o.MpaRevision = 3;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.Crc = (SOFTNDK_CRC_POLICY)7;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.EphemeralPortLow = 60000;
    o.EphemeralPortHigh = 50000;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.ProgressThreads = 65;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.SpinMicroseconds = 1000001;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.LogLevel = (SOFTNDK_LOG_LEVEL)9;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    conf_options(&o);
    o.Limits = "MaxCqDepth=banana";
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(1, 0), &o, &a), STATUS_INVALID_PARAMETER);
    CHECK(a == NULL);
    /* SOFTNDK_SPIN_NONE is a valid explicit value. */
    conf_options(&o);
    o.SpinMicroseconds = SOFTNDK_SPIN_NONE;
    a = conf_open_with(&o);
    ndk_close_adapter(a);
}

/* ---- SOFTNDK_* environment variables ------------------------------------------------- */

/* Open with all-default options (NULL) under NAME=VALUE; env is per test process (forked). */
static NTSTATUS open_with_env(const char *name, const char *value)
{
    CHECK(setenv(name, value, 1) == 0);
    NDK_ADAPTER *a = (NDK_ADAPTER *)0x1;
    NTSTATUS st = SoftNdkOpenAdapter(0, conf_version(1, 0), NULL, &a);
    if (st == STATUS_SUCCESS)
        ndk_close_adapter(a);
    else
        CHECK(a == NULL);
    CHECK(unsetenv(name) == 0);
    return st;
}

#define ENV_BAD(name, value) CHECK_STATUS(open_with_env(name, value), STATUS_INVALID_PARAMETER)
#define ENV_OK(name, value)  CHECK_STATUS(open_with_env(name, value), STATUS_SUCCESS)

TEST(env_ephemeral_ports)
{
    ENV_OK("SOFTNDK_EPHEMERAL_PORTS", "50000-50010");
    ENV_OK("SOFTNDK_EPHEMERAL_PORTS", "50000-50000");
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "garbage");     /* garbage */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "50000");       /* no range */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "5x-6x");       /* not numbers */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "50000-70000"); /* out of range */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "0-100");       /* port 0 */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "60000-50000"); /* inverted range */
    ENV_BAD("SOFTNDK_EPHEMERAL_PORTS", "-5-10");       /* negative */
}

TEST(env_mpa_rev)
{
    ENV_OK("SOFTNDK_MPA_REV", "1");
    ENV_OK("SOFTNDK_MPA_REV", "2");
    ENV_BAD("SOFTNDK_MPA_REV", "garbage");
    ENV_BAD("SOFTNDK_MPA_REV", "3");
    ENV_BAD("SOFTNDK_MPA_REV", "0");
    ENV_BAD("SOFTNDK_MPA_REV", "2x");
}

TEST(env_crc)
{
    ENV_OK("SOFTNDK_CRC", "on");
    ENV_OK("SOFTNDK_CRC", "off");
    ENV_BAD("SOFTNDK_CRC", "garbage");
    ENV_BAD("SOFTNDK_CRC", "1");
}

TEST(env_threads)
{
    ENV_OK("SOFTNDK_THREADS", "2");
    ENV_BAD("SOFTNDK_THREADS", "garbage");
    ENV_BAD("SOFTNDK_THREADS", "0");
    ENV_BAD("SOFTNDK_THREADS", "65");
    ENV_BAD("SOFTNDK_THREADS", "-1");
}

TEST(env_log)
{
    ENV_OK("SOFTNDK_LOG", "error");
    ENV_OK("SOFTNDK_LOG", "warn");
    ENV_BAD("SOFTNDK_LOG", "garbage");
    ENV_BAD("SOFTNDK_LOG", "5");
}

TEST(env_spin_us)
{
    ENV_OK("SOFTNDK_SPIN_US", "0");
    ENV_OK("SOFTNDK_SPIN_US", "1000000");
    ENV_BAD("SOFTNDK_SPIN_US", "garbage");
    ENV_BAD("SOFTNDK_SPIN_US", "1000001");
    ENV_BAD("SOFTNDK_SPIN_US", "-1");
}

TEST(env_timeouts)
{
    static const char *const vars[] = {"SOFTNDK_CONNECT_TIMEOUT_MS",
                                       "SOFTNDK_DISCONNECT_TIMEOUT_MS"};
    for (int k = 0; k < 2; k++) {
        ENV_OK(vars[k], "500");
        ENV_BAD(vars[k], "garbage");
        ENV_BAD(vars[k], "0");
        ENV_BAD(vars[k], "-1");
        ENV_BAD(vars[k], "99999999999"); /* out of range */
    }
}

TEST(env_limits_malformed)
{
    ENV_OK("SOFTNDK_LIMITS", "MaxCqDepth=8");
    ENV_BAD("SOFTNDK_LIMITS", "garbage");                     /* not Name=value */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCqDepth=eight");            /* value not a number */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCqDepth=");                 /* empty value */
    ENV_BAD("SOFTNDK_LIMITS", "NoSuchLimit=1");               /* unknown limit name */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCqDepth=1048577");          /* above maximum (1 << 20) */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCallerData=253");           /* above maximum (252) */
    ENV_BAD("SOFTNDK_LIMITS", "FRMRPageCount=8");             /* below NDKPI's minimum 16 */
    ENV_BAD("SOFTNDK_LIMITS", "AdapterFlags=0x80000000");     /* flag softndk lacks */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCqDepth=8,Bogus=1");        /* second item bad */
    ENV_BAD("SOFTNDK_LIMITS", "MaxCqDepth=-1");               /* negative */
}

/* ---- limits from SOFTNDK_LIMITS: reported and enforced --------------------------------- */

static NDK_ADAPTER *open_env_limits(const char *limits)
{
    CHECK(setenv("SOFTNDK_LIMITS", limits, 1) == 0);
    return conf_open(); /* conf_options leaves Limits NULL: the variable applies */
}

TEST(limits_reported_in_adapter_info)
{
    NDK_ADAPTER *a = open_env_limits("MaxCqDepth=8,MaxReceiveQueueDepth=16,MaxSrqDepth=0x20,"
                                     "maxinitiatorrequestsge=3,MaxInlineDataSize=100");
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.MaxCqDepth, 8);
    CHECK_EQ_U64(info.MaxReceiveQueueDepth, 16);
    CHECK_EQ_U64(info.MaxSrqDepth, 32);
    CHECK_EQ_U64(info.MaxInitiatorRequestSge, 3);
    CHECK_EQ_U64(info.MaxInlineDataSize, 100);
    ndk_close_adapter(a);
}

TEST(limits_leading_zero_is_decimal)
{
    NDK_ADAPTER *a = open_env_limits("MaxCqDepth=010");
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.MaxCqDepth, 10);
    ndk_close_adapter(a);
}

TEST(limits_max_cq_depth_enforced)
{
    NDK_ADAPTER *a = open_env_limits("MaxCqDepth=8");
    NDK_CQ *cq = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateCq(a, 9, conf_cq_notify, NULL, NULL, ndk_create_never, NULL, &cq),
        STATUS_INVALID_PARAMETER);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 9, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(limits_qp_and_srq_enforced)
{
    NDK_ADAPTER *a = open_env_limits("MaxReceiveQueueDepth=16,MaxInitiatorQueueDepth=8,"
                                     "MaxReceiveRequestSge=2,MaxInitiatorRequestSge=3,"
                                     "MaxInlineDataSize=100,MaxSrqDepth=32");
    NDK_PD *pd = conf_pd(a);
    struct conf_cq c;
    conf_cq_create(a, &c, 64);
    NDK_QP *qp = NULL;
    NDK_FN_CREATE_QP cqp = pd->Dispatch->NdkCreateQp;
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 17, 8, 2, 3, 100, ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 16, 9, 2, 3, 100, ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 16, 8, 3, 3, 100, ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 16, 8, 2, 4, 100, ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 16, 8, 2, 3, 101, ndk_create_never, NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(cqp(pd, c.cq, c.cq, NULL, 16, 8, 2, 3, 100, ndk_create_never, NULL, &qp),
                 STATUS_SUCCESS);
    conf_close(&qp->Header);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 33, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_INVALID_PARAMETER);
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 32, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    CHECK_STATUS(srq->Dispatch->NdkModifySrq(srq, 33, 0, ndk_request_never, NULL),
                 STATUS_INVALID_PARAMETER);
    conf_close(&srq->Header);
    conf_close(&pd->Header);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(limits_frmr_page_count_enforced)
{
    NDK_ADAPTER *a = open_env_limits("FRMRPageCount=16");
    NDK_PD *pd = conf_pd(a);
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, TRUE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    CHECK_STATUS(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 17, TRUE, ndk_request_never, NULL),
                 STATUS_IMPLEMENTATION_LIMIT);
    CHECK_STATUS(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 16, TRUE, ndk_request_never, NULL),
                 STATUS_SUCCESS);
    conf_close(&mr->Header);
    conf_close(&pd->Header);
    ndk_close_adapter(a);
}

TEST(limits_no_resize_flag_resize_not_supported)
{
    NDK_ADAPTER *a = open_env_limits("AdapterFlags=0x4"); /* moderation only */
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, 0);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 16, ndk_request_never, NULL),
                 STATUS_NOT_SUPPORTED);
    CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, 10, 2), STATUS_SUCCESS);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(limits_no_moderation_flag_not_supported)
{
    NDK_ADAPTER *a = open_env_limits("AdapterFlags=0x100"); /* resize only */
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, 0);
    struct conf_cq c;
    conf_cq_create(a, &c, 8);
    CHECK_STATUS(c.cq->Dispatch->NdkControlCqInterruptModeration(c.cq, 10, 2),
                 STATUS_NOT_SUPPORTED);
    CHECK_STATUS(c.cq->Dispatch->NdkResizeCq(c.cq, 16, ndk_request_never, NULL), STATUS_SUCCESS);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(limits_adapter_flags_restriction_honoured_with_threads)
{
    /* "SOFTNDK_LIMITS may lower any of them, never raise one": AdapterFlags=0 must report no
     * flag, whatever the number of progress threads. */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    o.ProgressThreads = 2;
    o.Limits = "AdapterFlags=0";
    NDK_ADAPTER *a = conf_open_with(&o);
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_MSG(info.AdapterFlags == 0, "AdapterFlags=0 asked, 0x%x reported", info.AdapterFlags);
    ndk_close_adapter(a);
}

TEST(explicit_options_win_over_env)
{
    /* Every variable malformed: explicit options must not even look at them. */
    setenv("SOFTNDK_MPA_REV", "garbage", 1);
    setenv("SOFTNDK_CRC", "garbage", 1);
    setenv("SOFTNDK_EPHEMERAL_PORTS", "garbage", 1);
    setenv("SOFTNDK_THREADS", "garbage", 1);
    setenv("SOFTNDK_SPIN_US", "garbage", 1);
    setenv("SOFTNDK_LOG", "garbage", 1);
    setenv("SOFTNDK_LIMITS", "garbage", 1);
    setenv("SOFTNDK_CONNECT_TIMEOUT_MS", "garbage", 1);
    setenv("SOFTNDK_DISCONNECT_TIMEOUT_MS", "garbage", 1);
    SOFTNDK_OPTIONS o;
    conf_options(&o); /* sets the ports */
    o.MpaRevision = 1;
    o.Crc = SoftNdkCrcOff;
    o.ProgressThreads = 1;
    o.SpinMicroseconds = 10;
    o.LogLevel = SoftNdkLogError;
    o.Limits = "MaxCqDepth=16";
    o.ConnectTimeoutMs = 1000;
    o.DisconnectTimeoutMs = 1000;
    NDK_ADAPTER *a = conf_open_with(&o);
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.MaxCqDepth, 16);
    ndk_close_adapter(a);

    /* A well-formed variable loses to the explicit value too. */
    setenv("SOFTNDK_LIMITS", "MaxCqDepth=8", 1);
    o.Limits = "MaxCqDepth=32";
    a = conf_open_with(&o);
    conf_query(a, &info);
    CHECK_EQ_U64(info.MaxCqDepth, 32);
    ndk_close_adapter(a);

    /* ... and applies when the option is left at its default. */
    o.Limits = NULL;
    a = conf_open_with(&o);
    conf_query(a, &info);
    CHECK_EQ_U64(info.MaxCqDepth, 8);
    ndk_close_adapter(a);
}

/* ---- NdkQueryAdapterInfo ---------------------------------------------------------------- */

TEST(query_adapter_info_buffer_protocol)
{
    NDK_ADAPTER *a = conf_open();
    NDK_FN_QUERY_ADAPTER_INFO q = a->Dispatch->NdkQueryAdapterInfo;
    ULONG size = 0;
    CHECK_STATUS(q(a, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(size, 0x68);
    NDK_ADAPTER_INFO info;
    memset(&info, 0x5A, sizeof info);
    NDK_ADAPTER_INFO untouched;
    memcpy(&untouched, &info, sizeof info);
    size = 0x67;
    CHECK_STATUS(q(a, &info, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(size, 0x68);
    CHECK_MEM(&info, &untouched, sizeof info);
    size = 1000; /* NULL buffer with a large size is still too small */
    CHECK_STATUS(q(a, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(size, 0x68);
    size = 0x68;
    CHECK_STATUS(q(a, &info, &size), STATUS_SUCCESS);
    CHECK_EQ_U64(size, 0x68);
    CHECK_STATUS(q(a, &info, NULL), STATUS_INVALID_PARAMETER);
    /* a larger buffer is fine and reports the bytes written */
    struct {
        NDK_ADAPTER_INFO info;
        char tail[32];
    } big;
    size = sizeof big;
    CHECK_STATUS(q(a, &big.info, &size), STATUS_SUCCESS);
    CHECK_EQ_U64(size, 0x68);
    ndk_close_adapter(a);
}

TEST(query_adapter_info_honest_limits)
{
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER_INFO info;
    conf_query(a, &info);
    CHECK_EQ_U64(info.Version.Major, 2);
    CHECK_EQ_U64(info.Version.Minor, 1);
    CHECK(info.FRMRPageCount >= 16);
    CHECK_EQ_U64(info.FRMRPageCount, 4096); /* decision 7 */
    CHECK_EQ_U64(info.MaxCallerData, 252);
    CHECK_EQ_U64(info.MaxCalleeData, 252);
    CHECK_EQ_U64(info.RdmaTechnology, NdkiWarp);
    CHECK(info.MaxCqDepth > 0);
    CHECK(info.MaxReceiveQueueDepth > 0 && info.MaxInitiatorQueueDepth > 0);
    CHECK(info.MaxSrqDepth > 0);
    CHECK(info.MaxInitiatorRequestSge > 0 && info.MaxReceiveRequestSge > 0);
    CHECK(info.MaxReadRequestSge > 0);
    CHECK(info.MaxRegistrationSize > 0 && info.MaxWindowSize > 0);
    CHECK(info.MaxTransferLength > 0);
    /* decisions 20 and 21: moderation, resize and read-local-invalidate are advertised */
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED);
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED);
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED);
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED);
    ndk_close_adapter(a);
}

/* ---- NdkQueryExtension on every object type -------------------------------------------- */

TEST(query_extension_not_supported_everywhere)
{
    NDK_ADAPTER *a = conf_open();
    GUID g = {0x12345678, 0x1234, 0x5678, {1, 2, 3, 4, 5, 6, 7, 8}};
    NDK_VERSION v = conf_version(1, 0);
    NDK_EXTENSION_INTERFACE ext;
#define QE(obj)                                                                                    \
    do {                                                                                           \
        ext.Dispatch = (const void *)0x1;                                                          \
        CHECK_STATUS((obj)->Dispatch->NdkQueryExtension(&(obj)->Header, &g, v, &ext),              \
                     STATUS_NOT_SUPPORTED);                                                        \
    } while (0)
    QE(a);
    NDK_PD *pd = conf_pd(a);
    QE(pd);
    struct conf_cq c;
    conf_cq_create(a, &c, 4);
    QE(c.cq);
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    QE(mr);
    NDK_MW *mw = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
    QE(mw);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    QE(srq);
    NDK_QP *qp = conf_qp(pd, c.cq, c.cq, NULL, 2);
    QE(qp);
    NDK_CONNECTOR *conn = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &conn), STATUS_SUCCESS);
    QE(conn);
    NDK_LISTENER *l = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    QE(l);
#undef QE
    conf_close(&l->Header);
    conf_close(&conn->Header);
    conf_close(&qp->Header);
    conf_close(&srq->Header);
    conf_close(&mw->Header);
    conf_close(&mr->Header);
    conf_close(&pd->Header);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

/* ---- SoftNdkStatusName ------------------------------------------------------------------ */

TEST(status_names)
{
    CHECK(strcmp(SoftNdkStatusName(STATUS_SUCCESS), "STATUS_SUCCESS") == 0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_PENDING), "STATUS_PENDING") == 0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_CONNECTION_INVALID), "STATUS_CONNECTION_INVALID") == 0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_BUFFER_OVERFLOW), "STATUS_BUFFER_OVERFLOW") == 0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_CANCELLED), "STATUS_CANCELLED") == 0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_IMPLEMENTATION_LIMIT), "STATUS_IMPLEMENTATION_LIMIT") ==
          0);
    CHECK(strcmp(SoftNdkStatusName(STATUS_INVALID_PARAMETER_MIX),
                 "STATUS_INVALID_PARAMETER_MIX") == 0);
    CHECK(strcmp(SoftNdkStatusName(NDIS_STATUS_BAD_VERSION), "NDIS_STATUS_BAD_VERSION") == 0);
    const char *u = SoftNdkStatusName((NTSTATUS)0xC0001234);
    CHECK(u != NULL);
    CHECK_MSG(strcmp(u, "STATUS_0xC0001234") == 0, "unknown status named '%s'", u);
    CHECK(strcmp(SoftNdkVersionString(), "") != 0);
}

/* ---- dispatch tables: every slot non-NULL ----------------------------------------------- */

static void check_table(const void *table, size_t size, const char *what)
{
    const void *const *slot = table;
    for (size_t i = 0; i < size / sizeof(void *); i++)
        CHECK_MSG(slot[i] != NULL, "%s slot %zu is NULL", what, i);
}
#define CHECK_TABLE(obj) check_table((obj)->Dispatch, sizeof *(obj)->Dispatch, #obj)

TEST(dispatch_tables_complete)
{
    NDK_ADAPTER *a = conf_open();
    CHECK_TABLE(a);
    NDK_PD *pd = conf_pd(a);
    CHECK_TABLE(pd);
    struct conf_cq c;
    conf_cq_create(a, &c, 4);
    NDK_CQ *cq = c.cq;
    CHECK_TABLE(cq);
    NDK_MR *mr = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMr(pd, TRUE, ndk_create_never, NULL, &mr), STATUS_SUCCESS);
    CHECK_TABLE(mr);
    NDK_MW *mw = NULL;
    CHECK_STATUS(pd->Dispatch->NdkCreateMw(pd, ndk_create_never, NULL, &mw), STATUS_SUCCESS);
    CHECK_TABLE(mw);
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(
        pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, ndk_create_never, NULL, &srq),
        STATUS_SUCCESS);
    CHECK_TABLE(srq);
    NDK_QP *qp = conf_qp(pd, cq, cq, NULL, 2);
    CHECK_TABLE(qp);
    NDK_CONNECTOR *conn = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &conn), STATUS_SUCCESS);
    CHECK_TABLE(conn);
    NDK_LISTENER *l = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    CHECK_TABLE(l);
    conf_close(&l->Header);
    conf_close(&conn->Header);
    conf_close(&qp->Header);
    conf_close(&srq->Header);
    conf_close(&mw->Header);
    conf_close(&mr->Header);
    conf_close(&pd->Header);
    conf_cq_destroy(&c);
    ndk_close_adapter(a);
}

TEST(adapters_coexist)
{
    conf_breaks_rules("handle_invalid: a CQ of another adapter, on purpose");
    /* [ADP-5]: several adapters, each with its own object tree; adapters of two interfaces are
     * two devices (instances of one interface share: connect.c instances_of_one_interface_*). */
    NDK_ADAPTER *a = conf_open();
    NDK_ADAPTER *b = conf_open_other_device();
    CHECK(a != b);
    NDK_PD *pa = conf_pd(a);
    NDK_PD *pb = conf_pd(b);
    struct conf_cq ca;
    conf_cq_create(a, &ca, 4);
    /* A CQ of device a cannot feed a QP of device b. */
    NDK_QP *qp = NULL;
    CHECK_STATUS(pb->Dispatch->NdkCreateQp(pb, ca.cq, ca.cq, NULL, 2, 2, 1, 1, 0, ndk_create_never,
                                           NULL, &qp),
                 STATUS_INVALID_PARAMETER);
    conf_close(&pb->Header);
    ndk_close_adapter(b);
    conf_close(&pa->Header);
    conf_cq_destroy(&ca);
    ndk_close_adapter(a);
}

/* ---- the same-host copy (docs/transport-shm.md, "One copy"): one per process ---- */

static void shm_copy_of(const char **copy, const char **why)
{
    NDK_ADAPTER *a = NULL;
    CHECK_STATUS(SoftNdkOpenAdapter(0, conf_version(2, 0), NULL, &a), STATUS_SUCCESS);
    SOFTNDK_SEMANTICS sem;
    memset(&sem, 0, sizeof sem);
    sem.Size = sizeof sem;
    CHECK_STATUS(SoftNdkQuerySemantics(a, &sem), STATUS_SUCCESS);
    CHECK(sem.SameHostCopy && sem.SameHostCopyReason);
    *copy = sem.SameHostCopy;
    *why = sem.SameHostCopyReason;
    ndk_close_adapter(a);
}

/* Measured: one or staged, and the reason gives both copies' GB/s (or says cross-memory attach
 * is refused here). */
TEST(adapter_same_host_copy_measured)
{
    unsetenv("SOFTNDK_SHM_COPY");
    const char *copy, *why;
    shm_copy_of(&copy, &why);
    CHECK_MSG(strcmp(copy, "one") == 0 || strcmp(copy, "staged") == 0, "SameHostCopy %s", copy);
    CHECK_MSG(strstr(why, "cross-memory attach") != NULL, "reason: %s", why);
}

TEST(adapter_same_host_copy_forced)
{
    setenv("SOFTNDK_SHM_COPY", "staged", 1);
    const char *copy, *why;
    shm_copy_of(&copy, &why);
    CHECK_MSG(strcmp(copy, "staged") == 0, "SameHostCopy %s", copy);
    CHECK_MSG(strcmp(why, "forced by SOFTNDK_SHM_COPY=staged") == 0, "reason: %s", why);
}
