/* Listener, connector and shared-endpoint objects on their own: creation, close, getters before
 * an address exists (decisions: "Address getters"), calls in the wrong state. Connections
 * themselves are in connect.c. */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "objects.h"

static NDK_LISTENER *make_listener(NDK_ADAPTER *a)
{
    NDK_LISTENER *l = NULL;
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, &l),
        STATUS_SUCCESS);
    CHECK(l != NULL);
    return l;
}

static NDK_CONNECTOR *make_connector(NDK_ADAPTER *a)
{
    NDK_CONNECTOR *c = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, &c), STATUS_SUCCESS);
    CHECK(c != NULL);
    return c;
}

TEST(listener_create_close)
{
    NDK_ADAPTER *a = conf_open();
    NDK_LISTENER *l = NULL;
    CHECK_STATUS(a->Dispatch->NdkCreateListener(a, NULL, NULL, ndk_create_never, NULL, &l),
                 STATUS_INVALID_PARAMETER);
    CHECK_STATUS(
        a->Dispatch->NdkCreateListener(a, conf_connect_never, NULL, ndk_create_never, NULL, NULL),
        STATUS_INVALID_PARAMETER);
    CHECK(l == NULL);
    l = make_listener(a);
    CHECK_EQ_U64(l->Header.ObjectType, NdkObjectTypeListener);
    l->Dispatch->NdkControlConnectEvents(l, TRUE);
    l->Dispatch->NdkControlConnectEvents(l, FALSE);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&l->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS));
    harness_event_destroy(&ev);
    ndk_close_adapter(a);
}

TEST(connector_create_close)
{
    NDK_ADAPTER *a = conf_open();
    CHECK_STATUS(a->Dispatch->NdkCreateConnector(a, ndk_create_never, NULL, NULL),
                 STATUS_INVALID_PARAMETER);
    NDK_CONNECTOR *c = make_connector(a);
    CHECK_EQ_U64(c->Header.ObjectType, NdkObjectTypeConnector);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&c->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS));
    harness_event_destroy(&ev);
    ndk_close_adapter(a);
}

TEST(listener_get_local_address_before_listen)
{
    NDK_ADAPTER *a = conf_open();
    NDK_LISTENER *l = make_listener(a);
    struct sockaddr_in6 addr;
    ULONG len = sizeof addr;
    CHECK_STATUS(l->Dispatch->NdkGetLocalAddress(l, (struct sockaddr *)&addr, &len),
                 STATUS_INVALID_DEVICE_STATE);
    len = 0;
    CHECK_STATUS(l->Dispatch->NdkGetLocalAddress(l, NULL, &len), STATUS_INVALID_DEVICE_STATE);
    conf_close(&l->Header);
    ndk_close_adapter(a);
}

TEST(connector_calls_without_connection)
{
    conf_breaks_rules("connector_state: connector calls out of order, on purpose");
    NDK_ADAPTER *a = conf_open();
    NDK_CONNECTOR *c = make_connector(a);
    const NDK_CONNECTOR_DISPATCH *d = c->Dispatch;
    struct sockaddr_in6 addr;
    ULONG len = sizeof addr;
    CHECK_STATUS(d->NdkGetLocalAddress(c, (struct sockaddr *)&addr, &len),
                 STATUS_INVALID_DEVICE_STATE);
    len = sizeof addr;
    CHECK_STATUS(d->NdkGetPeerAddress(c, (struct sockaddr *)&addr, &len),
                 STATUS_INVALID_DEVICE_STATE);
    ULONG ird = 0, ord = 0, pdlen = 0;
    CHECK_STATUS(d->NdkGetConnectionData(c, &ird, &ord, NULL, &pdlen), STATUS_INVALID_DEVICE_STATE);
    CHECK_STATUS(d->NdkReject(c, NULL, 0), STATUS_INVALID_DEVICE_STATE); /* nothing to reject */
    CHECK_STATUS(d->NdkCompleteConnect(c, NULL, NULL, ndk_request_never, NULL),
                 STATUS_CONNECTION_INVALID); /* not connecting */
    CHECK_STATUS(d->NdkCompleteConnectEx(c, NULL, NULL, ndk_request_never, NULL),
                 STATUS_CONNECTION_INVALID);
    CHECK_STATUS(d->NdkDisconnect(c, ndk_request_never, NULL), STATUS_CONNECTION_INVALID);
    conf_close(&c->Header);
    ndk_close_adapter(a);
}

TEST(shared_endpoint_bad_address)
{
    NDK_ADAPTER *a = conf_open();
    NDK_FN_CREATE_SHARED_ENDPOINT create = a->Dispatch->NdkCreateSharedEndpoint;
    NDK_SHARED_ENDPOINT *se = NULL;
    struct sockaddr_in sin = ndk_loopback4(0);
    sin.sin_family = AF_UNIX; /* not an IP family */
    CHECK_STATUS(create(a, (struct sockaddr *)&sin, sizeof sin, ndk_create_never, NULL, &se),
                 STATUS_INVALID_ADDRESS);
    sin.sin_family = 23; /* Windows' AF_INET6: not Linux's (decision 15) */
    CHECK_STATUS(create(a, (struct sockaddr *)&sin, sizeof sin, ndk_create_never, NULL, &se),
                 STATUS_INVALID_ADDRESS);
    sin.sin_family = AF_INET; /* too short for its family */
    CHECK_STATUS(create(a, (struct sockaddr *)&sin, 4, ndk_create_never, NULL, &se),
                 STATUS_INVALID_ADDRESS);
    struct sockaddr_in6 sin6;
    memset(&sin6, 0, sizeof sin6);
    sin6.sin6_family = AF_INET6;
    CHECK_STATUS(create(a, (struct sockaddr *)&sin6, sizeof(struct sockaddr_in), ndk_create_never,
                        NULL, &se),
                 STATUS_INVALID_ADDRESS);
    CHECK(se == NULL);
    ndk_close_adapter(a);
}

TEST(shared_endpoint_create_close)
{
    /* Port 0 draws from the adapter's ephemeral range (conf_options narrows it). */
    SOFTNDK_OPTIONS o;
    conf_options(&o);
    NDK_ADAPTER *a = conf_open_with(&o);
    NDK_SHARED_ENDPOINT *se = NULL;
    struct sockaddr_in sin = ndk_loopback4(0);
    CHECK_STATUS(a->Dispatch->NdkCreateSharedEndpoint(a, (struct sockaddr *)&sin, sizeof sin,
                                                      ndk_create_never, NULL, &se),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(se->Header.ObjectType, NdkObjectTypeSharedEndpoint);
    struct sockaddr_in got;
    ULONG len = 0;
    CHECK_STATUS(se->Dispatch->NdkGetLocalAddress(se, NULL, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ_U64(len, sizeof got);
    CHECK_STATUS(se->Dispatch->NdkGetLocalAddress(se, (struct sockaddr *)&got, &len),
                 STATUS_SUCCESS);
    CHECK_EQ_U64(len, sizeof got);
    CHECK_EQ_U64(got.sin_family, AF_INET);
    CHECK_EQ_U64(got.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    uint16_t port = ntohs(got.sin_port);
    CHECK_MSG(port >= o.EphemeralPortLow && port <= o.EphemeralPortHigh,
              "port %u outside the ephemeral range %u-%u", port, o.EphemeralPortLow,
              o.EphemeralPortHigh);
    struct harness_event ev;
    harness_event_init(&ev);
    CHECK_STATUS(ndk_close_any(&se->Header, fixture_close_signal, &ev), STATUS_SUCCESS);
    CHECK(!harness_event_wait(&ev, 1, FIXTURE_QUIET_MS));
    harness_event_destroy(&ev);
    ndk_close_adapter(a);
}
