/* The inbound Terminate table: which of our requests a received Terminate names and why the
 * peer refused it (sndk_term_target, docs/iwarp-notes.md [IW-TERM-IN]). */
#include <string.h>

#include "harness.h"
#include "iwarp/terminate.h"
#include "iwarp/wire.h"

static struct sndk_term untagged(unsigned layer, unsigned etype, unsigned code, uint32_t qn,
                                 uint32_t msn)
{
    struct sndk_term t;
    memset(&t, 0, sizeof t);
    t.layer = (uint8_t)layer;
    t.etype = (uint8_t)etype;
    t.code = (uint8_t)code;
    struct sndk_ddp_untagged_hdr h;
    memset(&h, 0, sizeof h);
    sndk_ddp_ctrl_set(&h.ctrl, false, true,
                      qn == SNDK_QN_READ_REQ ? SNDK_OP_READ_REQ : SNDK_OP_SEND);
    sndk_put_be32(h.qn, qn);
    sndk_put_be32(h.msn, msn);
    memcpy(t.ddp_hdr, &h, sizeof h);
    t.ddp_hdr_len = SNDK_DDP_UNTAGGED_HDR_LEN;
    t.hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D;
    return t;
}

static struct sndk_term tagged(unsigned layer, unsigned etype, unsigned code, unsigned opcode,
                               uint32_t stag, uint64_t to)
{
    struct sndk_term t;
    memset(&t, 0, sizeof t);
    t.layer = (uint8_t)layer;
    t.etype = (uint8_t)etype;
    t.code = (uint8_t)code;
    struct sndk_ddp_tagged_hdr h;
    sndk_ddp_ctrl_set(&h.ctrl, true, false, opcode);
    sndk_put_be32(h.stag, stag);
    sndk_put_be64(h.to, to);
    memcpy(t.ddp_hdr, &h, sizeof h);
    t.ddp_hdr_len = SNDK_DDP_TAGGED_HDR_LEN;
    t.hdrct = SNDK_TERM_HDRCT_M | SNDK_TERM_HDRCT_D;
    return t;
}

TEST(term_inbound_blame_table)
{
    static const struct {
        uint8_t layer, etype, code;
        enum sndk_term_blame blame;
    } rows[] = {
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_STAG,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_BASE_BOUNDS,
         SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_UNASSOC_STAG,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_TO_WRAP,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_VERSION,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, 0x77, SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED, SNDK_TERM_DDP_U_MSN_NO_BUF,
         SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_LOCAL_CATA, 0, SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_INV_STAG,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_BASE_BOUNDS,
         SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_ACCESS,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_UNASSOC_STAG,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_TO_WRAP,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_CANT_INV_STAG,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT, SNDK_TERM_RDMAP_UNSPECIFIED,
         SNDK_TERM_BLAME_ACCESS},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_OP, SNDK_TERM_RDMAP_CATA_STREAM,
         SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_LOCAL_CATA, 0, SNDK_TERM_BLAME_RESOURCES},
        {SNDK_TERM_LAYER_LLP, SNDK_TERM_LLP_MPA, SNDK_TERM_LLP_CRC, SNDK_TERM_BLAME_RESOURCES},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct sndk_term t =
            tagged(rows[i].layer, rows[i].etype, rows[i].code, SNDK_OP_WRITE, 0x1234, 8);
        struct sndk_term_target got;
        sndk_term_target(&t, &got);
        CHECK_MSG(got.blame == rows[i].blame, "row %zu: blame %d", i, (int)got.blame);
        CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_WRITE);
    }
}

TEST(term_inbound_names_a_send_by_msn_and_never_blames_access)
{
    struct sndk_term t = untagged(SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
                                  SNDK_TERM_RDMAP_INV_STAG, SNDK_QN_SEND, 41);
    struct sndk_term_target got;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_SEND);
    CHECK_EQ_U64(got.msn, 41);
    CHECK_EQ_U64(got.stag, 0);
    CHECK_EQ_I64(got.blame, SNDK_TERM_BLAME_RESOURCES);
}

TEST(term_inbound_names_a_read_by_msn_or_its_sink_stag)
{
    struct sndk_term t = untagged(SNDK_TERM_LAYER_RDMAP, SNDK_TERM_RDMAP_REMOTE_PROT,
                                  SNDK_TERM_RDMAP_ACCESS, SNDK_QN_READ_REQ, 7);
    struct sndk_term_target got;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_READ);
    CHECK_EQ_U64(got.msn, 7);
    CHECK_EQ_U64(got.stag, 0); /* no Read Request included: named by MSN */
    CHECK_EQ_I64(got.blame, SNDK_TERM_BLAME_ACCESS);

    struct sndk_rdmap_read_req rr;
    struct sndk_read_req r = {.sink_stag = 0xabcd0102u, .size = 4096, .src_stag = 9};
    sndk_read_req_put(&rr, &r);
    memcpy(t.rdmap_hdr, &rr, sizeof rr);
    t.rdmap_hdr_present = true;
    t.code = SNDK_TERM_RDMAP_BASE_BOUNDS;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_READ);
    CHECK_EQ_U64(got.stag, 0xabcd0102u);
    CHECK_EQ_I64(got.blame, SNDK_TERM_BLAME_RESOURCES); /* bounds: remote resources */
}

TEST(term_inbound_names_a_write_by_stag_and_to)
{
    struct sndk_term t =
        tagged(SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_UNASSOC_STAG,
               SNDK_OP_WRITE, 0x11223344u, 0x0102030405060708ull);
    struct sndk_term_target got;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_WRITE);
    CHECK_EQ_U64(got.stag, 0x11223344u);
    CHECK_EQ_U64(got.to, 0x0102030405060708ull);
    CHECK_EQ_I64(got.blame, SNDK_TERM_BLAME_ACCESS);
}

TEST(term_inbound_names_nothing_without_a_header_of_ours)
{
    struct sndk_term_target got;
    struct sndk_term t = untagged(SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_UNTAGGED,
                                  SNDK_TERM_DDP_U_INV_QN, SNDK_QN_TERMINATE, 3);
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_NONE);
    /* a Read Response header names no request of ours (the Read is named by its Request) */
    t = tagged(SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_STAG,
               SNDK_OP_READ_RESP, 5, 0);
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_NONE);
    /* a header length that disagrees with its T bit */
    t = tagged(SNDK_TERM_LAYER_DDP, SNDK_TERM_DDP_TAGGED, SNDK_TERM_DDP_T_INV_STAG, SNDK_OP_WRITE,
               5, 0);
    t.ddp_hdr_len = SNDK_DDP_UNTAGGED_HDR_LEN;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_NONE);
    memset(&t, 0, sizeof t); /* no header at all */
    t.layer = SNDK_TERM_LAYER_LLP;
    t.code = SNDK_TERM_LLP_CRC;
    sndk_term_target(&t, &got);
    CHECK_EQ_I64(got.names, SNDK_TERM_NAMES_NONE);
    CHECK_EQ_U64(got.msn, 0);
    CHECK_EQ_U64(got.stag, 0);
}
