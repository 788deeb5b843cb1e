/* Fault injection: the rule language of docs/faults.md and the decisions the call sites, the
 * handshake and the data path ask for. */
#include "faults/faults.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/terminate.h"
#include "iwarp/wire.h"
#include "util/log.h"
#include "observe/trace.h"

static const char *const kind_names[SNDK_FAULT_KIND_COUNT] = {
    [SNDK_FAULT_DROP] = "drop",           [SNDK_FAULT_CRC] = "crc",
    [SNDK_FAULT_TERMINATE] = "terminate", [SNDK_FAULT_STALL] = "stall",
    [SNDK_FAULT_DELAY] = "delay",         [SNDK_FAULT_MPA_REJECT] = "mpa_reject",
    [SNDK_FAULT_FAIL] = "fail",           [SNDK_FAULT_CQ_OVERRUN] = "cq_overrun",
};

static const char *const call_names[SNDK_FCALL_COUNT] = {
    [SNDK_FCALL_CQ] = "cq",
    [SNDK_FCALL_PD] = "pd",
    [SNDK_FCALL_QP] = "qp",
    [SNDK_FCALL_SRQ] = "srq",
    [SNDK_FCALL_MR] = "mr",
    [SNDK_FCALL_REGISTER] = "register",
    [SNDK_FCALL_MW] = "mw",
    [SNDK_FCALL_CONNECTOR] = "connector",
    [SNDK_FCALL_LISTENER] = "listener",
};

const char *sndk_fault_kind_name(enum sndk_fault_kind k)
{
    return (unsigned)k < SNDK_FAULT_KIND_COUNT ? kind_names[k] : "?";
}

const char *sndk_fault_call_name(enum sndk_fault_call c)
{
    return (unsigned)c < SNDK_FCALL_COUNT ? call_names[c] : "?";
}

/* Parameters, as bits: which kinds take which. */
enum {
    P_DIR = 1 << 0,
    P_AFTER_FPDUS = 1 << 1,
    P_AFTER_BYTES = 1 << 2,
    P_CONN = 1 << 3,
    P_SIDE = 1 << 4,
    P_COUNT = 1 << 5,
    P_P = 1 << 6,
    P_MS = 1 << 7,
    P_LAYER = 1 << 8,
    P_ETYPE = 1 << 9,
    P_CODE = 1 << 10,
    P_CALL = 1 << 11,
    P_NTH = 1 << 12,
    P_CQ = 1 << 13,
    P_AFTER = 1 << 14,
};

#define P_CONN_SEL (P_CONN | P_SIDE | P_COUNT | P_P)

static const unsigned kind_params[SNDK_FAULT_KIND_COUNT] = {
    [SNDK_FAULT_DROP] = P_DIR | P_AFTER_FPDUS | P_AFTER_BYTES | P_CONN_SEL,
    [SNDK_FAULT_CRC] = P_DIR | P_AFTER_FPDUS | P_CONN_SEL,
    [SNDK_FAULT_TERMINATE] = P_DIR | P_AFTER_FPDUS | P_LAYER | P_ETYPE | P_CODE | P_CONN_SEL,
    [SNDK_FAULT_STALL] = P_DIR | P_AFTER_FPDUS | P_AFTER_BYTES | P_MS | P_CONN_SEL,
    [SNDK_FAULT_DELAY] = P_DIR | P_AFTER_FPDUS | P_MS | P_CONN_SEL,
    [SNDK_FAULT_MPA_REJECT] = P_NTH | P_COUNT | P_P,
    [SNDK_FAULT_FAIL] = P_CALL | P_NTH | P_COUNT | P_P,
    [SNDK_FAULT_CQ_OVERRUN] = P_CQ | P_AFTER,
};

static const struct {
    const char *name;
    unsigned bit;
} param_names[] = {
    {"dir", P_DIR},
    {"after_fpdus", P_AFTER_FPDUS},
    {"after_bytes", P_AFTER_BYTES},
    {"conn", P_CONN},
    {"side", P_SIDE},
    {"count", P_COUNT},
    {"p", P_P},
    {"ms", P_MS},
    {"layer", P_LAYER},
    {"etype", P_ETYPE},
    {"code", P_CODE},
    {"call", P_CALL},
    {"nth", P_NTH},
    {"cq", P_CQ},
    {"after", P_AFTER},
};

/* ---------------------------------------------------------------- parsing */

static bool is_conn_kind(enum sndk_fault_kind k)
{
    return k <= SNDK_FAULT_DELAY;
}

static bool parse_num(const char *s, uint64_t *out)
{
    if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* "P" percent, decimal fraction allowed, into millionths (0 < P <= 100). */
static bool parse_percent(const char *s, uint32_t *ppm)
{
    uint64_t whole = 0, frac = 0, scale = 10000; /* 1 % = 10000 ppm */
    const char *c = s;
    if (!isdigit((unsigned char)*c))
        return false;
    while (isdigit((unsigned char)*c)) {
        whole = whole * 10 + (uint64_t)(*c++ - '0');
        if (whole > 100)
            return false;
    }
    if (*c == '.') {
        c++;
        if (!isdigit((unsigned char)*c))
            return false;
        while (isdigit((unsigned char)*c)) {
            scale /= 10;
            frac += (uint64_t)(*c++ - '0') * scale; /* digits beyond 1e-4 % drop out */
        }
    }
    if (*c)
        return false;
    uint64_t v = whole * 10000 + frac;
    if (v == 0 || v > 1000000)
        return false;
    *ppm = (uint32_t)v;
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static bool parse_param(struct sndk_fault_rule *r, char *item, unsigned *given, char *err,
                        size_t errlen)
{
    char *eq = strchr(item, '=');
    if (!eq) {
        snprintf(err, errlen, "'%s': expected name=value", item);
        return false;
    }
    *eq = '\0';
    char *name = trim(item), *val = trim(eq + 1);
    unsigned bit = 0;
    for (size_t i = 0; i < sizeof param_names / sizeof param_names[0]; i++)
        if (strcmp(name, param_names[i].name) == 0)
            bit = param_names[i].bit;
    if (!bit) {
        snprintf(err, errlen, "unknown parameter '%s'", name);
        return false;
    }
    if (!(kind_params[r->kind] & bit)) {
        snprintf(err, errlen, "'%s' does not take '%s'", kind_names[r->kind], name);
        return false;
    }
    if (*given & bit) {
        snprintf(err, errlen, "'%s' given twice", name);
        return false;
    }
    *given |= bit;
    uint64_t n = 0;
    switch (bit) {
    case P_DIR:
        if (strcmp(val, "tx") == 0)
            r->dir = SNDK_FDIR_TX;
        else if (strcmp(val, "rx") == 0)
            r->dir = SNDK_FDIR_RX;
        else
            goto bad;
        return true;
    case P_SIDE:
        if (strcmp(val, "any") == 0)
            r->side = SNDK_FSIDE_ANY;
        else if (strcmp(val, "active") == 0)
            r->side = SNDK_FSIDE_ACTIVE;
        else if (strcmp(val, "passive") == 0)
            r->side = SNDK_FSIDE_PASSIVE;
        else
            goto bad;
        return true;
    case P_LAYER:
        if (strcmp(val, "rdmap") == 0)
            r->layer = SNDK_TERM_LAYER_RDMAP;
        else if (strcmp(val, "ddp") == 0)
            r->layer = SNDK_TERM_LAYER_DDP;
        else if (strcmp(val, "mpa") == 0)
            r->layer = SNDK_TERM_LAYER_LLP;
        else
            goto bad;
        return true;
    case P_CALL:
        for (int i = 0; i < SNDK_FCALL_COUNT; i++)
            if (strcmp(val, call_names[i]) == 0) {
                r->call = (enum sndk_fault_call)i;
                return true;
            }
        goto bad;
    case P_P:
        if (!parse_percent(val, &r->p_ppm))
            goto bad;
        return true;
    default:
        break;
    }
    if (!parse_num(val, &n))
        goto bad;
    switch (bit) {
    case P_AFTER_FPDUS:
    case P_AFTER_BYTES:
    case P_AFTER:
        r->after = n;
        r->by_bytes = bit == P_AFTER_BYTES;
        return true;
    case P_CONN:
        if (n == 0 || n > UINT32_MAX)
            goto bad;
        r->conn = (uint32_t)n;
        return true;
    case P_CQ:
        if (n == 0 || n > UINT32_MAX)
            goto bad;
        r->cq = (uint32_t)n;
        return true;
    case P_COUNT:
        if (n > UINT32_MAX)
            goto bad;
        r->count = (uint32_t)n;
        return true;
    case P_MS:
        if (n == 0 || n > 3600000)
            goto bad;
        r->ms = (uint32_t)n;
        return true;
    case P_ETYPE:
    case P_CODE:
        if (n > (bit == P_ETYPE ? 0xfu : 0xffu))
            goto bad;
        if (bit == P_ETYPE)
            r->etype = (uint8_t)n;
        else
            r->code = (uint8_t)n;
        return true;
    case P_NTH:
        if (n == 0)
            goto bad;
        r->nth = n;
        return true;
    default:
        break;
    }
bad:
    snprintf(err, errlen, "%s='%s': not a valid value", name, val);
    return false;
}

static bool parse_rule(struct sndk_fault_rule *r, char *item, char *err, size_t errlen)
{
    char *colon = strchr(item, ':');
    if (colon)
        *colon = '\0';
    char *kind = trim(item);
    int k = -1;
    for (int i = 0; i < SNDK_FAULT_KIND_COUNT; i++)
        if (strcmp(kind, kind_names[i]) == 0)
            k = i;
    if (k < 0) {
        snprintf(err, errlen, "unknown fault '%s'", kind);
        return false;
    }
    r->kind = (enum sndk_fault_kind)k;
    r->count = r->kind == SNDK_FAULT_DELAY ? 0 : 1;
    r->nth = 1;
    r->layer = SNDK_TERM_LAYER_RDMAP;
    r->etype = SNDK_TERM_RDMAP_LOCAL_CATA;
    unsigned given = 0;
    if (colon) {
        char *save = NULL;
        for (char *p = strtok_r(colon + 1, ",", &save); p; p = strtok_r(NULL, ",", &save))
            if (!parse_param(r, p, &given, err, errlen))
                return false;
    }
    if ((given & P_AFTER_FPDUS) && (given & P_AFTER_BYTES)) {
        snprintf(err, errlen, "after_fpdus and after_bytes exclude each other");
        return false;
    }
    if ((given & P_AFTER_BYTES) && (given & P_P)) {
        snprintf(err, errlen, "p draws per FPDU: it does not go with after_bytes");
        return false;
    }
    if ((kind_params[r->kind] & P_MS) && !(given & P_MS)) {
        snprintf(err, errlen, "'%s' needs ms=", kind_names[r->kind]);
        return false;
    }
    if (r->kind == SNDK_FAULT_FAIL && !(given & P_CALL)) {
        snprintf(err, errlen,
                 "'fail' needs call= (cq, pd, qp, srq, mr, register, mw, "
                 "connector, listener)");
        return false;
    }
    if (r->kind == SNDK_FAULT_TERMINATE && r->dir != SNDK_FDIR_TX) {
        snprintf(err, errlen, "'terminate' is sent: dir=tx only");
        return false;
    }
    if (r->kind == SNDK_FAULT_TERMINATE &&
        strcmp(sndk_term_code_name(r->layer, r->etype, r->code), "unknown") == 0) {
        snprintf(err, errlen,
                 "terminate layer/etype/code %u/%u/%u: not a Terminate of "
                 "RFC 5040/5041/5044",
                 r->layer, r->etype, r->code);
        return false;
    }
    return true;
}

bool sndk_faults_parse(const char *text, struct sndk_faults **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!text)
        return true;
    char *copy = strdup(text);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    struct sndk_faults *f = calloc(1, sizeof *f);
    if (!f) {
        free(copy);
        snprintf(err, errlen, "out of memory");
        return false;
    }
    f->seed = 1;
    sndk_mutex_init_ranked(&f->lock, SNDK_LOCK_FAULTS);
    char *save = NULL;
    bool ok = true;
    for (char *item = strtok_r(copy, ";", &save); item && ok; item = strtok_r(NULL, ";", &save)) {
        char *t = trim(item);
        if (!*t)
            continue;
        if (strncmp(t, "seed", 4) == 0 && (t[4] == '=' || isspace((unsigned char)t[4]))) {
            char *v = strchr(t, '=');
            if (!v || !parse_num(trim(v + 1), &f->seed)) {
                snprintf(err, errlen, "'%s': seed=N expected", t);
                ok = false;
            }
            continue;
        }
        if (f->n == SNDK_FAULT_MAX_RULES) {
            snprintf(err, errlen, "more than %d rules", SNDK_FAULT_MAX_RULES);
            ok = false;
            break;
        }
        struct sndk_fault_rule *r = &f->rule[f->n];
        snprintf(r->text, sizeof r->text, "%s", t);
        r->index = f->n + 1;
        char msg[160];
        if (!parse_rule(r, t, msg, sizeof msg)) {
            snprintf(err, errlen, "rule %u '%s': %s", r->index, r->text, msg);
            ok = false;
            break;
        }
        if (is_conn_kind(r->kind))
            f->any_conn = true;
        f->n++;
    }
    free(copy);
    if (!ok || f->n == 0) {
        sndk_faults_free(f);
        return ok;
    }
    for (unsigned i = 0; i < f->n; i++)
        f->rng[i] = f->seed ^ (0x9e3779b97f4a7c15ull * (i + 1));
    *out = f;
    return true;
}

void sndk_faults_free(struct sndk_faults *f)
{
    if (!f)
        return;
    sndk_mutex_destroy(&f->lock);
    free(f);
}

/* ---------------------------------------------------------------- firing */

/* splitmix64: small, fast, and the same sequence everywhere. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool draw(uint64_t *s, uint32_t ppm)
{
    return next_rand(s) % 1000000u < ppm;
}

/* Count, trace and log one firing; fc: the connection (NULL for call and handshake rules);
 * nth > 1: a repeating rule's later firing, logged at debug only. */
static void fired(struct sndk_faults *f, const struct sndk_fault_rule *r,
                  const struct sndk_fault_conn *fc, const void *obj, const char *what, uint64_t nth)
{
    if (f->ctrs)
        sndk_ctr_inc(f->ctrs, SNDK_CTR_INJECTED);
    const char *side = fc ? (fc->active ? "active" : "passive") : "";
    SNDK_TRACE("fault.injected", "object", obj,
               "\"kind\":\"%s\",\"rule\":%u,\"conn\":%u,\"side\":\"%s\"", kind_names[r->kind],
               r->index, fc ? fc->conn_no : 0u, side);
    if (nth > 1) { /* delay, p=: the first firing is enough at warn */
        sndk_debug("fault", "injected %s (rule %u) on connection #%u again (%llu times): %s",
                   kind_names[r->kind], r->index, fc ? fc->conn_no : 0u, (unsigned long long)nth,
                   what);
        return;
    }
    if (fc)
        sndk_warn("fault", "injected %s (rule %u \"%s\") on connection #%u (%s, QP %p): %s",
                  kind_names[r->kind], r->index, r->text, fc->conn_no, side, obj, what);
    else
        sndk_warn("fault", "injected %s (rule %u \"%s\") (%p): %s", kind_names[r->kind], r->index,
                  r->text, obj, what);
}

void sndk_faults_fired(struct sndk_faults *f, const struct sndk_fault_rule *r, const void *obj,
                       const char *what)
{
    if (f)
        fired(f, r, NULL, obj, what, 1);
}

/* An adapter-wide rule with nth/count/p over the occurrences counted in *seen (under f->lock). */
static bool occurrence_fires(struct sndk_faults *f, unsigned i, uint64_t seen)
{
    struct sndk_fault_rule *r = &f->rule[i];
    if (seen < r->nth)
        return false;
    uint64_t fired = atomic_load(&r->fired);
    if (r->count && fired >= r->count)
        return false;
    if (r->p_ppm)
        return draw(&f->rng[i], r->p_ppm);
    return r->count == 0 || seen < r->nth + r->count;
}

bool sndk_faults_call(struct sndk_faults *f, enum sndk_fault_call call, const void *obj)
{
    if (!f)
        return false;
    const struct sndk_fault_rule *hit = NULL;
    sndk_mutex_lock(&f->lock);
    uint64_t seen = ++f->calls[call];
    for (unsigned i = 0; i < f->n && !hit; i++) {
        struct sndk_fault_rule *r = &f->rule[i];
        if (r->kind == SNDK_FAULT_FAIL && r->call == call && occurrence_fires(f, i, seen)) {
            atomic_fetch_add(&r->fired, 1);
            hit = r;
        }
    }
    sndk_mutex_unlock(&f->lock);
    if (!hit)
        return false;
    char what[64];
    snprintf(what, sizeof what, "%s call %" PRIu64 " fails with STATUS_INSUFFICIENT_RESOURCES",
             call_names[call], seen);
    fired(f, hit, NULL, obj, what, 1);
    return true;
}

bool sndk_faults_mpa_reject(struct sndk_faults *f, const void *obj)
{
    if (!f)
        return false;
    const struct sndk_fault_rule *hit = NULL;
    sndk_mutex_lock(&f->lock);
    uint64_t seen = ++f->mpa_requests;
    for (unsigned i = 0; i < f->n && !hit; i++) {
        struct sndk_fault_rule *r = &f->rule[i];
        if (r->kind == SNDK_FAULT_MPA_REJECT && occurrence_fires(f, i, seen)) {
            atomic_fetch_add(&r->fired, 1);
            hit = r;
        }
    }
    sndk_mutex_unlock(&f->lock);
    if (!hit)
        return false;
    char what[48];
    snprintf(what, sizeof what, "MPA Request %" PRIu64 " rejected", seen);
    fired(f, hit, NULL, obj, what, 1);
    return true;
}

uint64_t sndk_faults_cq_overrun_at(struct sndk_faults *f, const struct sndk_fault_rule **rule,
                                   unsigned *cq_no)
{
    *rule = NULL;
    *cq_no = 0;
    if (!f)
        return UINT64_MAX;
    unsigned no = atomic_fetch_add(&f->cqs, 1) + 1;
    *cq_no = no;
    for (unsigned i = 0; i < f->n; i++) {
        struct sndk_fault_rule *r = &f->rule[i];
        if (r->kind == SNDK_FAULT_CQ_OVERRUN && (r->cq == 0 || r->cq == no)) {
            *rule = r;
            return r->after;
        }
    }
    return UINT64_MAX;
}

/* ---------------------------------------------------------------- connections */

static bool side_matches(enum sndk_fault_side s, bool active)
{
    return s == SNDK_FSIDE_ANY || (s == SNDK_FSIDE_ACTIVE) == active;
}

static void update_byte_mark(struct sndk_fault_conn *fc, enum sndk_fault_dir dir)
{
    struct sndk_fault_dirstate *d = &fc->d[dir];
    d->byte_mark = UINT64_MAX;
    for (unsigned i = 0; i < fc->n; i++) {
        const struct sndk_fault_arm *m = &fc->arm[i];
        const struct sndk_fault_rule *r = m->rule;
        if (r->dir != dir || !r->by_bytes || m->fired)
            continue;
        if (r->after >= d->bytes && r->after < d->byte_mark)
            d->byte_mark = r->after;
    }
}

struct sndk_fault_conn *sndk_faults_conn_new(struct sndk_faults *f, bool active, bool crc)
{
    if (!f || !f->any_conn)
        return NULL;
    unsigned no = atomic_fetch_add(&f->conns, 1) + 1;
    struct sndk_fault_conn *fc = NULL;
    for (unsigned i = 0; i < f->n; i++) {
        const struct sndk_fault_rule *r = &f->rule[i];
        if (!is_conn_kind(r->kind) || (r->conn && r->conn != no) || !side_matches(r->side, active))
            continue;
        if (!fc) {
            fc = calloc(1, sizeof *fc);
            if (!fc) {
                sndk_err("fault", "connection #%u: no memory for its fault rules", no);
                return NULL;
            }
            fc->faults = f;
            fc->conn_no = no;
            fc->active = active;
            fc->crc = crc;
            for (int d = 0; d < 2; d++)
                fc->d[d].stall_at = UINT64_MAX;
        }
        struct sndk_fault_arm *m = &fc->arm[fc->n++];
        m->rule = r;
        m->rng = f->seed ^ (0x9e3779b97f4a7c15ull * r->index) ^ (0xd1b54a32d192ed03ull * no);
    }
    if (fc) {
        update_byte_mark(fc, SNDK_FDIR_TX);
        update_byte_mark(fc, SNDK_FDIR_RX);
    }
    return fc;
}

void sndk_fault_conn_free(struct sndk_fault_conn *fc)
{
    free(fc);
}

static enum sndk_fault_action action_of(enum sndk_fault_kind k)
{
    switch (k) {
    case SNDK_FAULT_DROP:
        return SNDK_FACT_DROP;
    case SNDK_FAULT_CRC:
        return SNDK_FACT_CRC;
    case SNDK_FAULT_TERMINATE:
        return SNDK_FACT_TERMINATE;
    default:
        return SNDK_FACT_STALL;
    }
}

enum sndk_fault_action sndk_fault_fpdu(struct sndk_fault_conn *fc, enum sndk_fault_dir dir,
                                       const void *obj, uint32_t *ms,
                                       const struct sndk_fault_rule **rule)
{
    struct sndk_fault_dirstate *d = &fc->d[dir];
    uint64_t k = d->fpdus; /* FPDUs passed; this is number k + 1 */
    for (unsigned i = 0; i < fc->n; i++) {
        struct sndk_fault_arm *m = &fc->arm[i];
        const struct sndk_fault_rule *r = m->rule;
        if (r->dir != dir || r->by_bytes || k < r->after)
            continue;
        if (r->count && m->fired >= r->count)
            continue;
        enum sndk_fault_action act = action_of(r->kind);
        if (act == SNDK_FACT_STALL && d->stall_at == k)
            continue; /* this FPDU already waited */
        if (r->p_ppm) {
            if (!draw(&m->rng, r->p_ppm))
                continue;
        } else if (r->kind != SNDK_FAULT_DELAY && k != r->after) {
            continue;
        }
        if (act == SNDK_FACT_CRC && !fc->crc) {
            struct sndk_faults *f = fc->faults;
            if (!atomic_exchange(&f->crc_off_logged, true))
                sndk_warn("fault", "rule %u \"%s\": connection #%u has no CRC: not injected",
                          r->index, r->text, fc->conn_no);
            continue;
        }
        m->fired++;
        if (act == SNDK_FACT_STALL) {
            d->stall_at = k;
            *ms = r->ms;
        }
        if (rule)
            *rule = r;
        char what[64];
        snprintf(what, sizeof what, "%s FPDU %" PRIu64, dir == SNDK_FDIR_TX ? "tx" : "rx", k + 1);
        fired(fc->faults, r, fc, obj, what, m->fired);
        return act;
    }
    return SNDK_FACT_NONE;
}

enum sndk_fault_action sndk_fault_bytes(struct sndk_fault_conn *fc, enum sndk_fault_dir dir,
                                        const void *obj, uint32_t *ms)
{
    struct sndk_fault_dirstate *d = &fc->d[dir];
    enum sndk_fault_action act = SNDK_FACT_NONE;
    for (unsigned i = 0; i < fc->n && act == SNDK_FACT_NONE; i++) {
        struct sndk_fault_arm *m = &fc->arm[i];
        const struct sndk_fault_rule *r = m->rule;
        if (r->dir != dir || !r->by_bytes || m->fired || r->after != d->bytes)
            continue;
        m->fired++;
        act = action_of(r->kind);
        if (act == SNDK_FACT_STALL)
            *ms = r->ms;
        char what[64];
        snprintf(what, sizeof what, "%s byte %" PRIu64, dir == SNDK_FDIR_TX ? "tx" : "rx",
                 d->bytes);
        fired(fc->faults, r, fc, obj, what, 1);
    }
    update_byte_mark(fc, dir);
    return act;
}
