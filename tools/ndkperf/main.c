/* ndkperf: perftest-style benchmarks on softndk's public NDKPI interface.
 *
 *   ndkperf TEST [options]             server: waits for one client
 *   ndkperf TEST [options] HOST        client: connects to HOST
 *   ndkperf TEST --loopback [options]  both ends in this process (two adapters, two threads,
 *                                      pinned to distinct CPUs when there are two or more)
 *
 * See ndkperf.h for the files and the wire conventions, docs/tools.md for usage. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndkperf.h"

struct loop_ctx {
    struct side *server;
    int cpu;
    pthread_mutex_t m;
    pthread_cond_t c;
    bool listening;
};

static void *server_thread(void *arg)
{
    struct loop_ctx *lc = arg;
    struct side *s = lc->server;
    side_open(s);
    side_pin(s, lc->cpu);
    side_listen(s);
    pthread_mutex_lock(&lc->m);
    lc->listening = true;
    pthread_cond_broadcast(&lc->c);
    pthread_mutex_unlock(&lc->m);
    side_accept(s);
    run_test(s);
    side_close(s);
    return NULL;
}

/* The first two CPUs this process may run on, or -1. */
static void two_cpus(int *a, int *b)
{
    cpu_set_t set;
    *a = *b = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int i = 0; i < CPU_SETSIZE; i++) {
        if (!CPU_ISSET(i, &set))
            continue;
        if (*a < 0)
            *a = i;
        else {
            *b = i;
            return;
        }
    }
    *a = -1; /* only one: leave both sides unpinned */
}

static void finish(struct side *printer, struct side *peer)
{
    const struct opts *o = printer->o;
    print_table_tail(o);
    if (o->json)
        write_json(printer, peer);
}

int main(int argc, char **argv)
{
    static struct opts o;
    parse_options(argc, argv, &o);
    g_opts = &o;
    signal(SIGPIPE, SIG_IGN);
    start_watchdog(o.timeout);
    if (o.perftest)
        return perftest_main(&o);

    if (o.loopback) {
        static struct side sv, cl;
        side_init(&sv, &o, true);
        sv.on_notify = callback_loop;
        side_init(&cl, &o, false);
        cl.on_notify = callback_loop;
        int cs = -1, cc = -1;
        if (!o.no_pin)
            two_cpus(&cs, &cc);
        struct loop_ctx lc = {.server = &sv, .cpu = cs, .listening = false};
        pthread_mutex_init(&lc.m, NULL);
        pthread_cond_init(&lc.c, NULL);
        pthread_t t;
        if (pthread_create(&t, NULL, server_thread, &lc) != 0)
            die(EXIT_FAIL, "cannot start the server thread");
        side_open(&cl);
        side_pin(&cl, cc);
        set_phase("client: waiting for the server thread to listen");
        pthread_mutex_lock(&lc.m);
        while (!lc.listening)
            pthread_cond_wait(&lc.c, &lc.m); /* bounded by the watchdog */
        pthread_mutex_unlock(&lc.m);
        side_connect(&cl, "127.0.0.1", sv.listen_port);
        cl.print_rows = true;
        note_transport(&cl);
        print_header(&cl, &sv);
        print_table_head(&o);
        run_test(&cl);
        side_close(&cl);
        set_phase("waiting for the server thread to finish");
        pthread_join(t, NULL);
        finish(&cl, &sv);
        return EXIT_OK;
    }

    static struct side s;
    side_init(&s, &o, o.server == NULL);
    s.on_notify = callback_loop;
    side_open(&s);
    side_pin(&s, o.cpu);
    if (o.server) {
        side_connect(&s, o.server, o.port);
    } else {
        side_listen(&s);
        side_accept(&s);
    }
    s.print_rows = true;
    note_transport(&s);
    print_header(&s, NULL);
    print_table_head(&o);
    run_test(&s);
    side_close(&s);
    finish(&s, NULL);
    return EXIT_OK;
}
