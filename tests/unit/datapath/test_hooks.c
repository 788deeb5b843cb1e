/* The data path's hooks (docs/datapath.md, "Hooks"): attached per connection from what the
 * options ask, in their fixed order, and none by default, where every seam is one branch. */
#include <stdlib.h>
#include <string.h>

#include "datapath.h"
#include "datapath/dp_seams.h"

static const struct sndk_dp_hooks *hooks_of(NDK_QP *qp)
{
    return &((struct sndk_qp *)qp)->io->hooks;
}

/* One Send x -> y completes on both sides: the seams let the protocol through. */
static void send_one(struct dp_pair *p)
{
    NDK_RESULT_EX r;
    dp_fill(p->x.buf, 4096, 7);
    dp_post_recv(&p->y, (void *)0x11, 0, 4096);
    dp_post_send(&p->x, (void *)0x22, 0, 4096, 0);
    dp_expect(p->x.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 4096, (void *)0x1001, (void *)0x22, NdkOperationTypeSend);
    dp_expect(p->y.cq, &r, 1, 0);
    dp_check_result(&r, STATUS_SUCCESS, 4096, (void *)0x2002, (void *)0x11,
                    NdkOperationTypeReceive);
    CHECK_MEM(p->y.buf, p->x.buf, 4096);
}

TEST(hooks_none_attached_by_default)
{
    CHECK(unsetenv("SOFTNDK_SOURCE_CHECK") == 0 && unsetenv("SOFTNDK_FAULTS") == 0 &&
          unsetenv("SOFTNDK_PCAP") == 0);
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    CHECK_EQ_U64(hooks_of(p.x.qp)->n, 0);
    CHECK_EQ_U64(hooks_of(p.y.qp)->n, 0);
    send_one(&p);
    dp_pair_close(&p);
}

TEST(hooks_attach_what_the_options_ask_in_order)
{
    /* a rule that never fires on this short connection, and the source check */
    CHECK(setenv("SOFTNDK_FAULTS", "stall:dir=tx,after_fpdus=1000000,ms=1", 1) == 0);
    CHECK(setenv("SOFTNDK_SOURCE_CHECK", "on", 1) == 0);
    CHECK(unsetenv("SOFTNDK_PCAP") == 0);
    struct dp_opts o;
    dp_opts_default(&o);
    struct dp_pair p;
    dp_pair_open(&p, &o);
    const struct sndk_dp_hooks *h = hooks_of(p.x.qp);
    CHECK_EQ_U64(h->n, 2); /* no capture: the attach had no connection record */
    CHECK(strcmp(h->ops[0]->name, "faults") == 0);
    CHECK(strcmp(h->ops[1]->name, "source check") == 0);
    send_one(&p);
    dp_pair_close(&p);
}
