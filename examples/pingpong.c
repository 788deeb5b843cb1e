/* pingpong: the smallest complete softndk program. One process opens the loopback adapter and
 * plays both ends, a listener (server) and a connector (client), joined by an iWARP connection
 * over TCP on 127.0.0.1. The client sends ROUNDS messages; the server checks and echoes each;
 * the client checks the echo. Every wait is bounded, every object closed; exit status 0 = PASS.
 *   cc pingpong.c $(pkg-config --cflags --libs softndk) -o pingpong && ./pingpong
 * Calls that may finish later return STATUS_PENDING and call back; wait_for() makes each a
 * bounded blocking call. Send and Receive completions are polled from a completion queue (CQ). */
#define _POSIX_C_SOURCE 200809L /* nanosleep, if_nametoindex */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ndk/softndk.h>

#define ROUNDS   100
#define MSG_SIZE 4096
#define WAIT_MS  10000 /* the bound of every wait */

/* A callback's news, set on one of the provider's threads and polled by main(). */
struct event {
    atomic_int done;
    NTSTATUS status;
    NDK_CONNECTOR *incoming; /* the listener's connect event: the server's connector */
};

static void on_request_done(void *ctx, NTSTATUS status)
{
    struct event *ev = ctx;
    ev->status = status;
    atomic_store(&ev->done, 1); /* publishes status (and incoming) to main() */
}
static void on_closed(void *ctx)
{
    on_request_done(ctx, STATUS_SUCCESS);
}
static void on_connect_request(void *ctx, NDK_CONNECTOR *connector)
{
    ((struct event *)ctx)->incoming = connector;
    on_request_done(ctx, STATUS_SUCCESS);
}
static void on_cq(void *ctx, NTSTATUS status) /* never called: this program polls */
{
    (void)ctx, (void)status;
}

/* The status of a call that returned `returned`: if STATUS_PENDING, the one its callback gives
 * (STATUS_IO_TIMEOUT if none within WAIT_MS). */
static NTSTATUS wait_for(struct event *ev, NTSTATUS returned)
{
    for (long i = 0; returned == STATUS_PENDING && i < WAIT_MS * 10L;
         i++, nanosleep(&(struct timespec){0, 100000}, NULL))
        if (atomic_exchange(&ev->done, 0))
            return ev->status;
    return returned == STATUS_PENDING ? STATUS_IO_TIMEOUT : returned;
}

/* Go on only if `call` returns STATUS_SUCCESS (after wait_for, if it pended); else say why. */
#define TRY(call)                                                                                  \
    if ((st = (call)) != STATUS_SUCCESS) {                                                         \
        fprintf(stderr, "pingpong: line %d: %s: %s\n", __LINE__, #call, SoftNdkStatusName(st));    \
        goto out;                                                                                  \
    }

/* Poll `cq` until one completion arrives (bounded); true if it succeeded. */
static int poll_one(NDK_CQ *cq, NDK_RESULT_EX *r)
{
    for (long i = 0; i < WAIT_MS * 10L; i++, nanosleep(&(struct timespec){0, 100000}, NULL))
        if (cq->Dispatch->NdkGetCqResultsEx(cq, r, 1) == 1)
            return r->Status == STATUS_SUCCESS;
    return 0; /* none within WAIT_MS */
}

/* Byte i of round `round`'s message: differs in every byte from the last round's. */
#define PATTERN(round, i)  (unsigned char)((round)*31u + (i)*7u + ((i) >> 8))
#define SAME(sge_a, sge_b) (memcmp((sge_a).VirtualAddress, (sge_b).VirtualAddress, MSG_SIZE) == 0)
#define EXPECT(cond, round)                                                                        \
    if (!(cond)) {                                                                                 \
        fprintf(stderr, "pingpong: round %u: not %s\n", round, #cond);                             \
        st = STATUS_UNSUCCESSFUL;                                                                  \
        goto out;                                                                                  \
    }

/* One end of the connection: its QP, the CQ its requests complete on, its two buffers. */
struct end {
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_SGE tx, rx; /* each MSG_SIZE bytes of the registered region */
};
#define CLOSE(obj, fn)                                                                             \
    if (obj)                                                                                       \
    wait_for(&ev, (obj)->Dispatch->fn(&(obj)->Header, on_closed, &ev))

int main(void)
{
    static unsigned char mem[4][MSG_SIZE]; /* client send, receive; server send, receive */
    struct event ev = {0}, incoming = {0}, connected = {0}, accepted = {0};
    NDK_ADAPTER *adapter = NULL;
    NDK_PD *pd = NULL;
    NDK_MR *mr = NULL;
    NDK_LISTENER *listener = NULL;
    NDK_CONNECTOR *client = NULL, *server = NULL;
    struct end ends[2] = {{0}}, *c = &ends[0], *s = &ends[1];
    NTSTATUS st; /* the last call's; STATUS_SUCCESS at the end means PASS */

    /* What both ends share: the adapter, a protection domain, one registered memory region
     * (softndk's creates never pend, docs/decisions.md: so no create callbacks). */
    TRY(SoftNdkOpenAdapter(if_nametoindex("lo"), (NDK_VERSION){2, 0}, NULL, &adapter));
    TRY(adapter->Dispatch->NdkCreatePd(adapter, NULL, NULL, &pd));
    TRY(pd->Dispatch->NdkCreateMr(pd, FALSE, NULL, NULL, &mr));
    MDL mdl;
    MmInitializeMdl(&mdl, mem, sizeof mem);
    TRY(wait_for(&ev,
                 mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof mem, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                             on_request_done, &ev)));
    UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);

    /* Each end: a CQ, and a QP (4 receives, 4 sends, 1 SGE each) completing on it. */
    for (int i = 0; i < 2; i++) {
        struct end *e = &ends[i];
        e->tx = (NDK_SGE){.VirtualAddress = mem[2 * i], MSG_SIZE, token};
        e->rx = (NDK_SGE){.VirtualAddress = mem[2 * i + 1], MSG_SIZE, token};
        TRY(adapter->Dispatch->NdkCreateCq(adapter, 8, on_cq, NULL, NULL, NULL, NULL, &e->cq));
        TRY(pd->Dispatch->NdkCreateQp(pd, e->cq, e->cq, NULL, 4, 4, 1, 1, 0, NULL, NULL, &e->qp));
        /* A receive goes up before the connection: a Send needs one waiting for it. */
        TRY(e->qp->Dispatch->NdkReceive(e->qp, e, &e->rx, 1));
    }

    /* The server listens on 127.0.0.1, port 0: the provider picks a free port. */
    struct sockaddr_in there,
        addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ULONG len = sizeof addr, there_len = sizeof there;
    TRY(adapter->Dispatch->NdkCreateListener(adapter, on_connect_request, &incoming, NULL, NULL,
                                             &listener));
    TRY(wait_for(&ev, listener->Dispatch->NdkListen(listener, (struct sockaddr *)&addr, len,
                                                    on_request_done, &ev)));
    TRY(listener->Dispatch->NdkGetLocalAddress(listener, (struct sockaddr *)&there, &there_len));

    /* Connect -> the server's connect event -> Accept -> Connect completes -> CompleteConnect ->
     * Accept completes: one thread drives both ends, so it waits only for what was answered. */
    TRY(adapter->Dispatch->NdkCreateConnector(adapter, NULL, NULL, &client));
    NTSTATUS connecting = client->Dispatch->NdkConnect(client, c->qp, (struct sockaddr *)&addr, len,
                                                       (struct sockaddr *)&there, there_len, 1, 1,
                                                       NULL, 0, on_request_done, &connected);
    TRY(wait_for(&incoming, connecting)); /* stops here if NdkConnect failed inline */
    server = incoming.incoming;
    NTSTATUS accepting = server->Dispatch->NdkAccept(server, s->qp, 1, 1, NULL, 0, NULL, NULL,
                                                     on_request_done, &accepted);
    TRY(wait_for(&connected, connecting));
    TRY(wait_for(&ev,
                 client->Dispatch->NdkCompleteConnect(client, NULL, NULL, on_request_done, &ev)));
    TRY(wait_for(&accepted, accepting));

    /* The ping-pong: the client sends, the server checks and echoes, the client checks. */
    for (unsigned round = 0; round < ROUNDS; round++) {
        NDK_RESULT_EX r;
        for (unsigned i = 0; i < MSG_SIZE; i++)
            ((unsigned char *)c->tx.VirtualAddress)[i] = PATTERN(round, i);
        TRY(c->qp->Dispatch->NdkSend(c->qp, c, &c->tx, 1, 0));
        /* Server: the message arrives whole and as sent; it goes back from the server's buffer. */
        EXPECT(poll_one(s->cq, &r) && r.Type == NdkOperationTypeReceive, round);
        EXPECT(r.BytesTransferred == MSG_SIZE && SAME(s->rx, c->tx), round);
        memcpy(s->tx.VirtualAddress, s->rx.VirtualAddress, MSG_SIZE);
        TRY(s->qp->Dispatch->NdkReceive(s->qp, s, &s->rx, 1));
        TRY(s->qp->Dispatch->NdkSend(s->qp, s, &s->tx, 1, 0));
        EXPECT(poll_one(s->cq, &r) && r.Type == NdkOperationTypeSend, round);
        /* Client: its Send and its Receive complete, in either order; then the echo checked. */
        unsigned seen = 0;
        for (int i = 0; i < 2 && poll_one(c->cq, &r); i++)
            seen |= (unsigned)r.Type;
        EXPECT(seen == (NdkOperationTypeSend | NdkOperationTypeReceive), round);
        EXPECT(SAME(c->rx, c->tx), round); /* a stale byte of the last round would differ */
        TRY(c->qp->Dispatch->NdkReceive(c->qp, c, &c->rx, 1));
    }
    printf("pingpong: %d round trips of %d bytes over 127.0.0.1:%u, every byte checked\n", ROUNDS,
           MSG_SIZE, ntohs(there.sin_port));

    /* Disconnect: each end sends its FIN; the client's completes when the server's arrives. */
    NTSTATUS closing = client->Dispatch->NdkDisconnect(client, on_request_done, &connected);
    TRY(wait_for(&ev, server->Dispatch->NdkDisconnect(server, on_request_done, &ev)));
    TRY(wait_for(&connected, closing));

out: /* Close in the reverse order of creation; a close may finish later, so wait for each. */
    CLOSE(server, NdkCloseConnector);
    CLOSE(client, NdkCloseConnector);
    CLOSE(listener, NdkCloseListener);
    for (int i = 0; i < 2; i++) {
        CLOSE(ends[i].qp, NdkCloseQp); /* outstanding receives complete STATUS_CANCELLED */
        CLOSE(ends[i].cq, NdkCloseCq);
    }
    CLOSE(mr, NdkCloseMr);
    CLOSE(pd, NdkClosePd);
    if (adapter)
        SoftNdkCloseAdapter(adapter); /* returns once every object is gone */
    printf("pingpong: %s\n", st == STATUS_SUCCESS ? "PASS" : "FAIL");
    return st == STATUS_SUCCESS ? EXIT_SUCCESS : EXIT_FAILURE;
}
