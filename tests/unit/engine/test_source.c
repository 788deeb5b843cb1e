/* fd sources: delivery on the owning thread, modify, removal from inside and outside. */
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int make_evfd(uint64_t initial)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(fd >= 0);
    if (initial)
        CHECK(write(fd, &initial, sizeof initial) == sizeof initial);
    return fd;
}

/* ---- delivery on the right thread */

struct tsrc {
    struct sndk_source s;
    struct sndk_work done;
    struct sndk_engine *e;
    atomic_uint calls;
    atomic_int thread;
    atomic_uint wrong_events;
    atomic_uint hups; /* calls that reported EPOLLHUP (hup_fn) */
    struct harness_event fired, done_ev;
};

static void tsrc_fn(struct sndk_source *s, uint32_t events)
{
    struct tsrc *t = (struct tsrc *)s;
    if (!(events & EPOLLIN))
        atomic_fetch_add(&t->wrong_events, 1);
    uint64_t v;
    if (read(s->fd, &v, sizeof v) < 0) /* consume: level-triggered would call again */
        atomic_fetch_add(&t->wrong_events, 1);
    atomic_store(&t->thread, sndk_engine_current_thread(t->e));
    atomic_fetch_add(&t->calls, 1);
    harness_event_signal(&t->fired);
}

static void tsrc_done(struct sndk_work *w)
{
    struct tsrc *t = container_of(w, struct tsrc, done);
    close(t->s.fd);
    harness_event_signal(&t->done_ev);
}

static void tsrc_init(struct tsrc *t, struct sndk_engine *e)
{
    t->s = (struct sndk_source){0}; /* a source starts zeroed (engine.h) */
    t->e = e;
    atomic_init(&t->calls, 0);
    atomic_init(&t->thread, -1);
    atomic_init(&t->wrong_events, 0);
    atomic_init(&t->hups, 0);
    harness_event_init(&t->fired);
    harness_event_init(&t->done_ev);
    sndk_work_init(&t->done, tsrc_done);
}

TEST(source_delivery_on_its_thread)
{
    enum { T = 3 };
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(T, SNDK_ENGINE_DEFAULT_SPIN);
    struct tsrc src[2 * T];
    for (int i = 0; i < 2 * T; i++) {
        tsrc_init(&src[i], e);
        /* The first T pinned, the next T "least loaded": one more on each thread. */
        int thread = i < T ? (T - 1 - i) : -1;
        CHECK_EQ_I64(sndk_source_add(e, &src[i].s, make_evfd(0), EPOLLIN, tsrc_fn, thread), 0);
        if (thread >= 0)
            CHECK_EQ_U64(sndk_source_thread(&src[i].s), (unsigned)thread);
    }
    unsigned per_thread[T] = {0};
    for (int i = 0; i < 2 * T; i++)
        per_thread[sndk_source_thread(&src[i].s)]++;
    for (int i = 0; i < T; i++)
        CHECK_EQ_U64(per_thread[i], 2);

    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 2 * T; i++) {
            uint64_t one = 1;
            CHECK(write(src[i].s.fd, &one, sizeof one) == sizeof one);
        }
        for (int i = 0; i < 2 * T; i++) {
            CHECK(harness_event_wait(&src[i].fired, (unsigned)round, WAIT_MS));
            CHECK_EQ_I64(atomic_load(&src[i].thread), (int)sndk_source_thread(&src[i].s));
        }
    }
    for (int i = 0; i < 2 * T; i++) {
        sndk_source_remove(&src[i].s, &src[i].done);
        CHECK(harness_event_wait(&src[i].done_ev, 1, WAIT_MS));
        CHECK_EQ_U64(atomic_load(&src[i].calls), 3);
        CHECK_EQ_U64(atomic_load(&src[i].wrong_events), 0);
    }
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), base);
    for (int i = 0; i < 2 * T; i++) {
        harness_event_destroy(&src[i].fired);
        harness_event_destroy(&src[i].done_ev);
    }
}

TEST(source_add_errors)
{
    struct sndk_engine *e = mk_engine(2, 0);
    struct tsrc t;
    tsrc_init(&t, e);
    int fd = make_evfd(0);
    CHECK(!sndk_source_watched(&t.s)); /* never added */
    CHECK_EQ_I64(sndk_source_add(e, &t.s, fd, EPOLLIN, tsrc_fn, 2), -EINVAL);
    CHECK_EQ_I64(sndk_source_add(e, &t.s, fd, EPOLLIN, tsrc_fn, -2), -EINVAL);
    CHECK_EQ_I64(sndk_source_add(e, &t.s, -1, EPOLLIN, tsrc_fn, 0), -EINVAL);
    CHECK_EQ_I64(sndk_source_add(e, &t.s, 9999, EPOLLIN, tsrc_fn, 0), -EBADF);
    CHECK(!sndk_source_watched(&t.s)); /* failed adds leave it unwatched */
    CHECK_EQ_I64(sndk_source_add(e, &t.s, fd, EPOLLIN, tsrc_fn, 0), 0);
    CHECK(sndk_source_watched(&t.s));
    struct sndk_source dup = {0};
    CHECK_EQ_I64(sndk_source_add(e, &dup, fd, EPOLLIN, tsrc_fn, 0), -EEXIST);
    /* s already added: refused, and s keeps its fields */
    CHECK_EQ_I64(sndk_source_add(e, &t.s, fd, EPOLLIN, tsrc_fn, 1), -EINVAL);
    CHECK_EQ_U64(sndk_source_thread(&t.s), 0);
    CHECK(sndk_source_watched(&t.s));
    sndk_source_remove(&t.s, &t.done);
    CHECK(!sndk_source_watched(&t.s)); /* at once, before done runs */
    CHECK(harness_event_wait(&t.done_ev, 1, WAIT_MS));
    CHECK_EQ_I64(sndk_source_modify(&t.s, EPOLLIN), -ENOENT);
    sndk_engine_destroy(e);
    harness_event_destroy(&t.fired);
    harness_event_destroy(&t.done_ev);
}

/* ---- modify: one-shot re-arming, and switching interest */

TEST(source_modify_oneshot)
{
    struct sndk_engine *e = mk_engine(1, 0);
    struct tsrc t;
    tsrc_init(&t, e);
    int fd = make_evfd(0);
    CHECK_EQ_I64(sndk_source_add(e, &t.s, fd, EPOLLIN | EPOLLONESHOT, tsrc_fn, 0), 0);
    uint64_t one = 1;
    CHECK(write(fd, &one, sizeof one) == sizeof one);
    CHECK(harness_event_wait(&t.fired, 1, WAIT_MS));
    /* Disarmed: a new write is not reported until modify re-arms. */
    CHECK(write(fd, &one, sizeof one) == sizeof one);
    flush_thread(e, 0);
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 1);
    CHECK_EQ_I64(sndk_source_modify(&t.s, EPOLLIN | EPOLLONESHOT), 0);
    CHECK(harness_event_wait(&t.fired, 2, WAIT_MS));
    sndk_source_remove(&t.s, &t.done);
    CHECK(harness_event_wait(&t.done_ev, 1, WAIT_MS));
    CHECK_EQ_U64(atomic_load(&t.calls), 2);
    sndk_engine_destroy(e);
    harness_event_destroy(&t.fired);
    harness_event_destroy(&t.done_ev);
}

/* ---- quiet: out of epoll altogether until the next modify */

/* A source on fd, added on thread 0 of e and made quiet at once. */
static void quiet_source(struct tsrc *t, struct sndk_engine *e, int fd, sndk_source_fn fn)
{
    tsrc_init(t, e);
    CHECK_EQ_I64(sndk_source_add(e, &t->s, fd, EPOLLIN, fn, 0), 0);
    CHECK_EQ_I64(sndk_source_quiet(&t->s), 0);
}

/* The engine, a quiet source on a fresh eventfd (returned), and the fds open before both. */
static struct sndk_engine *quiet_evfd_source(struct tsrc *t, int *fds_before, int *fd)
{
    *fds_before = harness_open_fds();
    struct sndk_engine *e = mk_engine(1, 0);
    *fd = make_evfd(0);
    quiet_source(t, e, *fd, tsrc_fn);
    return e;
}

/* Remove it, wait for its done item (which closes its fd), and leave nothing open. */
static void quiet_source_end(struct tsrc *t, struct sndk_engine *e, int fds_before)
{
    sndk_source_remove(&t->s, &t->done);
    CHECK(!sndk_source_watched(&t->s));
    CHECK(harness_event_wait(&t->done_ev, 1, WAIT_MS));
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), fds_before);
    harness_event_destroy(&t->fired);
    harness_event_destroy(&t->done_ev);
}

TEST(source_quiet_reports_nothing_until_watched_again)
{
    struct tsrc t;
    int base, fd;
    struct sndk_engine *e = quiet_evfd_source(&t, &base, &fd);
    CHECK_EQ_I64(sndk_source_quiet(&t.s), 0); /* already quiet: nothing to do */
    CHECK(sndk_source_watched(&t.s));         /* still added: the owner removes it as ever */
    uint64_t one = 1;
    CHECK(write(fd, &one, sizeof one) == sizeof one);
    flush_thread(e, 0);
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 0);
    /* Watched again: what came while it was quiet is reported at once (level-triggered). */
    CHECK_EQ_I64(sndk_source_modify(&t.s, EPOLLIN), 0);
    CHECK(harness_event_wait(&t.fired, 1, WAIT_MS));
    CHECK(write(fd, &one, sizeof one) == sizeof one);
    CHECK(harness_event_wait(&t.fired, 2, WAIT_MS));
    /* Removed while quiet: done runs, and neither call finds it afterwards. */
    CHECK_EQ_I64(sndk_source_quiet(&t.s), 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 2);
    CHECK_EQ_U64(atomic_load(&t.wrong_events), 0);
    quiet_source_end(&t, e, base);
    CHECK_EQ_I64(sndk_source_quiet(&t.s), -ENOENT);
    CHECK_EQ_I64(sndk_source_modify(&t.s, EPOLLIN), -ENOENT);
}

/* Watched for nothing (events 0), a fd still reports a hang-up; quiet, it does not, until a
 * modify puts it back. The fn quiets itself on the hang-up, from its own batch. */
static void hup_fn(struct sndk_source *s, uint32_t events)
{
    struct tsrc *t = (struct tsrc *)s;
    atomic_fetch_add(&t->calls, 1);
    if (events & EPOLLHUP)
        atomic_fetch_add(&t->hups, 1);
    CHECK_EQ_I64(sndk_source_quiet(s), 0); /* a hang-up stays: level-triggered, it would repeat */
    harness_event_signal(&t->fired);
}

TEST(source_quiet_hides_a_hang_up_that_events_0_reports)
{
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(1, 0);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    struct tsrc t;
    quiet_source(&t, e, sv[0], hup_fn);
    close(sv[1]); /* the peer hangs up while nobody watches */
    flush_thread(e, 0);
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 0);
    /* Back in epoll watched for nothing: the hang-up is reported even so. */
    CHECK_EQ_I64(sndk_source_modify(&t.s, 0), 0);
    CHECK(harness_event_wait(&t.fired, 1, WAIT_MS));
    CHECK_EQ_U64(atomic_load(&t.hups), 1);
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 1); /* quiet again, from its own fn */
    quiet_source_end(&t, e, base);
}

/* A quiet source whose fd cannot go back into epoll (here it became a regular file, which epoll
 * refuses) gets the error from modify and stays quiet: still added, nothing reported, removed
 * as any other. */
TEST(source_quiet_stays_quiet_when_it_cannot_be_watched_again)
{
    struct tsrc t;
    int base, fd;
    struct sndk_engine *e = quiet_evfd_source(&t, &base, &fd);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    CHECK(dup2(fileno(f), fd) == fd); /* same number, now a regular file */
    fclose(f);
    CHECK_EQ_I64(sndk_source_modify(&t.s, EPOLLIN), -EPERM);
    CHECK(sndk_source_watched(&t.s));
    CHECK_EQ_I64(sndk_source_quiet(&t.s), 0); /* still quiet: nothing to take out */
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&t.calls), 0);
    quiet_source_end(&t, e, base);
}

/* ---- remove from inside the source's own fn */

struct selfrm {
    struct sndk_source s;
    struct sndk_work done;
    atomic_uint calls;
    atomic_uint calls_after_remove;
    bool removed;
    bool use_done;
    struct harness_event ev;
};

static void selfrm_done(struct sndk_work *w)
{
    struct selfrm *r = container_of(w, struct selfrm, done);
    close(r->s.fd);
    harness_event_signal(&r->ev);
}

static void selfrm_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct selfrm *r = (struct selfrm *)s;
    atomic_fetch_add(&r->calls, 1);
    if (r->removed) {
        atomic_fetch_add(&r->calls_after_remove, 1);
        return;
    }
    /* The fd stays readable (never read): level-triggered epoll would call again at once. */
    r->removed = true;
    if (r->use_done) {
        sndk_source_remove(s, &r->done);
    } else {
        /* Removing itself from its own fn with no done: once this fn returns nothing is in
         * flight, so the fd may be closed right here. */
        sndk_source_remove(s, NULL);
        close(s->fd);
        harness_event_signal(&r->ev);
    }
}

TEST(source_remove_from_own_fn)
{
    int base = harness_open_fds();
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        for (int use_done = 0; use_done < 2; use_done++) {
            struct selfrm *r = calloc(1, sizeof *r);
            CHECK(r);
            r->use_done = use_done;
            harness_event_init(&r->ev);
            sndk_work_init(&r->done, selfrm_done);
            CHECK_EQ_I64(sndk_source_add(e, &r->s, make_evfd(1), EPOLLIN, selfrm_fn, -1), 0);
            CHECK(harness_event_wait(&r->ev, 1, WAIT_MS));
            unsigned thread = sndk_source_thread(&r->s);
            flush_thread(e, thread);
            flush_thread(e, thread);
            CHECK_EQ_U64(atomic_load(&r->calls), 1);
            CHECK_EQ_U64(atomic_load(&r->calls_after_remove), 0);
            harness_event_destroy(&r->ev);
            free(r);
        }
        sndk_engine_destroy(e);
    }
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* ---- one source's fn removes another source of the same thread (same epoll batch) */

struct pair_src {
    struct sndk_source s;
    struct sndk_work done;
    struct pair_src *other;
    atomic_uint *frees;
    bool removed; /* only touched on their common thread */
};

static void pair_done(struct sndk_work *w)
{
    struct pair_src *p = container_of(w, struct pair_src, done);
    atomic_uint *frees = p->frees;
    free(p); /* the test closes the fds: it may still be writing to them */ /* a later entry of the batch still pointing here would be a use after free */
    atomic_fetch_add(frees, 1);
}

static void pair_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct pair_src *p = (struct pair_src *)s;
    CHECK(!p->removed);
    if (p->other) {
        p->other->removed = true;
        p->other->other = NULL;
        sndk_source_remove(&p->other->s, &p->other->done);
        p->other = NULL;
    }
    if (!p->removed) {
        p->removed = true;
        sndk_source_remove(s, &p->done);
    }
}

TEST(source_remove_other_in_same_batch)
{
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(1, 0);
    static atomic_uint frees;
    for (int i = 0; i < 200; i++) {
        struct pair_src *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        CHECK(a && b);
        a->other = b;
        b->other = a;
        a->frees = b->frees = &frees;
        sndk_work_init(&a->done, pair_done);
        sndk_work_init(&b->done, pair_done);
        /* Both added before either is readable (a's fn may remove b only once b is added),
         * then made readable back to back so that one batch usually holds both. */
        int fa = make_evfd(0), fb = make_evfd(0);
        CHECK_EQ_I64(sndk_source_add(e, &a->s, fa, EPOLLIN, pair_fn, 0), 0);
        CHECK_EQ_I64(sndk_source_add(e, &b->s, fb, EPOLLIN, pair_fn, 0), 0);
        uint64_t one = 1;
        CHECK(write(fa, &one, sizeof one) == sizeof one);
        CHECK(write(fb, &one, sizeof one) == sizeof one);
        CHECK(wait_ge(&frees, 2u * (unsigned)(i + 1), WAIT_MS));
        close(fa);
        close(fb);
    }
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* ---- remove from another thread while the source keeps firing */

struct racer {
    struct sndk_source s;
    struct sndk_work done;
    atomic_uint calls;
    atomic_bool done_ran;
    atomic_uint calls_after_done;
    atomic_int in_fn;
    atomic_uint overlap;
};

static void racer_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct racer *r = (struct racer *)s;
    if (atomic_fetch_add(&r->in_fn, 1) != 0)
        atomic_fetch_add(&r->overlap, 1);
    if (atomic_load(&r->done_ran))
        atomic_fetch_add(&r->calls_after_done, 1);
    atomic_fetch_add(&r->calls, 1);
    /* Never read: the fd stays readable and the thread calls us as fast as it can. */
    atomic_fetch_sub(&r->in_fn, 1);
}

static void racer_done(struct sndk_work *w)
{
    struct racer *r = container_of(w, struct racer, done);
    if (atomic_load(&r->in_fn) != 0)
        atomic_fetch_add(&r->overlap, 1);
    atomic_store(&r->done_ran, true);
}

static bool racer_done_pred(void *arg)
{
    return atomic_load(&((struct racer *)arg)->done_ran);
}

TEST_T(source_remove_concurrent_with_readiness, 60)
{
    int base = harness_open_fds();
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct sndk_engine *e = mk_engine(threads, SNDK_ENGINE_DEFAULT_SPIN);
        for (int i = 0; i < 100; i++) {
            struct racer *r = calloc(1, sizeof *r);
            CHECK(r);
            sndk_work_init(&r->done, racer_done);
            int fd = make_evfd(1);
            CHECK_EQ_I64(sndk_source_add(e, &r->s, fd, EPOLLIN, racer_fn, -1), 0);
            CHECK(wait_ge(&r->calls, 1u + (unsigned)(i % 7), WAIT_MS));
            sndk_source_remove(&r->s, &r->done);
            CHECK(harness_wait_until(racer_done_pred, r, WAIT_MS));
            /* Let the thread go round a few more times: it must not call fn again. */
            flush_thread(e, sndk_source_thread(&r->s));
            flush_thread(e, sndk_source_thread(&r->s));
            CHECK_EQ_U64(atomic_load(&r->calls_after_done), 0);
            CHECK_EQ_U64(atomic_load(&r->overlap), 0);
            close(fd);
            free(r);
        }
        sndk_engine_destroy(e);
    }
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* ---- remove before add (finding F3)
 *
 * F3: a QP publishes its connection (state CONNECTED, on its CQs) a moment before its attach
 * adds the socket source. Another thread that fails the connection in that moment (a close, a
 * CQ poll reading a bad FPDU) removed a source that was not added yet: the engine logged
 * "source fd 0: remove in state UNUSED" and dropped the done item, which was the QP's last
 * reference for the connection, so the QP's close never completed. The add that followed put
 * the socket in epoll for good. Now the add completes such a removal: nothing stays in epoll,
 * fn is never called, done runs once, on the source's thread. */

struct early {
    struct sndk_source s;
    struct sndk_work done;
    struct sndk_engine *e;
    int fd;
    atomic_uint calls;
    atomic_uint dones;
    atomic_int done_thread;
    atomic_uint calls_after_done;
    /* the add from a work item on a progress thread (the QP attach's situation) */
    struct sndk_work adder;
    unsigned add_thread;
    atomic_int add_rc;
    struct harness_event adder_ready, removed, added;
};

static void early_fn(struct sndk_source *s, uint32_t events)
{
    (void)events;
    struct early *r = container_of(s, struct early, s);
    if (atomic_load(&r->dones))
        atomic_fetch_add(&r->calls_after_done, 1);
    atomic_fetch_add(&r->calls, 1); /* never read: the fd stays readable */
}

static void early_done(struct sndk_work *w)
{
    struct early *r = container_of(w, struct early, done);
    atomic_store(&r->done_thread, sndk_engine_current_thread(r->e));
    atomic_fetch_add(&r->dones, 1);
}

static struct early *early_new(struct sndk_engine *e)
{
    struct early *r = calloc(1, sizeof *r); /* the source zeroed, as in every NDK object */
    CHECK(r);
    r->e = e;
    r->fd = make_evfd(1); /* readable from the start: fn would be called at once if watched */
    atomic_init(&r->done_thread, -1);
    atomic_init(&r->add_rc, 1);
    sndk_work_init(&r->done, early_done);
    harness_event_init(&r->adder_ready);
    harness_event_init(&r->removed);
    harness_event_init(&r->added);
    return r;
}

/* After done: fn was never called, and fd is no longer in (or never was in) the thread's
 * epoll: a fresh source can watch it on the same thread. */
static void early_check_and_free(struct early *r, unsigned thread)
{
    CHECK(wait_ge(&r->dones, 1, WAIT_MS));
    CHECK_EQ_I64(atomic_load(&r->done_thread), (int)thread);
    CHECK_EQ_U64(sndk_source_thread(&r->s), thread);
    flush_thread(r->e, thread);
    flush_thread(r->e, thread);
    CHECK_EQ_U64(atomic_load(&r->dones), 1);
    CHECK_EQ_U64(atomic_load(&r->calls), 0);
    CHECK_EQ_I64(sndk_source_modify(&r->s, EPOLLIN), -ENOENT);
    struct tsrc probe;
    tsrc_init(&probe, r->e);
    CHECK_EQ_I64(sndk_source_add(r->e, &probe.s, r->fd, EPOLLIN, tsrc_fn, (int)thread), 0);
    CHECK(harness_event_wait(&probe.fired, 1, WAIT_MS)); /* tsrc_fn reads the count */
    sndk_source_remove(&probe.s, &probe.done);
    CHECK(harness_event_wait(&probe.done_ev, 1, WAIT_MS)); /* tsrc_done closes r->fd */
    harness_event_destroy(&probe.fired);
    harness_event_destroy(&probe.done_ev);
    harness_event_destroy(&r->adder_ready);
    harness_event_destroy(&r->removed);
    harness_event_destroy(&r->added);
    free(r);
}

/* Removed (with a done item) while never added, then added: the add completes the removal. */
TEST(source_remove_before_add)
{
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    for (int thread = -1; thread < 2; thread++) {
        struct early *r = early_new(e);
        sndk_source_remove(&r->s, &r->done); /* logged as an error; must not be lost */
        flush_thread(e, 0);
        flush_thread(e, 1);
        CHECK_EQ_U64(atomic_load(&r->dones), 0); /* not before the add: it would free s */
        CHECK_EQ_I64(sndk_source_add(e, &r->s, r->fd, EPOLLIN, early_fn, thread), 0);
        CHECK(!sndk_source_watched(&r->s)); /* the add completed the early removal */
        early_check_and_free(r, thread < 0 ? sndk_source_thread(&r->s) : (unsigned)thread);
    }
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* The F3 interleaving itself: a work item on the source's own progress thread is about to add
 * it (the QP attach runs in the connector's work item) when another thread removes it. */
static void early_adder_fn(struct sndk_work *w)
{
    struct early *r = container_of(w, struct early, adder);
    harness_event_signal(&r->adder_ready);
    if (!harness_event_wait(&r->removed, 1, WAIT_MS))
        return; /* the test fails on add_rc */
    atomic_store(&r->add_rc, sndk_source_add(r->e, &r->s, r->fd, EPOLLIN, early_fn,
                                             (int)r->add_thread));
    harness_event_signal(&r->added);
}

TEST(source_remove_while_its_thread_is_about_to_add)
{
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    for (unsigned thread = 0; thread < 2; thread++) {
        struct early *r = early_new(e);
        r->add_thread = thread;
        sndk_work_init(&r->adder, early_adder_fn);
        CHECK(sndk_engine_queue_on(e, thread, &r->adder));
        CHECK(harness_event_wait(&r->adder_ready, 1, WAIT_MS));
        sndk_source_remove(&r->s, &r->done);
        harness_event_signal(&r->removed);
        CHECK(harness_event_wait(&r->added, 1, WAIT_MS));
        CHECK_EQ_I64(atomic_load(&r->add_rc), 0);
        early_check_and_free(r, thread);
    }
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* Add and remove started at the same moment from two outside threads, many times: whichever
 * wins, the add returns 0, done runs exactly once on the source's thread, and fn is never
 * called after done. Edge-triggered half of the time: a source that is being added when its
 * event arrives must still get it (dispatch waits for the add rather than skip it). */
struct race_arg {
    struct early *r;
    atomic_int *go;
    int thread;
    uint32_t events;
    int rc;
};

static void *race_add_main(void *p)
{
    struct race_arg *a = p;
    while (!atomic_load(a->go))
        ;
    a->rc = sndk_source_add(a->r->e, &a->r->s, a->r->fd, a->events, early_fn, a->thread);
    return NULL;
}

static void *race_remove_main(void *p)
{
    struct race_arg *a = p;
    while (!atomic_load(a->go))
        ;
    for (volatile unsigned i = 0; i < (unsigned)(a->thread & 0xff); i++)
        ; /* vary the offset between the two */
    sndk_source_remove(&a->r->s, &a->r->done);
    return NULL;
}

TEST_T(source_remove_racing_add, 60)
{
    int base = harness_open_fds();
    struct sndk_engine *e = mk_engine(2, SNDK_ENGINE_DEFAULT_SPIN);
    for (unsigned i = 0; i < 400; i++) {
        struct early *r = early_new(e);
        atomic_int go = 0;
        int thread = (int)(i % 3) - 1;
        struct race_arg add = {r, &go, thread, EPOLLIN | ((i & 1) ? EPOLLET : 0u), -1};
        struct race_arg rm = {r, &go, (int)((i * 37) % 200), 0, 0};
        pthread_t ta, tr;
        CHECK(pthread_create(&ta, NULL, race_add_main, &add) == 0);
        CHECK(pthread_create(&tr, NULL, race_remove_main, &rm) == 0);
        atomic_store(&go, 1);
        pthread_join(ta, NULL);
        pthread_join(tr, NULL);
        CHECK_EQ_I64(add.rc, 0);
        unsigned st = sndk_source_thread(&r->s);
        CHECK(wait_ge(&r->dones, 1, WAIT_MS));
        flush_thread(e, st);
        flush_thread(e, st);
        CHECK_EQ_U64(atomic_load(&r->dones), 1);
        CHECK_EQ_I64(atomic_load(&r->done_thread), (int)st);
        CHECK_EQ_U64(atomic_load(&r->calls_after_done), 0);
        CHECK_EQ_I64(sndk_source_modify(&r->s, EPOLLIN), -ENOENT);
        r->s = (struct sndk_source){0};
        /* fn may have been called when the add won; the probe below needs it out of epoll */
        atomic_store(&r->calls, 0);
        atomic_store(&r->dones, 0);
        struct tsrc probe;
        tsrc_init(&probe, e);
        CHECK_EQ_I64(sndk_source_add(e, &probe.s, r->fd, EPOLLIN, tsrc_fn, (int)st), 0);
        CHECK(harness_event_wait(&probe.fired, 1, WAIT_MS));
        sndk_source_remove(&probe.s, &probe.done);
        CHECK(harness_event_wait(&probe.done_ev, 1, WAIT_MS));
        harness_event_destroy(&probe.fired);
        harness_event_destroy(&probe.done_ev);
        harness_event_destroy(&r->adder_ready);
        harness_event_destroy(&r->removed);
        harness_event_destroy(&r->added);
        free(r);
    }
    sndk_engine_destroy(e);
    CHECK_EQ_I64(harness_open_fds(), base);
}

/* ---- pollers */

struct tpoller {
    struct sndk_poller p;
    struct sndk_work done;
    struct sndk_engine *e;
    atomic_uint calls;
    atomic_bool done_ran;
    atomic_uint calls_after_done;
    atomic_int wrong_thread;
    unsigned thread;
    unsigned remove_at; /* remove itself on this call (0 = never) */
    bool busy;          /* report progress, so the thread keeps spinning */
};

static bool tpoller_fn(struct sndk_poller *p)
{
    struct tpoller *t = (struct tpoller *)p;
    if (atomic_load(&t->done_ran))
        atomic_fetch_add(&t->calls_after_done, 1);
    if (sndk_engine_current_thread(t->e) != (int)t->thread)
        atomic_fetch_add(&t->wrong_thread, 1);
    unsigned n = atomic_fetch_add(&t->calls, 1) + 1;
    if (n == t->remove_at)
        sndk_poller_remove(p, &t->done);
    return t->busy;
}

static void tpoller_done(struct sndk_work *w)
{
    struct tpoller *t = container_of(w, struct tpoller, done);
    atomic_store(&t->done_ran, true);
}

static bool tpoller_done_pred(void *arg)
{
    return atomic_load(&((struct tpoller *)arg)->done_ran);
}

/* A thread preempted between a pass whose poller reported progress and its look at the spin
 * window finds the window gone; it must still call the poller again, or it blocks with the
 * poller uncalled and no event to wake it (engine.c, progress_main). The preemption is a
 * signal whose handler sleeps past the window, sent again and again until some land there. */
static atomic_uint stalls;
static void stall_handler(int sig)
{
    (void)sig;
    struct timespec ts = {0, 1000000}; /* 1 ms: five spin windows */
    nanosleep(&ts, NULL);
    atomic_fetch_add(&stalls, 1);
}

struct stalled_poller {
    struct sndk_poller p;
    atomic_uint calls;
    atomic_bool have_thread;
    pthread_t thread; /* the progress thread; written once, before have_thread */
};

static bool stalled_poller_fn(struct sndk_poller *p)
{
    struct stalled_poller *sp = (struct stalled_poller *)p;
    if (!atomic_load_explicit(&sp->have_thread, memory_order_relaxed)) {
        /* Progress threads block signals; the stall is let in on this one only. */
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
        sp->thread = pthread_self();
        atomic_store_explicit(&sp->have_thread, true, memory_order_release);
    }
    atomic_fetch_add(&sp->calls, 1);
    return true;
}

TEST(poller_busy_survives_a_preempted_thread)
{
    if (harness_cpus() < 2)
        SKIP("one CPU: the engine never spins, pollers are never called");
    struct sigaction sa = {.sa_handler = stall_handler}, old;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ_I64(sigaction(SIGUSR1, &sa, &old), 0);
    struct sndk_engine *e = mk_engine(1, 200);
    struct stalled_poller sp = {0};
    sndk_poller_init(&sp.p, stalled_poller_fn);
    CHECK_EQ_I64(sndk_poller_add(e, &sp.p, 0), 0);
    flush_thread(e, 0); /* activity starts a spin window */
    CHECK(wait_ge(&sp.calls, 1, WAIT_MS));
    CHECK(atomic_load_explicit(&sp.have_thread, memory_order_acquire));
    atomic_store(&stalls, 0);
    for (unsigned i = 1; i <= 200; i++) {
        CHECK_EQ_I64(pthread_kill(sp.thread, SIGUSR1), 0);
        CHECK(wait_ge(&stalls, i, WAIT_MS));
        /* Still called after the stall: the poller said it made progress. */
        unsigned after = atomic_load(&sp.calls);
        CHECK(wait_ge(&sp.calls, after + 10, WAIT_MS));
    }
    sndk_poller_remove(&sp.p, NULL);
    sndk_engine_destroy(e);
    CHECK_EQ_I64(sigaction(SIGUSR1, &old, NULL), 0);
}

TEST(poller_spin_and_remove)
{
    if (harness_cpus() < 2)
        SKIP("one CPU: the engine never spins, pollers are never called");
    struct sndk_engine *e = mk_engine(1, 200);
    CHECK_EQ_U64(sndk_engine_spin_us(e), 200);

    /* A busy poller keeps the thread spinning; it removes itself on its 1000th call. */
    struct tpoller a = {.e = e, .thread = 0, .remove_at = 1000, .busy = true};
    sndk_poller_init(&a.p, tpoller_fn);
    sndk_work_init(&a.done, tpoller_done);
    CHECK_EQ_I64(sndk_poller_add(e, &a.p, 0), 0);
    flush_thread(e, 0); /* activity starts a spin window */
    CHECK(harness_wait_until(tpoller_done_pred, &a, WAIT_MS));
    flush_thread(e, 0);
    CHECK_EQ_U64(atomic_load(&a.calls), 1000);
    CHECK_EQ_U64(atomic_load(&a.calls_after_done), 0);
    CHECK_EQ_I64(atomic_load(&a.wrong_thread), 0);

    /* Removed from outside while it is being called over and over. */
    for (int i = 0; i < 50; i++) {
        struct tpoller b = {.e = e, .thread = 0, .busy = true};
        sndk_poller_init(&b.p, tpoller_fn);
        sndk_work_init(&b.done, tpoller_done);
        CHECK_EQ_I64(sndk_poller_add(e, &b.p, -1), 0);
        flush_thread(e, 0);
        CHECK(wait_ge(&b.calls, 1u + (unsigned)i, WAIT_MS));
        sndk_poller_remove(&b.p, &b.done);
        CHECK(harness_wait_until(tpoller_done_pred, &b, WAIT_MS));
        flush_thread(e, 0);
        CHECK_EQ_U64(atomic_load(&b.calls_after_done), 0);
    }
    sndk_engine_destroy(e);
}

/* A timer that re-arms itself every ms, RECUR_FIRES times, and notes how often the thread's
 * poller had been called when each firing came. */
#define RECUR_FIRES 8
struct recurring {
    struct sndk_timer t;
    struct sndk_engine *e;
    struct tpoller *poller;
    unsigned calls_at[RECUR_FIRES];
    atomic_uint fires;
};

static void recurring_fn(struct sndk_timer *t)
{
    struct recurring *r = container_of(t, struct recurring, t);
    unsigned n = atomic_load(&r->fires);
    r->calls_at[n] = atomic_load(&r->poller->calls);
    if (n + 1 < RECUR_FIRES)
        sndk_timer_arm(r->e, t, 1000);
    atomic_fetch_add(&r->fires, 1); /* last: the test reads calls_at once it sees this */
}

/* The library's own periodic looks (the CQ's park check, the shared-memory trim) run on
 * threads whose consumers poll for themselves: a firing that opened a spin window would spin
 * 50 µs on the consumers' CPUs every few ms. An upkeep timer's firing opens none, so the
 * thread's poller (called only inside a window) is not called between its firings; an
 * ordinary timer's does open one, and the poller is. The timers re-arm themselves: an arm from
 * another thread wakes the sleeper with an event, and an event is activity. */
TEST(upkeep_timer_opens_no_spin_window)
{
    if (harness_cpus() < 2)
        SKIP("one CPU: the engine never spins, pollers are never called");
    struct sndk_engine *e = mk_engine(1, 200);
    struct tpoller p = {.e = e, .thread = 0, .busy = false};
    sndk_poller_init(&p.p, tpoller_fn);
    CHECK_EQ_I64(sndk_poller_add(e, &p.p, 0), 0);
    for (int upkeep = 1; upkeep >= 0; upkeep--) {
        struct recurring r = {.e = e, .poller = &p};
        atomic_init(&r.fires, 0);
        if (upkeep)
            sndk_timer_init_upkeep(&r.t, recurring_fn);
        else
            sndk_timer_init(&r.t, recurring_fn);
        sndk_timer_arm_on(e, 0, &r.t, 1000);
        CHECK(wait_ge(&r.fires, RECUR_FIRES, WAIT_MS));
        flush_thread(e, 0); /* the last firing's fn has returned */
        /* From the second firing on, the window the arm's wake-up opened (200 µs) is over. */
        if (upkeep)
            CHECK_EQ_U64(r.calls_at[RECUR_FIRES - 1], r.calls_at[1]);
        else
            CHECK(r.calls_at[RECUR_FIRES - 1] > r.calls_at[1]);
    }
    sndk_poller_remove(&p.p, NULL);
    sndk_engine_destroy(e);
}
