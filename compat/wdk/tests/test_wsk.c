/* WSK registration and the NDK extension, on softndk's loopback adapter. */
#include "wdk_test.h"
#include "wskndk.h"

#include <net/if.h>

static const WSK_CLIENT_DISPATCH client_dispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};

TEST(wdk_wsk_open_and_close_ndk_adapter)
{
    WSK_REGISTRATION reg;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    WSK_PROVIDER_NDK_DISPATCH ndk;
    SIZE_T returned = 0;

    WSK_CLIENT_DISPATCH v2 = {MAKE_WSK_VERSION(2, 0), 0, NULL};
    WSK_CLIENT_NPI npi2 = {NULL, &v2};
    CHECK_EQ_I64(WskRegister(&npi2, &reg), STATUS_NOINTERFACE);

    CHECK_EQ_I64(WskRegister(&npi, &reg), STATUS_SUCCESS);
    CHECK_EQ_U64(SoftNdkWdkQueryWskRegistrations(), 1);
    CHECK_EQ_I64(WskCaptureProviderNPI(&reg, WSK_INFINITE_WAIT, &provider), STATUS_SUCCESS);
    CHECK(provider.Client && provider.Dispatch && provider.Dispatch->WskControlClient);
    CHECK_EQ_U64(WSK_MAJOR_VERSION(provider.Dispatch->Version), 1);

    PFN_WSK_CONTROL_CLIENT control = provider.Dispatch->WskControlClient;
    CHECK_EQ_I64(control(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
                         sizeof(void *), &ndk, &returned, NULL),
                 STATUS_INVALID_PARAMETER); /* the table, not a pointer to it */
    CHECK_EQ_I64(control(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
                         sizeof ndk, &ndk, &returned, (PIRP)&returned),
                 STATUS_NOT_SUPPORTED);
    CHECK_EQ_I64(control(provider.Client, 0x12345678, 0, NULL, 0, NULL, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(control(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
                         sizeof ndk, &ndk, &returned, NULL),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(returned, sizeof ndk);
    /* WSK sockets: what is not a TCP connection or listen socket is refused through the IRP */
    PIRP irp = IoAllocateIrp(1, FALSE);
    CHECK(irp != NULL);
    CHECK_EQ_I64(provider.Dispatch->WskSocket(provider.Client, AF_INET, SOCK_STREAM, 0,
                                              WSK_FLAG_BASIC_SOCKET, NULL, NULL, NULL, NULL, NULL,
                                              irp),
                 STATUS_NOT_SUPPORTED);
    CHECK_EQ_I64(irp->IoStatus.Status, STATUS_NOT_SUPPORTED);
    IoReuseIrp(irp, STATUS_UNSUCCESSFUL);
    CHECK_EQ_I64(provider.Dispatch->WskSocket(provider.Client, AF_INET, SOCK_DGRAM, IPPROTO_UDP,
                                              WSK_FLAG_CONNECTION_SOCKET, NULL, NULL, NULL, NULL,
                                              NULL, irp),
                 STATUS_INVALID_PARAMETER);
    IoReuseIrp(irp, STATUS_UNSUCCESSFUL);
    CHECK_EQ_I64(provider.Dispatch->WskSocket(provider.Client, 99, SOCK_STREAM, 0,
                                              WSK_FLAG_CONNECTION_SOCKET, NULL, NULL, NULL, NULL,
                                              NULL, irp),
                 STATUS_INVALID_PARAMETER);
    IoFreeIrp(irp);

    NDK_ADAPTER *adapter = NULL;
    NDK_VERSION bad = {3, 0}, v = {1, 0};
    CHECK_EQ_I64(ndk.WskOpenNdkAdapter(provider.Client, bad, if_nametoindex("lo"), &adapter),
                 NDIS_STATUS_BAD_VERSION);
    CHECK_EQ_I64(ndk.WskOpenNdkAdapter(provider.Client, v, 0x7FFFFFF0, &adapter),
                 STATUS_NOT_FOUND);
    CHECK_EQ_U64(SoftNdkWdkQueryOpenAdapters(NULL, 0), 0);
    CHECK_EQ_I64(ndk.WskOpenNdkAdapter(provider.Client, v, if_nametoindex("lo"), &adapter),
                 STATUS_SUCCESS);
    NDK_ADAPTER *open[2];
    CHECK_EQ_U64(SoftNdkWdkQueryOpenAdapters(open, 2), 1);
    CHECK(open[0] == adapter);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    CHECK_EQ_I64(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size), STATUS_SUCCESS);
    CHECK_EQ_U64(info.Version.Major, 1); /* asked 1.0: runs the highest 1.x */
    CHECK_EQ_U64(info.RdmaTechnology, NdkiWarp);
    ndk.WskCloseNdkAdapter(provider.Client, adapter);
    CHECK_EQ_U64(SoftNdkWdkQueryOpenAdapters(NULL, 0), 0);

    WskReleaseProviderNPI(&reg);
    WskDeregister(&reg);
    CHECK_EQ_U64(SoftNdkWdkQueryWskRegistrations(), 0);
}

struct deregister {
    WSK_REGISTRATION *reg;
    atomic_int done;
};

static void *deregister_thread(void *arg)
{
    struct deregister *d = arg;
    SoftNdkWdkEnterDriverThread();
    WskDeregister(d->reg);
    atomic_store(&d->done, 1);
    return NULL;
}

TEST(wdk_wsk_deregister_waits_for_captures)
{
    WSK_REGISTRATION reg;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    CHECK_EQ_I64(WskRegister(&npi, &reg), STATUS_SUCCESS);
    CHECK_EQ_I64(WskCaptureProviderNPI(&reg, WSK_NO_WAIT, &provider), STATUS_SUCCESS);
    struct deregister d = {&reg, 0};
    pthread_t t;
    wdk_on_thread(deregister_thread, &d, &t);
    /* the "must not happen" window: WskDeregister blocks while the NPI is captured */
    KeStallExecutionProcessor(50000);
    CHECK_EQ_I64(atomic_load(&d.done), 0);
    CHECK_EQ_I64(WskCaptureProviderNPI(&reg, WSK_NO_WAIT, &provider), STATUS_DEVICE_NOT_READY);
    WskReleaseProviderNPI(&reg);
    pthread_join(t, NULL);
    CHECK_EQ_I64(atomic_load(&d.done), 1);
}

static void open_at_dispatch(void *arg)
{
    (void)arg;
    WSK_REGISTRATION reg;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    WSK_PROVIDER_NDK_DISPATCH ndk;
    WskRegister(&npi, &reg);
    WskCaptureProviderNPI(&reg, WSK_NO_WAIT, &provider);
    provider.Dispatch->WskControlClient(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0,
                                        NULL, sizeof ndk, &ndk, NULL, NULL);
    KIRQL irql = KeRaiseIrqlToDpcLevel();
    NDK_ADAPTER *a;
    NDK_VERSION v = {1, 0};
    ndk.WskOpenNdkAdapter(provider.Client, v, 1, &a);
    KeLowerIrql(irql);
}

TEST(wdk_wsk_open_at_dispatch_bugchecks)
{
    CHECK(wdk_bugchecks(open_at_dispatch, NULL, "WskOpenNdkAdapter at IRQL 2"));
}

/* A client used after WskDeregister: the harness looks the client up instead of reading the
 * freed registration, and bugchecks naming the misuse (ASan would see no read of freed memory). */
static void use_after_deregister(void *arg)
{
    (void)arg;
    WSK_REGISTRATION reg;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    WSK_PROVIDER_NDK_DISPATCH ndk;
    if (WskRegister(&npi, &reg) != STATUS_SUCCESS ||
        WskCaptureProviderNPI(&reg, WSK_NO_WAIT, &provider) != STATUS_SUCCESS ||
        provider.Dispatch->WskControlClient(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH,
                                            0, NULL, sizeof ndk, &ndk, NULL,
                                            NULL) != STATUS_SUCCESS)
        _exit(3);
    WskReleaseProviderNPI(&reg);
    WskDeregister(&reg);
    NDK_ADAPTER *adapter = NULL;
    NDK_VERSION v = {2, 0};
    ndk.WskOpenNdkAdapter(provider.Client, v, if_nametoindex("lo"), &adapter);
}

static void registration_after_deregister(void *arg)
{
    (void)arg;
    WSK_REGISTRATION reg, copy;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    if (WskRegister(&npi, &reg) != STATUS_SUCCESS)
        _exit(3);
    copy = reg; /* still names the registration after WskDeregister clears reg */
    WskDeregister(&reg);
    WskCaptureProviderNPI(&copy, WSK_NO_WAIT, &provider);
}

TEST(wdk_wsk_client_used_after_deregister_bugchecks)
{
    CHECK(wdk_bugchecks(use_after_deregister, NULL, "WskOpenNdkAdapter: 0x"));
    CHECK(wdk_bugchecks(use_after_deregister, NULL, "registration was deregistered"));
    CHECK(wdk_bugchecks(registration_after_deregister, NULL, "WskCaptureProviderNPI(0x"));
}

/* WSK sockets through IRPs: WskSocketConnect to a listen socket served by WskAccept (no accept
 * events), data both ways, a refused connect, every socket closed and nothing left in pool. */
static NTSTATUS sync_done(PDEVICE_OBJECT DeviceObject, PIRP Irp, PVOID Context)
{
    (void)DeviceObject, (void)Irp;
    KeSetEvent((PKEVENT)Context, IO_NO_INCREMENT, FALSE);
    return STATUS_MORE_PROCESSING_REQUIRED;
}

struct sync_irp {
    PIRP irp;
    KEVENT done;
};

static void sync_prepare(struct sync_irp *s)
{
    IoReuseIrp(s->irp, STATUS_UNSUCCESSFUL);
    KeClearEvent(&s->done);
    IoSetCompletionRoutine(s->irp, sync_done, &s->done, TRUE, TRUE, TRUE);
}

static NTSTATUS sync_wait(struct sync_irp *s, NTSTATUS st)
{
    if (st == STATUS_PENDING) {
        LARGE_INTEGER timeout = {.QuadPart = -10LL * 1000 * 1000 * 10}; /* 10 s */
        if (KeWaitForSingleObject(&s->done, Executive, KernelMode, FALSE, &timeout) != STATUS_SUCCESS)
            return STATUS_IO_TIMEOUT;
    }
    return s->irp->IoStatus.Status;
}

static NTSTATUS xfer(struct sync_irp *s, PWSK_SOCKET sock, bool send, void *data, ULONG len,
                     ULONG_PTR *done)
{
    const WSK_PROVIDER_CONNECTION_DISPATCH *d = sock->Dispatch;
    PMDL mdl = IoAllocateMdl(data, len, FALSE, FALSE, NULL);
    MmBuildMdlForNonPagedPool(mdl);
    WSK_BUF b = {mdl, 0, len};
    sync_prepare(s);
    NTSTATUS st = sync_wait(s, send ? d->WskSend(sock, &b, 0, s->irp)
                                    : d->WskReceive(sock, &b, WSK_FLAG_WAITALL, s->irp));
    *done = s->irp->IoStatus.Information;
    IoFreeMdl(mdl);
    return st;
}

TEST(wdk_wsk_socket_connect_and_accept)
{
    WSK_REGISTRATION reg;
    WSK_CLIENT_NPI npi = {NULL, &client_dispatch};
    WSK_PROVIDER_NPI provider;
    ULONG64 since = SoftNdkWdkPoolSequence();
    CHECK_EQ_I64(WskRegister(&npi, &reg), STATUS_SUCCESS);
    CHECK_EQ_I64(WskCaptureProviderNPI(&reg, WSK_NO_WAIT, &provider), STATUS_SUCCESS);
    struct sync_irp s;
    s.irp = IoAllocateIrp(1, FALSE);
    CHECK(s.irp != NULL);
    KeInitializeEvent(&s.done, NotificationEvent, FALSE);

    SOCKADDR_IN any = {.sin_family = AF_INET, .sin_addr.s_addr = IN4ADDR_LOOPBACK};
    SOCKADDR_IN there = any;
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, provider.Dispatch->WskSocket(provider.Client, AF_INET, SOCK_STREAM,
                                                            IPPROTO_TCP, WSK_FLAG_LISTEN_SOCKET,
                                                            NULL, NULL, NULL, NULL, NULL, s.irp)),
                 STATUS_SUCCESS);
    PWSK_SOCKET listener = (PWSK_SOCKET)s.irp->IoStatus.Information;
    const WSK_PROVIDER_LISTEN_DISPATCH *ld = listener->Dispatch;
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, ld->WskBind(listener, (PSOCKADDR)&any, 0, s.irp)), STATUS_SUCCESS);
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, ld->WskGetLocalAddress(listener, (PSOCKADDR)&there, s.irp)),
                 STATUS_SUCCESS);
    CHECK(there.sin_port != 0);

    /* the accept pends until the connect arrives: its own IRP */
    struct sync_irp a;
    a.irp = IoAllocateIrp(1, FALSE);
    KeInitializeEvent(&a.done, NotificationEvent, FALSE);
    sync_prepare(&a);
    SOCKADDR_IN6 remote;
    memset(&remote, 0, sizeof remote);
    NTSTATUS accept_st = ld->WskAccept(listener, 0, NULL, NULL, NULL, (PSOCKADDR)&remote, a.irp);
    CHECK_EQ_I64(accept_st, STATUS_PENDING);

    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, provider.Dispatch->WskSocketConnect(
                                   provider.Client, SOCK_STREAM, IPPROTO_TCP, (PSOCKADDR)&any,
                                   (PSOCKADDR)&there, 0, NULL, NULL, NULL, NULL, NULL, s.irp)),
                 STATUS_SUCCESS);
    PWSK_SOCKET client = (PWSK_SOCKET)s.irp->IoStatus.Information;
    CHECK_EQ_I64(sync_wait(&a, accept_st), STATUS_SUCCESS);
    PWSK_SOCKET server = (PWSK_SOCKET)a.irp->IoStatus.Information;
    CHECK(server != NULL && remote.sin6_family == AF_INET);

    char msg[300], got[300];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)(i * 7);
    ULONG_PTR n = 0;
    CHECK_EQ_I64(xfer(&s, client, true, msg, sizeof msg, &n), STATUS_SUCCESS);
    CHECK_EQ_U64(n, sizeof msg);
    CHECK_EQ_I64(xfer(&a, server, false, got, sizeof got, &n), STATUS_SUCCESS);
    CHECK_EQ_U64(n, sizeof got);
    CHECK(memcmp(msg, got, sizeof msg) == 0);

    /* a connect nobody listens to: refused, and no socket comes back */
    const WSK_PROVIDER_CONNECTION_DISPATCH *cd = server->Dispatch;
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, cd->WskCloseSocket(server, s.irp)), STATUS_SUCCESS);
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, ld->WskCloseSocket(listener, s.irp)), STATUS_SUCCESS);
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, provider.Dispatch->WskSocketConnect(
                                   provider.Client, SOCK_STREAM, IPPROTO_TCP, (PSOCKADDR)&any,
                                   (PSOCKADDR)&there, 0, NULL, NULL, NULL, NULL, NULL, s.irp)),
                 STATUS_CONNECTION_REFUSED);
    CHECK_EQ_U64(s.irp->IoStatus.Information, 0);
    sync_prepare(&s);
    CHECK_EQ_I64(sync_wait(&s, cd->WskCloseSocket(client, s.irp)), STATUS_SUCCESS);

    IoFreeIrp(a.irp);
    IoFreeIrp(s.irp);
    WskReleaseProviderNPI(&reg);
    WskDeregister(&reg);
    CHECK_EQ_U64(SoftNdkWdkQueryPool(since, NULL, 0), 0);
}
