/* WSK registration and its NDK extension: WskOpenNdkAdapter / WskCloseNdkAdapter on
 * SoftNdkOpenAdapter / SoftNdkCloseAdapter, with every open adapter tracked for the runner. */
#include "wdk_internal.h"
#include "wskndk.h"

#include <ndk/softndk.h>
#include <stdlib.h>

#define CLIENT_MAGIC 0x544E45494C434B57ull /* "WKCLIENT" */

struct _WSK_CLIENT {
    uint64_t magic;
    struct wsk_reg *reg;
};

struct wsk_reg {
    WSK_CLIENT client; /* first: client_of() maps a client to its registration */
    WSK_CLIENT_NPI npi;
    unsigned captures;
    bool deregistering;
    struct wsk_reg *next;
};

/* One lock for registrations and the open-adapter table: these calls are rare (PASSIVE). */
static pthread_mutex_t wsk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wsk_cond = PTHREAD_COND_INITIALIZER;
static struct wsk_reg *wsk_regs;

struct open_adapter {
    NDK_ADAPTER *adapter;
    struct _WSK_CLIENT *client; /* NULL once its registration is gone */
    struct open_adapter *next;
};
static struct open_adapter *adapters;

/* Is reg a live registration? The pointers a driver hands back are looked up, never read
 * first: after WskDeregister the registration is freed, and a driver that still uses its
 * client or registration must get a bugcheck, not a read of freed memory. */
static bool reg_live(const struct wsk_reg *reg)
{
    pthread_mutex_lock(&wsk_lock);
    const struct wsk_reg *r = wsk_regs;
    while (r && r != reg)
        r = r->next;
    pthread_mutex_unlock(&wsk_lock);
    return r != NULL;
}

static struct wsk_reg *reg_of(PWSK_REGISTRATION r, const char *what)
{
    struct wsk_reg *reg = r ? (struct wsk_reg *)r->ReservedRegistrationContext : NULL;
    if (!reg || !reg_live(reg))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "%s(%p): not a registration (WskRegister), or deregistered", what,
                         (void *)r);
    return reg;
}

static struct _WSK_CLIENT *client_of(PWSK_CLIENT c, const char *what)
{
    /* The client is the first member of its registration: compare addresses only. */
    struct wsk_reg *reg = c ? (struct wsk_reg *)(void *)c : NULL;
    if (!reg || !reg_live(reg))
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "%s: %p is not a WSK client (from WskCaptureProviderNPI), or its "
                         "registration was deregistered (WskDeregister)",
                         what, (void *)c);
    return c;
}

/* ------------------------------------------------------------------------------------------ */
/* NDK extension */
static NTSTATUS WSKAPI ndk_open(PWSK_CLIENT Client, NDK_VERSION NdkVersion, NET_IFINDEX IfIndex,
                                NDK_ADAPTER **ppNdkAdapter)
{
    struct _WSK_CLIENT *c = client_of(Client, "WskOpenNdkAdapter");
    wdk_require_irql_max(PASSIVE_LEVEL, "WskOpenNdkAdapter");
    if (!ppNdkAdapter)
        return STATUS_INVALID_PARAMETER;
    struct open_adapter *e = calloc(1, sizeof *e);
    if (!e)
        return STATUS_INSUFFICIENT_RESOURCES;
    NTSTATUS st = SoftNdkOpenAdapter(IfIndex, NdkVersion, NULL, ppNdkAdapter);
    if (st != STATUS_SUCCESS) {
        free(e);
        return st;
    }
    e->adapter = *ppNdkAdapter;
    e->client = c;
    pthread_mutex_lock(&wsk_lock);
    e->next = adapters;
    adapters = e;
    pthread_mutex_unlock(&wsk_lock);
    return STATUS_SUCCESS;
}

static VOID WSKAPI ndk_close(PWSK_CLIENT Client, NDK_ADAPTER *pNdkAdapter)
{
    client_of(Client, "WskCloseNdkAdapter");
    wdk_require_irql_max(PASSIVE_LEVEL, "WskCloseNdkAdapter");
    pthread_mutex_lock(&wsk_lock);
    struct open_adapter **pp = &adapters;
    while (*pp && (*pp)->adapter != pNdkAdapter)
        pp = &(*pp)->next;
    struct open_adapter *e = *pp;
    if (e)
        *pp = e->next;
    pthread_mutex_unlock(&wsk_lock);
    if (!e)
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "WskCloseNdkAdapter(%p): not an adapter open through WskOpenNdkAdapter "
                         "(closed twice?)",
                         (void *)pNdkAdapter);
    free(e);
    SoftNdkCloseAdapter(pNdkAdapter);
}

static const WSK_PROVIDER_NDK_DISPATCH ndk_dispatch = {ndk_open, ndk_close};

/* ------------------------------------------------------------------------------------------ */
/* Provider dispatch */
static NTSTATUS WSKAPI wsk_socket(PWSK_CLIENT Client, ADDRESS_FAMILY AddressFamily,
                                  USHORT SocketType, ULONG Protocol, ULONG Flags,
                                  PVOID SocketContext, const VOID *Dispatch,
                                  PEPROCESS OwningProcess, PETHREAD OwningThread,
                                  PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp)
{
    (void)OwningProcess, (void)OwningThread, (void)SecurityDescriptor;
    client_of(Client, "WskSocket");
    return wdk_wsk_socket(AddressFamily, SocketType, Protocol, Flags, SocketContext, Dispatch, Irp);
}

static NTSTATUS WSKAPI wsk_socket_connect(PWSK_CLIENT Client, USHORT SocketType, ULONG Protocol,
                                          PSOCKADDR LocalAddress, PSOCKADDR RemoteAddress,
                                          ULONG Flags, PVOID SocketContext, const VOID *Dispatch,
                                          PEPROCESS OwningProcess, PETHREAD OwningThread,
                                          PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp)
{
    (void)Flags, (void)OwningProcess, (void)OwningThread, (void)SecurityDescriptor;
    client_of(Client, "WskSocketConnect");
    return wdk_wsk_socket_connect(SocketType, Protocol, LocalAddress, RemoteAddress,
                                  SocketContext, Dispatch, Irp);
}

static NTSTATUS WSKAPI wsk_control_client(PWSK_CLIENT Client, ULONG ControlCode, SIZE_T InputSize,
                                          PVOID InputBuffer, SIZE_T OutputSize,
                                          PVOID OutputBuffer, SIZE_T *OutputSizeReturned,
                                          PIRP Irp)
{
    (void)InputSize, (void)InputBuffer;
    client_of(Client, "WskControlClient");
    if (Irp)
        return STATUS_NOT_SUPPORTED; /* no IRPs in the harness */
    switch (ControlCode) {
    case WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH:
        /* The output is the dispatch table itself (not a pointer to it). OutputSizeReturned
         * may be NULL (Microsoft's own sample passes NULL); it is filled when given. */
        if (!OutputBuffer || OutputSize < sizeof(WSK_PROVIDER_NDK_DISPATCH))
            return STATUS_INVALID_PARAMETER;
        memcpy(OutputBuffer, &ndk_dispatch, sizeof ndk_dispatch);
        if (OutputSizeReturned)
            *OutputSizeReturned = sizeof ndk_dispatch;
        return STATUS_SUCCESS;
    case WSK_TRANSPORT_LIST_QUERY:
    case WSK_TRANSPORT_LIST_CHANGE:
    case WSK_CACHE_SD:
    case WSK_RELEASE_SD:
    case WSK_TDI_DEVICENAME_MAPPING:
    case WSK_SET_STATIC_EVENT_CALLBACKS:
    case WSK_TDI_BEHAVIOR:
        return STATUS_NOT_SUPPORTED; /* socket-side controls: no WSK sockets here */
    default:
        return STATUS_INVALID_PARAMETER;
    }
}

static NTSTATUS WSKAPI wsk_get_address_info(PWSK_CLIENT Client, PUNICODE_STRING NodeName,
                                            PUNICODE_STRING ServiceName, ULONG NameSpace,
                                            GUID *Provider, PADDRINFOEXW Hints,
                                            PADDRINFOEXW *Result, PEPROCESS OwningProcess,
                                            PETHREAD OwningThread, PIRP Irp)
{
    (void)Client, (void)NodeName, (void)ServiceName, (void)NameSpace, (void)Provider;
    (void)Hints, (void)Result, (void)OwningProcess, (void)OwningThread, (void)Irp;
    return STATUS_NOT_IMPLEMENTED;
}

static VOID WSKAPI wsk_free_address_info(PWSK_CLIENT Client, PADDRINFOEXW AddrInfo)
{
    (void)Client, (void)AddrInfo;
}

static NTSTATUS WSKAPI wsk_get_name_info(PWSK_CLIENT Client, PSOCKADDR SockAddr,
                                         ULONG SockAddrLength, PUNICODE_STRING NodeName,
                                         PUNICODE_STRING ServiceName, ULONG Flags,
                                         PEPROCESS OwningProcess, PETHREAD OwningThread, PIRP Irp)
{
    (void)Client, (void)SockAddr, (void)SockAddrLength, (void)NodeName, (void)ServiceName;
    (void)Flags, (void)OwningProcess, (void)OwningThread, (void)Irp;
    return STATUS_NOT_IMPLEMENTED;
}

static const WSK_PROVIDER_DISPATCH provider_dispatch = {
    MAKE_WSK_VERSION(1, 0), 0,          wsk_socket,        wsk_socket_connect,
    wsk_control_client,     wsk_get_address_info, wsk_free_address_info, wsk_get_name_info,
};

/* ------------------------------------------------------------------------------------------ */
/* Registration */
NTSTATUS WskRegister(PWSK_CLIENT_NPI WskClientNpi, PWSK_REGISTRATION WskRegistration)
{
    if (!WskClientNpi || !WskClientNpi->Dispatch || !WskRegistration)
        return STATUS_INVALID_PARAMETER;
    if (WSK_MAJOR_VERSION(WskClientNpi->Dispatch->Version) != 1)
        return STATUS_NOINTERFACE;
    struct wsk_reg *reg = calloc(1, sizeof *reg);
    if (!reg)
        return STATUS_INSUFFICIENT_RESOURCES;
    reg->client.magic = CLIENT_MAGIC;
    reg->client.reg = reg;
    reg->npi = *WskClientNpi;
    memset(WskRegistration, 0, sizeof *WskRegistration);
    WskRegistration->ReservedRegistrationContext = reg;
    pthread_mutex_lock(&wsk_lock);
    reg->next = wsk_regs;
    wsk_regs = reg;
    pthread_mutex_unlock(&wsk_lock);
    return STATUS_SUCCESS;
}

NTSTATUS WskCaptureProviderNPI(PWSK_REGISTRATION WskRegistration, ULONG WaitTimeout,
                               PWSK_PROVIDER_NPI WskProviderNpi)
{
    if (!WskProviderNpi)
        return STATUS_INVALID_PARAMETER;
    if (WaitTimeout != WSK_NO_WAIT)
        wdk_require_irql_max(PASSIVE_LEVEL, "WskCaptureProviderNPI with a wait");
    struct wsk_reg *reg = reg_of(WskRegistration, "WskCaptureProviderNPI");
    pthread_mutex_lock(&wsk_lock);
    if (reg->deregistering) {
        pthread_mutex_unlock(&wsk_lock);
        return STATUS_DEVICE_NOT_READY;
    }
    reg->captures++;
    pthread_mutex_unlock(&wsk_lock);
    WskProviderNpi->Client = &reg->client;
    WskProviderNpi->Dispatch = &provider_dispatch;
    return STATUS_SUCCESS;
}

VOID WskReleaseProviderNPI(PWSK_REGISTRATION WskRegistration)
{
    struct wsk_reg *reg = reg_of(WskRegistration, "WskReleaseProviderNPI");
    pthread_mutex_lock(&wsk_lock);
    if (reg->captures == 0) {
        pthread_mutex_unlock(&wsk_lock);
        wdk_bugcheck_msg(DRIVER_VERIFIER_DETECTED_VIOLATION,
                         "WskReleaseProviderNPI without a matching capture");
    }
    if (--reg->captures == 0)
        pthread_cond_broadcast(&wsk_cond);
    pthread_mutex_unlock(&wsk_lock);
}

VOID WskDeregister(PWSK_REGISTRATION WskRegistration)
{
    wdk_require_irql_max(PASSIVE_LEVEL, "WskDeregister");
    struct wsk_reg *reg = reg_of(WskRegistration, "WskDeregister");
    pthread_mutex_lock(&wsk_lock);
    reg->deregistering = true;
    while (reg->captures) {
        /* Windows blocks here for as long as it takes; say why every 10 s. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        if (pthread_cond_timedwait(&wsk_cond, &wsk_lock, &ts) != 0 && reg->captures)
            wdk_log("WskDeregister waits for %u captured provider NPI(s) to be released",
                    reg->captures);
    }
    unsigned open = 0;
    for (struct open_adapter *e = adapters; e; e = e->next)
        if (e->client == &reg->client) {
            e->client = NULL;
            open++;
        }
    struct wsk_reg **pp = &wsk_regs;
    while (*pp != reg)
        pp = &(*pp)->next;
    *pp = reg->next;
    pthread_mutex_unlock(&wsk_lock);
    if (open)
        wdk_log("WskDeregister: %u NDK adapter(s) opened through this client are still open", open);
    reg->client.magic = 0;
    free(reg);
    WskRegistration->ReservedRegistrationContext = NULL;
}

ULONG SoftNdkWdkQueryOpenAdapters(NDK_ADAPTER **Adapters, ULONG Max)
{
    ULONG n = 0;
    pthread_mutex_lock(&wsk_lock);
    for (struct open_adapter *e = adapters; e; e = e->next, n++)
        if (Adapters && n < Max)
            Adapters[n] = e->adapter;
    pthread_mutex_unlock(&wsk_lock);
    return n;
}

ULONG SoftNdkWdkQueryWskRegistrations(VOID)
{
    ULONG n = 0;
    pthread_mutex_lock(&wsk_lock);
    for (struct wsk_reg *r = wsk_regs; r; r = r->next)
        n++;
    pthread_mutex_unlock(&wsk_lock);
    return n;
}
