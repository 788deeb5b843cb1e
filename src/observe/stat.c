/* The ndkstat control endpoint: see stat.h. */
#include "observe/stat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "observe/counters.h"
#include "util/container.h"
#include "util/log.h"
#include "util/lock.h"

#define STAT_MAX_CLIENTS 8

struct stat_client {
    struct sndk_stat *s;
    int fd;
    bool busy;
    struct sndk_source src;
    struct sndk_work done;
    char *buf;
    size_t len, off;
};

struct sndk_stat {
    sndk_stat_snapshot_fn snapshot;
    void *owner;                    /* the snapshot's argument: the adapter */
    struct sndk_engine *engine;     /* serves the socket */
    struct sndk_adapter_ctrs *ctrs; /* counts refused clients' log lines left out */
    int fd;
    char path[108];
    bool file; /* a filesystem socket: unlink on close */
    struct sndk_source src;
    struct sndk_work done;
    struct sndk_mutex lock; /* clients, closing, pending */
    struct sndk_cond cond;
    bool closing;
    unsigned pending; /* sources not yet fully removed (listen + clients) */
    struct stat_client clients[STAT_MAX_CLIENTS];
};

/* ------------------------------------------------------------------ text */

void sndk_stat_printf(struct sndk_stat_text *t, const char *fmt, ...)
{
    for (;;) {
        if (t->oom)
            return;
        if (!t->p) {
            t->cap = 4096;
            t->p = malloc(t->cap);
            if (!t->p) {
                t->oom = true;
                return;
            }
        }
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

char *sndk_stat_text_take(struct sndk_stat_text *t, size_t *len)
{
    if (t->oom || !t->p) {
        free(t->p);
        return NULL;
    }
    *len = t->len;
    return t->p;
}

/* ------------------------------------------------------------------ serving */

static void source_gone(struct sndk_stat *s)
{
    sndk_mutex_lock(&s->lock);
    s->pending--;
    sndk_cond_broadcast(&s->cond);
    sndk_mutex_unlock(&s->lock);
}

static void client_done(struct sndk_work *w)
{
    struct stat_client *c = sndk_container_of(w, struct stat_client, done);
    struct sndk_stat *s = c->s;
    free(c->buf);
    sndk_mutex_lock(&s->lock);
    close(c->fd);
    c->fd = -1;
    c->buf = NULL;
    c->busy = false;
    sndk_mutex_unlock(&s->lock);
    source_gone(s);
}

static void client_io(struct sndk_source *src, uint32_t ev)
{
    struct stat_client *c = sndk_container_of(src, struct stat_client, src);
    bool finished = (ev & (EPOLLERR | EPOLLHUP)) != 0;
    while (!finished && c->off < c->len) {
        ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* EPOLLOUT reports again */
        finished = true;
    }
    sndk_source_remove(&c->src, &c->done);
}

static void on_accept(struct sndk_source *src, uint32_t ev)
{
    (void)ev;
    struct sndk_stat *s = sndk_container_of(src, struct sndk_stat, src);
    for (;;) {
        int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a transient error: epoll reports again */
        struct ucred cr;
        socklen_t crlen = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 || cr.uid != geteuid()) {
            static const char msg[] = "error\tpermission denied: not the adapter's user\n";
            (void)!send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            /* another local user can connect at will */
            sndk_warn_peer(sndk_ctr_log_suppressed(s->ctrs), "stat",
                           "ndkstat client uid %d refused (serving uid %d only)",
                           crlen == sizeof cr ? (int)cr.uid : -1, (int)geteuid());
            close(fd);
            continue;
        }
        sndk_mutex_lock(&s->lock);
        struct stat_client *c = NULL;
        for (int i = 0; i < STAT_MAX_CLIENTS && !s->closing; i++)
            if (!s->clients[i].busy) {
                c = &s->clients[i];
                c->busy = true;
                c->fd = fd;
                s->pending++;
                break;
            }
        sndk_mutex_unlock(&s->lock);
        if (!c) {
            close(fd); /* too many at once, or closing */
            continue;
        }
        c->off = 0;
        c->buf = s->snapshot(s->owner, &c->len);
        if (!c->buf)
            c->len = 0;
        /* Level-triggered EPOLLOUT: a fresh socket is writable, so client_io starts at once. */
        if (sndk_source_add(s->engine, &c->src, fd, EPOLLOUT, client_io,
                            (int)sndk_source_thread(&s->src)) != 0) {
            free(c->buf);
            sndk_mutex_lock(&s->lock);
            close(fd);
            c->fd = -1;
            c->buf = NULL;
            c->busy = false;
            s->pending--;
            sndk_mutex_unlock(&s->lock);
        }
    }
}

static void listen_done(struct sndk_work *w)
{
    struct sndk_stat *s = sndk_container_of(w, struct sndk_stat, done);
    source_gone(s);
}

/* $XDG_RUNTIME_DIR/softndk, else /tmp/softndk-UID: ours, a directory, mode 0700. */
static int default_dir(char *dir, size_t len)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (x && *x && x[0] == '/' && stat(x, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(dir, len, "%s/softndk", x);
    else
        snprintf(dir, len, "/tmp/softndk-%u", (unsigned)geteuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lstat(dir, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        sndk_err("stat", "%s is not a private directory of this user: endpoint not opened", dir);
        return -EPERM;
    }
    return 0;
}

/* Bind s->fd to s->path (0600). false with *err (EADDRINUSE: taken by a live endpoint). */
static bool try_bind(struct sndk_stat *s, int *err)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    socklen_t unlen;
    s->file = false;
    if (s->path[0] == '@') {
        size_t n = strlen(s->path);
        memcpy(un.sun_path + 1, s->path + 1, n - 1); /* leading NUL: abstract namespace */
        unlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        memcpy(un.sun_path, s->path, strlen(s->path) + 1);
        unlen = sizeof un;
        struct stat st;
        /* A stale socket of ours (a process that died) is replaced; a live one is in use;
         * anything else is not ours to touch. */
        if (lstat(s->path, &st) == 0) {
            if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
                sndk_err("stat", "%s exists and is not a socket of this user", s->path);
                *err = EEXIST;
                return false;
            }
            int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            bool live = probe >= 0 && connect(probe, (struct sockaddr *)&un, unlen) == 0;
            if (probe >= 0)
                close(probe);
            if (live) {
                *err = EADDRINUSE;
                return false;
            }
            unlink(s->path);
        }
    }
    mode_t old = umask(0177); /* the socket file is born 0600 */
    int rc = bind(s->fd, (struct sockaddr *)&un, unlen);
    umask(old);
    if (rc != 0) {
        *err = errno;
        return false;
    }
    if (s->path[0] != '@') {
        s->file = true;
        if (chmod(s->path, 0600) != 0) {
            *err = errno;
            unlink(s->path);
            s->file = false;
            return false;
        }
    }
    return true;
}

int sndk_stat_open(const struct sndk_stat_where *where, sndk_stat_snapshot_fn snapshot, void *owner,
                   struct sndk_stat **out)
{
    *out = NULL;
    struct sndk_stat *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->snapshot = snapshot;
    s->owner = owner;
    s->engine = where->engine;
    s->ctrs = where->ctrs;
    char base[108];
    if (where->path && where->path[0]) {
        snprintf(base, sizeof base, "%s", where->path);
    } else {
        char dir[80];
        int rc = default_dir(dir, sizeof dir);
        if (rc < 0) {
            free(s);
            return rc;
        }
        snprintf(base, sizeof base, "%s/%ld.%u.sock", dir, (long)getpid(), where->seq);
    }
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        int e = errno;
        free(s);
        return -e;
    }
    /* The path names the first adapter that asks for it; further ones (two adapters in one
     * process, e.g. ndkperf --loopback) take PATH.1, PATH.2, ... */
    int rc = -1, e = 0;
    for (unsigned n = 0; n < 64; n++) {
        if (n == 0)
            snprintf(s->path, sizeof s->path, "%s", base);
        else if ((size_t)snprintf(s->path, sizeof s->path, "%s.%u", base, n) >= sizeof s->path)
            break;
        if (try_bind(s, &e)) {
            rc = 0;
            break;
        }
        if (e != EADDRINUSE)
            break;
    }
    if (rc == 0)
        rc = listen(s->fd, 16);
    if (rc != 0) {
        if (!e)
            e = errno;
        sndk_err("stat", "cannot open the ndkstat endpoint %s: %s", s->path, strerror(e));
        close(s->fd);
        if (s->file)
            unlink(s->path);
        free(s);
        return -e;
    }
    sndk_mutex_init_ranked(&s->lock, SNDK_LOCK_STAT);
    sndk_cond_init(&s->cond);
    for (int i = 0; i < STAT_MAX_CLIENTS; i++) {
        s->clients[i].s = s;
        s->clients[i].fd = -1;
        sndk_work_init(&s->clients[i].done, client_done);
    }
    sndk_work_init(&s->done, listen_done);
    s->pending = 1;
    rc = sndk_source_add(s->engine, &s->src, s->fd, EPOLLIN, on_accept, -1);
    if (rc != 0) {
        close(s->fd);
        if (s->file)
            unlink(s->path);
        sndk_cond_destroy(&s->cond);
        sndk_mutex_destroy(&s->lock);
        free(s);
        return rc;
    }
    sndk_info("stat", "ndkstat endpoint: %s", s->path);
    *out = s;
    return 0;
}

const char *sndk_stat_path(const struct sndk_stat *s)
{
    return s ? s->path : NULL;
}

void sndk_stat_close(struct sndk_stat *s)
{
    if (!s)
        return;
    sndk_mutex_lock(&s->lock);
    s->closing = true;
    /* A client that does not read would keep its snapshot pending forever: cut it off. */
    for (int i = 0; i < STAT_MAX_CLIENTS; i++)
        if (s->clients[i].busy && s->clients[i].fd >= 0)
            shutdown(s->clients[i].fd, SHUT_RDWR);
    sndk_mutex_unlock(&s->lock);
    /* No new client after this; the ones being served end when their snapshot is out (or
     * their peer goes away), which never takes long. */
    sndk_source_remove(&s->src, &s->done);
    sndk_mutex_lock(&s->lock);
    while (s->pending)
        sndk_cond_wait(&s->cond, &s->lock);
    sndk_mutex_unlock(&s->lock);
    close(s->fd);
    if (s->file)
        unlink(s->path);
    sndk_cond_destroy(&s->cond);
    sndk_mutex_destroy(&s->lock);
    free(s);
}
