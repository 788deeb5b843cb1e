/* Every name table of src/ indexed by an enum has a name for every value of the enum. The
 * tables use designated initialisers, so a value added to an enum without its name leaves a
 * NULL hole the compiler accepts (a size check cannot see it: the table is still COUNT long),
 * and the hole shows only when that value is first logged. Each table is walked here through
 * its name function, for every value 0..COUNT-1; the name must be there, not empty, and not
 * what the function answers past the last value (a function that papers over a hole with its
 * fallback must not hide it either). */
#include <stdio.h>
#include <string.h>

#include "device/access.h"
#include "datapath/phase.h"
#include "datapath/tx.h"
#include "datapath/rnr.h"
#include "core/admission.h"
#include "core/connector.h"
#include "core/errno_status.h"
#include "core/listener.h"
#include "device/mr.h"
#include "device/notify.h"
#include "device/object.h"
#include "device/qp_state.h"
#include "datapath/conn.h"
#include "engine/engine.h"
#include "faults/faults.h"
#include "harness.h"
#include "iwarp/crc32c.h"
#include "iwarp/mpa.h"
#include "iwarp/parser.h"
#include "iwarp/terminate.h"
#include "iwarp/wire.h"
#include "util/lock.h"
#include "verify/verify.h"

typedef const char *(*name_fn)(unsigned v);

struct table {
    const char *what; /* the name function, for the failure message */
    name_fn name;
    unsigned count;
};

/* One adapter per name function: the functions take their own enum types. */
#define ADAPT(fn, type)                                                                            \
    static const char *adapt_##fn(unsigned v)                                                      \
    {                                                                                              \
        return fn((type)v);                                                                        \
    }
ADAPT(sndk_rx_state_name, enum sndk_rx_state)
ADAPT(sndk_rdmap_opcode_name, unsigned)
ADAPT(sndk_mpa_status_name, int)
ADAPT(sndk_mpa_rx_state_name, enum sndk_mpa_rx_state)
ADAPT(sndk_wire_err_name, enum sndk_wire_err)
ADAPT(sndk_term_layer_name, unsigned)
ADAPT(sndk_crc32c_impl_name, enum sndk_crc32c_impl)
ADAPT(sndk_lock_rank_name, enum sndk_lock_rank)
ADAPT(sndk_fault_kind_name, enum sndk_fault_kind)
ADAPT(sndk_fault_call_name, enum sndk_fault_call)
ADAPT(sndk_engine_source_state_name, unsigned)
ADAPT(sndk_engine_state_name, unsigned)
ADAPT(sndk_engine_place_name, unsigned)
ADAPT(sndk_verify_callback_name, enum sndk_callback_kind)
ADAPT(sndk_tx_gate_name, enum sndk_tx_gate)
ADAPT(sndk_rnr_phase_name, enum sndk_rnr_phase)
ADAPT(sndk_conn_phase_name, enum sndk_conn_phase)
ADAPT(sndk_end_finder_name, enum sndk_end_finder)
ADAPT(sndk_rx_park_name, enum sndk_rx_park)
ADAPT(sndk_qp_state_name, enum sndk_qp_state)
ADAPT(sndk_mr_state_name, enum sndk_mr_state)
ADAPT(sndk_notify_state_name, enum sndk_notify_state)
ADAPT(sndk_obj_type_name, NDK_OBJECT_TYPE)
ADAPT(sndk_listener_state_name, enum sndk_listener_state)
ADAPT(sndk_conn_state_name, unsigned)
ADAPT(sndk_conn_req_name, unsigned)
ADAPT(sndk_conn_event_name, unsigned)
ADAPT(sndk_conn_link_name, unsigned)
ADAPT(sndk_adm_phase_name, enum sndk_adm_phase)
ADAPT(sndk_access_result_name, enum sndk_access_result)
ADAPT(sndk_errno_call_name, enum sndk_errno_call)

#define T(fn, count)                                                                               \
    {                                                                                              \
#fn, adapt_##fn, (unsigned)(count)                                                         \
    }
static const struct table tables[] = {
    /* iwarp/ */
    T(sndk_rx_state_name, SNDK_RX_STATE_COUNT),
    T(sndk_rdmap_opcode_name, SNDK_OP_COUNT),
    T(sndk_mpa_status_name, SNDK_MPA_E_COUNT),
    T(sndk_mpa_rx_state_name, SNDK_MPA_RX_STATE_COUNT),
    T(sndk_wire_err_name, SNDK_WERR_COUNT),
    T(sndk_term_layer_name, SNDK_TERM_LAYER_LLP + 1),
    T(sndk_crc32c_impl_name, SNDK_CRC32C_IMPL_COUNT),
    /* util/, faults/, engine/, verify/ */
    T(sndk_lock_rank_name, SNDK_LOCK_RANKS),
    T(sndk_fault_kind_name, SNDK_FAULT_KIND_COUNT),
    T(sndk_fault_call_name, SNDK_FCALL_COUNT),
    T(sndk_engine_source_state_name, SNDK_ENGINE_SOURCE_STATES),
    T(sndk_engine_state_name, SNDK_ENGINE_STATES),
    T(sndk_engine_place_name, SNDK_ENGINE_PLACES),
    T(sndk_verify_callback_name, SNDK_CB_KIND_COUNT),
    /* datapath/ */
    T(sndk_tx_gate_name, SNDK_TXG_COUNT),
    T(sndk_rnr_phase_name, SNDK_RNR_COUNT),
    T(sndk_conn_phase_name, SNDK_PHASE_COUNT),
    T(sndk_end_finder_name, SNDK_END_FINDER_COUNT),
    T(sndk_rx_park_name, SNDK_RX_PARK_COUNT),
    T(sndk_qp_state_name, SNDK_QP_STATE_COUNT),
    /* core/ */
    T(sndk_mr_state_name, SNDK_MR_STATE_COUNT),
    T(sndk_notify_state_name, SNDK_NOTIFY_STATE_COUNT),
    T(sndk_obj_type_name, NdkObjectTypeMax),
    T(sndk_listener_state_name, SNDK_LISTENER_STATE_COUNT),
    T(sndk_conn_state_name, SNDK_CONN_STATES),
    T(sndk_conn_req_name, SNDK_CONN_REQ_PHASES),
    T(sndk_conn_event_name, SNDK_CONN_EVENT_PHASES),
    T(sndk_conn_link_name, SNDK_CONN_LINK_PHASES),
    T(sndk_adm_phase_name, SNDK_ADM_PHASE_COUNT),
    T(sndk_access_result_name, SNDK_ACC_COUNT),
    T(sndk_errno_call_name, SNDK_CALL_COUNT),
};

/* The values of tb without a name, each reported on stderr. */
static unsigned holes_in(const struct table *tb)
{
    unsigned holes = 0;
    /* The answer past the last value: "?", "unknown", NULL... whatever the function's is. */
    const char *past = tb->name(tb->count);
    for (unsigned v = 0; v < tb->count; v++) {
        const char *n = tb->name(v);
        if (n && n[0] && !(past && strcmp(n, past) == 0))
            continue;
        fprintf(stderr, "%s(%u): %s\n", tb->what, v,
                !n      ? "NULL"
                : !n[0] ? "empty"
                        : "only the out-of-range answer");
        holes++;
    }
    return holes;
}

TEST(names_every_enum_value_has_a_name)
{
    unsigned holes = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        CHECK_MSG(tables[t].count > 0, "%s: empty enum", tables[t].what);
        holes += holes_in(&tables[t]);
    }
    CHECK_MSG(holes == 0, "%u enum value(s) without a name (listed above)", holes);
}

/* The walk must be able to fail: a NULL hole, an empty name and a hole papered over with the
 * fallback are each found. */
static const char *const holed[5] = {[0] = "zero", [2] = "", [3] = "?", [4] = "four"};
static const char *holed_name(unsigned v)
{
    return v < 5 ? holed[v] : "?";
}

TEST(names_walk_finds_holes)
{
    const struct table tb = {"holed_name", holed_name, 5};
    CHECK_EQ_U64(holes_in(&tb), 3);
}
