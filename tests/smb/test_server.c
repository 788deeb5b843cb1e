/* The SMB2 server (smb/server/) over Direct TCP on loopback. Unit tests: the path rules that
 * confine a name to the share, and hostile requests from a raw client, each answered with
 * the exact status or a disconnect. Interop: Samba's smbclient copies files both ways (sha256
 * compared), lists, renames, deletes, makes and removes a directory; a bad password, a bad
 * share, dialect 3.0, 3.1.1 and signing. Every wait is bounded (smbclient under timeout(1),
 * raw receives with a deadline). */
#include <smb/smb2_server.h>
#include <smb/smbd.h>
#include <smb/tcp_listen.h>

#include "conn.h"
#include "fixture.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <nettle/sha2.h>

/* smb/smbd.h brings the NDK headers, whose STATUS_ values are the same codes as NTSTATUS; the
 * SMB2 checks below compare the server's uint32_t ones (srv_wire.h) */
#undef STATUS_SUCCESS
#undef STATUS_BUFFER_OVERFLOW
#undef STATUS_BUFFER_TOO_SMALL
#undef STATUS_INSUFFICIENT_RESOURCES
#undef STATUS_INVALID_DEVICE_REQUEST
#undef STATUS_INVALID_HANDLE
#undef STATUS_INVALID_PARAMETER
#undef STATUS_NOT_FOUND
#undef STATUS_NOT_SUPPORTED
#undef STATUS_SHARING_VIOLATION
#include "../../smb/server/srv_fs.h"
#include "../../smb/server/srv_ids.h"
#include "../../smb/server/srv_utf16.h"
#include "../../smb/server/srv_wire.h"

/* ---- a server on a free loopback port, one thread, connections served in turn ---- */

#define MAX_CONNS 256

struct server;
struct conn_thread {
    struct server *s;
    smb_transport *t;
    pthread_t th;
};

struct server {
    smb2_server_config cfg;
    smb2_server_stats stats;
    smb_tcp_listener *l;
    pthread_t th;
    atomic_bool stop;
    atomic_int failed; /* connections that did not end in order */
    struct conn_thread conns[MAX_CONNS];
    unsigned nconns;
    char root[256];
    char log_path[300];
    /* wraps each accepted transport (the RDMA tests give it Responder ops); NULL: as is */
    smb_transport *(*wrap)(struct server *s, smb_transport *t);
    void *wrap_arg;
    /* server_start_smbd: SMB Direct instead of Direct TCP, the server's and the clients'
     * adapters (l is NULL then) */
    smbd_listener *sl;
    NDK_ADAPTER *as, *ac;
};

/* One thread per connection, as smb2_serve_connection() is meant to be used. */
static void *conn_main(void *arg)
{
    struct conn_thread *ct = arg;
    smb_transport *t = ct->s->wrap ? ct->s->wrap(ct->s, ct->t) : ct->t;
    if (smb2_serve_connection(&ct->s->cfg, t, &ct->s->stats) != 0)
        atomic_fetch_add(&ct->s->failed, 1);
    t->ops->destroy(t);
    return NULL;
}

static void *server_main(void *arg)
{
    struct server *s = arg;
    while (!atomic_load(&s->stop) && s->nconns < MAX_CONNS) {
        struct conn_thread *ct = &s->conns[s->nconns];
        char err[256];
        int rc = s->sl ? smbd_accept(s->sl, &ct->t, 100, err, sizeof err)
                       : smb_tcp_accept(s->l, &ct->t, 100);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc)
            break;
        ct->s = s;
        if (pthread_create(&ct->th, NULL, conn_main, ct)) {
            ct->t->ops->destroy(ct->t);
            break;
        }
        s->nconns++;
    }
    return NULL;
}

static void server_setup(struct server *s, int require_signing)
{
    memset(s, 0, sizeof *s);
    snprintf(s->root, sizeof s->root, "/tmp/softndk-smbsrv-XXXXXX");
    CHECK(mkdtemp(s->root));
    char share[300];
    snprintf(share, sizeof share, "%s/share", s->root);
    CHECK(mkdir(share, 0755) == 0);
    snprintf(s->log_path, sizeof s->log_path, "%s/server.log", s->root);
    s->cfg.log = fopen(s->log_path, "w");
    CHECK(s->cfg.log);
    s->cfg.root = strdup(share);
    s->cfg.share = "share";
    s->cfg.user = "alice";
    s->cfg.password = "Secret-1";
    s->cfg.domain = "SOFTNDK";
    s->cfg.require_signing = require_signing;
}

static void server_start(struct server *s, int require_signing)
{
    server_setup(s, require_signing);
    char err[128];
    int rc = smb_tcp_listen("127.0.0.1", 0, &s->l, err, sizeof err);
    CHECK_MSG(rc == 0, "listen: %s", err);
    CHECK(pthread_create(&s->th, NULL, server_main, s) == 0);
}

/* The server over SMB Direct ([MS-SMBD]) on softndk loopback, as `ndksmb serve` runs it; the
 * raw client (rawc_login) then connects with smbd_connect on s->ac. */
static void server_start_smbd(struct server *s, int require_signing)
{
    server_setup(s, require_signing);
    s->as = fx_open(NULL);
    s->ac = fx_open(NULL);
    struct sockaddr_in any = ndk_loopback4(0);
    char err[256] = "";
    int rc = smbd_listen(s->as, (struct sockaddr *)&any, sizeof any, NULL, &s->sl, err, sizeof err);
    CHECK_MSG(rc == 0, "smbd_listen: %s", err);
    CHECK(pthread_create(&s->th, NULL, server_main, s) == 0);
}

static void server_stop(struct server *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->th, NULL);
    for (unsigned i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i].th, NULL);
    if (s->sl) {
        smbd_listener_close(s->sl);
        SoftNdkCloseAdapter(s->as);
        SoftNdkCloseAdapter(s->ac);
    } else {
        smb_tcp_listener_close(s->l);
    }
    fclose(s->cfg.log);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->root);
    if (!getenv("SMB_SERVER_TEST_KEEP")) /* set: the directory and server.log stay */
        CHECK(system(cmd) == 0);
    free((void *)s->cfg.root);
}

static bool log_has(struct server *s, const char *what);

/* ---- smbclient ---- */

static bool have_smbclient(void)
{
    return system("command -v smbclient >/dev/null 2>&1") == 0;
}

/* Runs smbclient against the server (under timeout(1): 60 s) with extra options and commands;
 * its output in out; its exit status. */
static int smbclient(struct server *s, const char *user_pass, const char *share, const char *opts,
                     const char *lcd, const char *cmds, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout -k 5 60 smbclient -s /dev/null //127.0.0.1/%s -p %u -U '%s' "
             "--use-kerberos=off %s -c 'lcd %s; %s' 2>&1",
             share, smb_tcp_listener_port(s->l), user_pass, opts, lcd, cmds);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void sha256_file(const char *path, uint8_t out[32])
{
    struct sha256_ctx h;
    sha256_init(&h);
    int fd = open(path, O_RDONLY);
    CHECK_MSG(fd >= 0, "open %s: %s", path, strerror(errno));
    uint8_t buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        sha256_update(&h, (size_t)n, buf);
    CHECK(n == 0);
    close(fd);
    sha256_digest(&h, 32, out);
}

static void make_file(const char *path, size_t len, unsigned seed)
{
    FILE *f = fopen(path, "w");
    CHECK(f);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        fputc((int)(x >> 16) & 0xff, f);
    }
    CHECK(fclose(f) == 0);
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* put, get, ls, rename, del, mkdir, rmdir of a file of len bytes, with smbclient options */
static void copy_round(struct server *s, const char *opts, size_t len)
{
    char local[300], a[400], b[400], on_server[400], c[400], d[400], out[16384];
    snprintf(local, sizeof local, "%s/local", s->root);
    mkdir(local, 0755);
    snprintf(a, sizeof a, "%s/a", local);
    snprintf(b, sizeof b, "%s/b", local);
    snprintf(on_server, sizeof on_server, "%s/a", s->cfg.root);
    snprintf(c, sizeof c, "%s/c", s->cfg.root);
    snprintf(d, sizeof d, "%s/d", s->cfg.root);
    unlink(b);
    make_file(a, len, (unsigned)len);
    int rc =
        smbclient(s, "alice%Secret-1", "share", opts, local, "put a; get a b; ls", out, sizeof out);
    CHECK_MSG(rc == 0, "smbclient put/get/ls (%zu bytes, %s) exit %d:\n%s", len, opts, rc, out);
    uint8_t h1[32], h2[32], h3[32];
    sha256_file(a, h1);
    sha256_file(on_server, h2);
    sha256_file(b, h3);
    CHECK_MSG(!memcmp(h1, h2, 32), "sha256 of the put file differs (%zu bytes)", len);
    CHECK_MSG(!memcmp(h1, h3, 32), "sha256 of the got file differs (%zu bytes)", len);
    CHECK_MSG(strstr(out, "  a  ") || strstr(out, "  a "), "ls does not list a:\n%s", out);
    rc = smbclient(s, "alice%Secret-1", "share", opts, local, "rename a c", out, sizeof out);
    CHECK_MSG(rc == 0 && exists(c) && !exists(on_server), "rename exit %d:\n%s", rc, out);
    rc = smbclient(s, "alice%Secret-1", "share", opts, local, "del c; mkdir d", out, sizeof out);
    CHECK_MSG(rc == 0 && !exists(c) && exists(d), "del/mkdir exit %d:\n%s", rc, out);
    rc = smbclient(s, "alice%Secret-1", "share", opts, local, "rmdir d", out, sizeof out);
    CHECK_MSG(rc == 0 && !exists(d), "rmdir exit %d:\n%s", rc, out);
}

#define NEED_SMBCLIENT()                                                                           \
    do {                                                                                           \
        if (!have_smbclient())                                                                     \
            SKIP("smbclient is not installed (Debian package smbclient; scripts/deps.sh)");        \
    } while (0)

TEST_T(smbclient_copy_sizes, 240)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    static const size_t sizes[] = {0, 1, 65537, (8u << 20) + 7};
    for (unsigned i = 0; i < 4; i++)
        copy_round(&s, "-m SMB3", sizes[i]);
    CHECK(s.stats.commands[SMB2_WRITE] > 0);
    CHECK(s.stats.commands[SMB2_READ] > 0);
    CHECK(s.stats.commands[SMB2_QUERY_DIRECTORY] > 0);
    CHECK_EQ_U64(s.stats.rdma_reads + s.stats.rdma_writes + s.stats.send_invalidates, 0);
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

TEST_T(smbclient_smb3_00, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s,
               "--option=\"client min protocol=SMB3_00\" --option=\"client max protocol=SMB3_00\"",
               65537);
    server_stop(&s);
}

TEST_T(smbclient_smb3_11, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s,
               "--option=\"client min protocol=SMB3_11\" --option=\"client max protocol=SMB3_11\"",
               65537);
    server_stop(&s);
}

TEST_T(smbclient_signing_required, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 1);
    copy_round(&s, "-m SMB3 --client-protection=sign", 65537);
    copy_round(&s, "--option=\"client max protocol=SMB3_00\" --client-protection=sign", 4097);
    /* 2.1 and 2.0.2 sign with HMAC-SHA256 */
    copy_round(&s, "--option=\"client max protocol=SMB2_10\" --client-protection=sign", 4097);
    copy_round(&s, "--option=\"client max protocol=SMB2_02\" --client-protection=sign", 4097);
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

TEST_T(smbclient_bad_password, 60)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    char out[8192];
    int rc = smbclient(&s, "alice%wrong", "share", "-m SMB3", "/tmp", "ls", out, sizeof out);
    CHECK_MSG(rc != 0 && strstr(out, "NT_STATUS_LOGON_FAILURE"), "exit %d:\n%s", rc, out);
    rc = smbclient(&s, "mallory%Secret-1", "share", "-m SMB3", "/tmp", "ls", out, sizeof out);
    CHECK_MSG(rc != 0 && strstr(out, "NT_STATUS_LOGON_FAILURE"), "exit %d:\n%s", rc, out);
    server_stop(&s);
}

TEST_T(smbclient_bad_share, 60)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    char out[8192];
    int rc = smbclient(&s, "alice%Secret-1", "nosuch", "-m SMB3", "/tmp", "ls", out, sizeof out);
    CHECK_MSG(rc != 0 && strstr(out, "NT_STATUS_BAD_NETWORK_NAME"), "exit %d:\n%s", rc, out);
    server_stop(&s);
}

/* A symlink inside the share that leads out of it: reading through it is refused. */
TEST_T(smbclient_symlink_escape, 60)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    char outside[400], secret[450], link[400], out[8192];
    snprintf(outside, sizeof outside, "%s/outside", s.root);
    CHECK(mkdir(outside, 0755) == 0);
    snprintf(secret, sizeof secret, "%s/secret", outside);
    make_file(secret, 100, 1);
    snprintf(link, sizeof link, "%s/escape", s.cfg.root);
    CHECK(symlink(outside, link) == 0);
    int rc = smbclient(&s, "alice%Secret-1", "share", "-m SMB3", s.root,
                       "get escape\\secret stolen", out, sizeof out);
    CHECK_MSG(strstr(out, "NT_STATUS_ACCESS_DENIED"), "exit %d:\n%s", rc, out);
    char stolen[400];
    snprintf(stolen, sizeof stolen, "%s/stolen", s.root);
    struct stat sb;
    CHECK(stat(stolen, &sb) != 0 || sb.st_size == 0);
    server_stop(&s);
}

/* ---- unit: the path rules ---- */

static uint32_t path_of(const char *name, int lead_ok, char *out)
{
    uint8_t w[512];
    size_t n = srv_utf8_to_utf16(name, w, sizeof w, 0);
    CHECK(n != (size_t)-1);
    return srv_path_from_wire(w, n, lead_ok, out, SRV_PATH_MAX);
}

TEST(path_rules)
{
    char out[SRV_PATH_MAX];
    CHECK_EQ_U64(path_of("dir\\file.txt", 0, out), STATUS_SUCCESS);
    CHECK(strcmp(out, "dir/file.txt") == 0);
    CHECK_EQ_U64(path_of("", 0, out), STATUS_SUCCESS);
    CHECK(strcmp(out, "") == 0);
    CHECK_EQ_U64(path_of(".\\a", 0, out), STATUS_SUCCESS);
    CHECK(strcmp(out, "a") == 0);
    CHECK_EQ_U64(path_of("..", 0, out), STATUS_ACCESS_DENIED);
    CHECK_EQ_U64(path_of("a\\..\\..\\etc\\passwd", 0, out), STATUS_ACCESS_DENIED);
    CHECK_EQ_U64(path_of("a\\..", 0, out), STATUS_ACCESS_DENIED);
    CHECK_EQ_U64(path_of("\\etc\\passwd", 0, out), STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(path_of("\\dir\\x", 1, out), STATUS_SUCCESS); /* rename targets may lead */
    CHECK(strcmp(out, "dir/x") == 0);
    CHECK_EQ_U64(path_of("a/b", 0, out), STATUS_OBJECT_NAME_INVALID);
    CHECK_EQ_U64(path_of("a:stream", 0, out), STATUS_OBJECT_NAME_INVALID);
    CHECK_EQ_U64(path_of("a\\\\b", 0, out), STATUS_OBJECT_NAME_INVALID);
    uint8_t odd[3] = {'a', 0, 'b'};
    CHECK_EQ_U64(srv_path_from_wire(odd, 3, 0, out, sizeof out), STATUS_OBJECT_NAME_INVALID);
    uint8_t lone[2] = {0x00, 0xD8}; /* an unpaired high surrogate */
    CHECK_EQ_U64(srv_path_from_wire(lone, 2, 0, out, sizeof out), STATUS_OBJECT_NAME_INVALID);
    uint8_t nul[4] = {'a', 0, 0, 0};
    CHECK_EQ_U64(srv_path_from_wire(nul, 4, 0, out, sizeof out), STATUS_OBJECT_NAME_INVALID);
}

TEST(symlink_confinement)
{
    char dir[] = "/tmp/softndk-smbconf-XXXXXX";
    CHECK(mkdtemp(dir));
    char p[200];
    snprintf(p, sizeof p, "%s/root", dir);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/root/sub", dir);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/outside", dir);
    make_file(p, 10, 2);
    snprintf(p, sizeof p, "%s/root/inside", dir);
    make_file(p, 10, 3);
    char l[200];
    snprintf(l, sizeof l, "%s/root/out", dir);
    CHECK(symlink("../outside", l) == 0);
    snprintf(l, sizeof l, "%s/root/abs", dir);
    CHECK(symlink("/etc/passwd", l) == 0);
    snprintf(l, sizeof l, "%s/root/sub/in", dir);
    CHECK(symlink("../inside", l) == 0);
    snprintf(p, sizeof p, "%s/root", dir);
    int root = open(p, O_PATH | O_DIRECTORY);
    CHECK(root >= 0);
    CHECK_EQ_I64(srv_open_beneath(root, "out", O_RDONLY, 0), -EXDEV);
    CHECK_EQ_I64(srv_open_beneath(root, "abs", O_RDONLY, 0), -EXDEV);
    CHECK_EQ_U64(srv_errno_status(EXDEV, 0), STATUS_ACCESS_DENIED);
    int fd = srv_open_beneath(root, "sub/in", O_RDONLY, 0);
    CHECK(fd >= 0); /* a symlink that stays inside is followed */
    close(fd);
    CHECK_EQ_I64(srv_open_beneath(root, "nosuch/x", O_RDONLY, 0), -ENOENT);
    CHECK_EQ_U64(srv_errno_status(ENOENT, 1), STATUS_OBJECT_PATH_NOT_FOUND);
    /* creating through an escaping symlink is refused too */
    CHECK_EQ_I64(srv_open_beneath(root, "out", O_RDWR | O_CREAT, 0644), -EXDEV);
    close(root);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

TEST(name_match)
{
    CHECK(srv_name_match("*", "anything"));
    CHECK(srv_name_match("*", "."));
    CHECK(srv_name_match("File.TXT", "file.txt"));
    CHECK(!srv_name_match("file.txt", "file.txt2"));
    CHECK(srv_name_match("*.txt", "a.b.txt"));
    CHECK(srv_name_match("a?c", "abc"));
    CHECK(!srv_name_match("a?c", "ac"));
    CHECK(srv_name_match("<.txt", "x.txt"));
    CHECK(srv_name_match("*a*b*", "xxaxxbxx"));
    CHECK(!srv_name_match("*a*b*c", "xxaxxbxx"));
    CHECK(!srv_name_match("", "x"));
    /* many stars against a long name that almost matches: bounded work, not exponential */
    char pat[128], name[256];
    for (unsigned i = 0; i < 60; i++) {
        pat[2 * i] = '*';
        pat[2 * i + 1] = 'a';
    }
    strcpy(pat + 120, "b");
    memset(name, 'a', 255);
    name[255] = 0;
    CHECK(!srv_name_match(pat, name));
}

/* TreeIds and SessionIds come from per-connection counters that wrap at 2^32 (srv_ids.h): past
 * the wrap an id is never 0 (a free slot), never 0xFFFFFFFF, and never one a tree or session
 * that outlived 2^32 others still holds. */
struct ids_in_use {
    uint32_t ids[3];
};

static bool ids_taken(const void *ctx, uint32_t id)
{
    const struct ids_in_use *u = ctx;
    for (unsigned i = 0; i < 3; i++)
        if (u->ids[i] == id)
            return true;
    return false;
}

TEST(ids_skip_zero_the_reserved_value_and_live_ids_across_the_wrap)
{
    struct ids_in_use u = {{1, 3, 0xfffffffeu}};
    uint32_t counter = 0xfffffffcu;
    CHECK_EQ_U64(srv_next_id(&counter, ids_taken, &u), 0xfffffffdu);
    /* 0xfffffffe is live, 0xffffffff reserved, 0 never an id, 1 live */
    CHECK_EQ_U64(srv_next_id(&counter, ids_taken, &u), 2);
    CHECK_EQ_U64(srv_next_id(&counter, ids_taken, &u), 4);
    CHECK_EQ_U64(counter, 4);
}

/* ---- raw requests over TCP ---- */

static int raw_connect(struct server *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(smb_tcp_listener_port(s->l));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

static void raw_send(int fd, const uint8_t *msg, size_t len)
{
    /* one send: two would meet Nagle and the delayed ACK, 40 ms a request */
    static uint8_t buf[4 + (1 << 17)];
    CHECK(len <= sizeof buf - 4);
    buf[0] = 0;
    buf[1] = (uint8_t)(len >> 16);
    buf[2] = (uint8_t)(len >> 8);
    buf[3] = (uint8_t)len;
    memcpy(buf + 4, msg, len);
    CHECK(send(fd, buf, 4 + len, MSG_NOSIGNAL) == (ssize_t)(4 + len));
}

static int raw_read(int fd, uint8_t *buf, size_t len, int timeout_ms)
{
    size_t done = 0;
    while (done < len) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1)
            return -ETIMEDOUT;
        ssize_t n = recv(fd, buf + done, len - done, 0);
        if (n <= 0)
            return -ECONNRESET;
        done += (size_t)n;
    }
    return 0;
}

/* One response: its length, -ECONNRESET when the server closed the connection. */
static long raw_recv(int fd, uint8_t *buf, size_t cap)
{
    uint8_t hdr[4];
    int rc = raw_read(fd, hdr, 4, 5000);
    if (rc)
        return rc;
    size_t n = (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    CHECK(n <= cap);
    rc = raw_read(fd, buf, n, 5000);
    return rc ? rc : (long)n;
}

static size_t hdr(uint8_t *m, uint16_t cmd, uint64_t mid, uint64_t sid)
{
    memset(m, 0, 64);
    m[0] = 0xFE;
    m[1] = 'S';
    m[2] = 'M';
    m[3] = 'B';
    wr16(m + 4, 64);
    wr16(m + 12, cmd);
    wr16(m + 14, 1);
    wr64(m + 24, mid);
    wr64(m + 40, sid);
    return 64;
}

static uint32_t status_of(const uint8_t *m)
{
    return rd32(m + 8);
}

static size_t negotiate(uint8_t *m, uint16_t dialect)
{
    size_t n = hdr(m, SMB2_NEGOTIATE, 0, 0);
    memset(m + n, 0, 38);
    wr16(m + n, 36);
    wr16(m + n + 2, 1);
    wr16(m + n + 36, dialect);
    return n + 38;
}

TEST(malformed_requests)
{
    struct server s;
    server_start(&s, 0);
    uint8_t m[512], r[4096];
    int fd = raw_connect(&s);
    /* wrong StructureSize */
    size_t n = negotiate(m, 0x0302);
    wr16(m + 64, 35);
    raw_send(fd, m, n);
    long rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    CHECK_EQ_U64(rd16(r + 64), 9); /* the ERROR response */
    /* dialects running past the end of the message */
    n = negotiate(m, 0x0302);
    wr16(m + 66, 40);
    raw_send(fd, m, n);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    /* truncated: the fixed part of the request is not all there */
    n = negotiate(m, 0x0302);
    raw_send(fd, m, 64 + 20);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    /* no dialect in common */
    n = negotiate(m, 0x0299);
    raw_send(fd, m, n);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_NOT_SUPPORTED);
    /* a good NEGOTIATE */
    n = negotiate(m, 0x0302);
    raw_send(fd, m, n);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 65);
    CHECK_EQ_U64(status_of(r), STATUS_SUCCESS);
    CHECK_EQ_U64(rd16(r + 64 + 4), 0x0302);
    CHECK_EQ_U64(rd32(r + 64 + 32), 8u << 20); /* MaxReadSize */
    /* SESSION_SETUP whose security buffer lies past the end */
    n = hdr(m, SMB2_SESSION_SETUP, 1, 0);
    memset(m + n, 0, 25);
    wr16(m + n, 25);
    wr16(m + n + 12, 88);
    wr16(m + n + 14, 200);
    raw_send(fd, m, n + 25);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    /* SESSION_SETUP with a security buffer that is neither SPNEGO nor NTLMSSP */
    n = hdr(m, SMB2_SESSION_SETUP, 2, 0);
    memset(m + n, 0, 24 + 8);
    wr16(m + n, 25);
    wr16(m + n + 12, 88);
    wr16(m + n + 14, 8);
    memcpy(m + n + 24, "\x30\x82\xff\xff garbage", 8);
    raw_send(fd, m, n + 32);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    /* TREE_CONNECT without a session */
    n = hdr(m, SMB2_TREE_CONNECT, 3, 0x1234);
    memset(m + n, 0, 9);
    wr16(m + n, 9);
    raw_send(fd, m, n + 9);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_USER_SESSION_DELETED);
    /* an unknown command */
    n = hdr(m, 0x40, 4, 0);
    memset(m + n, 0, 8);
    wr16(m + n, 4);
    raw_send(fd, m, n + 8);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_NOT_SUPPORTED);
    /* ECHO, compounded with a second ECHO: two responses in one message */
    n = hdr(m, SMB2_ECHO, 5, 0);
    wr16(m + n, 4);
    wr32(m + 20, 72);
    memset(m + 68, 0, 4);
    hdr(m + 72, SMB2_ECHO, 6, 0);
    wr16(m + 72 + 64, 4);
    raw_send(fd, m, 72 + 68);
    rl = raw_recv(fd, r, sizeof r);
    CHECK_EQ_I64(rl, 72 + 68);
    CHECK_EQ_U64(rd32(r + 20), 72);
    CHECK_EQ_U64(rd64(r + 72 + 24), 6);
    CHECK_EQ_U64(status_of(r + 72), STATUS_SUCCESS);
    /* NextCommand past the end of the message: the connection ends */
    n = hdr(m, SMB2_ECHO, 7, 0);
    wr16(m + n, 4);
    wr32(m + 20, 4096);
    raw_send(fd, m, n + 4);
    CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
    close(fd);

    /* a truncated header ends the connection; so does an SMB1 request */
    fd = raw_connect(&s);
    raw_send(fd, m, 40);
    CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
    close(fd);
    fd = raw_connect(&s);
    static const uint8_t smb1[] = {0xFF, 'S', 'M', 'B', 0x72, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   0,    0,   0,   0,   0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    raw_send(fd, smb1, sizeof smb1);
    CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
    close(fd);
    /* a request before NEGOTIATE ends it as well */
    fd = raw_connect(&s);
    n = hdr(m, SMB2_ECHO, 0, 0);
    wr16(m + n, 4);
    raw_send(fd, m, n + 4);
    rl = raw_recv(fd, r, sizeof r);
    CHECK(rl >= 64 + 9);
    CHECK_EQ_U64(status_of(r), STATUS_INVALID_PARAMETER);
    CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
    close(fd);
    server_stop(&s);
}

/* ---- a raw authenticated client: NTLMSSP (raw, not SPNEGO), NTLMv2, dialect 3.0.2 ---- */

#include "../../smb/server/srv_auth.h"
#include "../../smb/server/srv_crypto.h"

#include <nettle/hmac.h>

struct rawc {
    int fd;
    smb_transport *t; /* over SMB Direct (server_start_smbd): the messages go here, fd unused */
    uint64_t mid, sid;
    uint32_t tid;
    uint8_t key[16];
    uint8_t skey[16]; /* the session key */
    int sign;
    uint8_t guid[16];
    uint8_t r[1 << 17];
    long rl;
};

/* Sends one request (header built here, body given) and receives the response into c->r;
 * returns its status. */
static uint32_t rawc_req(struct rawc *c, uint16_t cmd, const uint8_t *body, size_t blen, int sign)
{
    static uint8_t m[1 << 17];
    hdr(m, cmd, c->mid++, c->sid);
    wr32(m + 36, c->tid);
    memcpy(m + 64, body, blen);
    /* CreditCharge: one per 64 KiB moved ([MS-SMB2] 3.3.5.2.5) */
    if (blen >= 40 && (cmd == SMB2_READ || cmd == SMB2_WRITE)) {
        uint32_t moved = rd32(body + 4);
        if (cmd == SMB2_WRITE && rd32(body + 32) != 0)
            moved = rd32(body + 36); /* RemainingBytes over RDMA */
        wr16(m + 6, (uint16_t)(moved ? (moved - 1) / 65536 + 1 : 1));
    }
    if (sign) {
        wr32(m + 16, SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m, 64 + blen, m + 48);
    }
    if (c->t) {
        CHECK_EQ_I64(c->t->ops->send(c->t, m, 64 + blen), 0);
        size_t got = 0;
        int rc = c->t->ops->recv(c->t, c->r, sizeof c->r, &got, 5000);
        c->rl = rc ? rc : (long)got;
    } else {
        raw_send(c->fd, m, 64 + blen);
        c->rl = raw_recv(c->fd, c->r, sizeof c->r);
    }
    CHECK_MSG(c->rl >= 64 + 2, "no response to command %u: %ld", cmd, c->rl);
    return status_of(c->r);
}

static uint32_t rawc_caps; /* Capabilities the raw client's NEGOTIATE offers */

static void rawc_login(struct server *s, struct rawc *c, const char *password)
{
    memset(c, 0, sizeof *c);
    if (s->sl) {
        struct sockaddr_in dst = ndk_loopback4(smbd_listener_port(s->sl));
        char err[256] = "";
        int rc =
            smbd_connect(s->ac, (struct sockaddr *)&dst, sizeof dst, NULL, &c->t, err, sizeof err);
        CHECK_MSG(rc == 0, "smbd_connect: %s", err);
        c->fd = -1;
    } else {
        c->fd = raw_connect(s);
    }
    uint8_t b[1024];
    memset(b, 0, 38);
    wr16(b, 36);
    wr16(b + 2, 1);
    wr16(b + 4, 1); /* signing enabled */
    wr32(b + 8, rawc_caps);
    memcpy(b + 12, "raw-client-guid!", 16);
    memcpy(c->guid, b + 12, 16);
    wr16(b + 36, 0x0302);
    CHECK_EQ_U64(rawc_req(c, SMB2_NEGOTIATE, b, 38, 0), STATUS_SUCCESS);
    /* NEGOTIATE_MESSAGE: Unicode, NTLM, extended session security, 128-bit */
    uint8_t neg[32];
    memset(neg, 0, sizeof neg);
    memcpy(neg, "NTLMSSP", 8);
    wr32(neg + 8, 1);
    wr32(neg + 12, 0x00000001u | 0x00000004u | 0x00000200u | 0x00080000u | 0x20000000u);
    memset(b, 0, 24);
    wr16(b, 25);
    wr16(b + 12, 64 + 24);
    wr16(b + 14, sizeof neg);
    memcpy(b + 24, neg, sizeof neg);
    CHECK_EQ_U64(rawc_req(c, SMB2_SESSION_SETUP, b, 24 + sizeof neg, 0),
                 STATUS_MORE_PROCESSING_REQUIRED);
    c->sid = rd64(c->r + 40);
    const uint8_t *chal = c->r + rd16(c->r + 64 + 4);
    CHECK(memcmp(chal, "NTLMSSP", 8) == 0 && rd32(chal + 8) == 2);
    uint8_t server_chal[8];
    memcpy(server_chal, chal + 24, 8);
    size_t til = rd16(chal + 40);
    const uint8_t *ti = chal + rd32(chal + 44);
    /* AUTHENTICATE_MESSAGE with an NTLMv2 response */
    uint8_t owf[16];
    CHECK(srv_ntowfv2("ALICE", password, "TESTDOM", owf) == 0);
    uint8_t blob[512];
    size_t bl = 0;
    memset(blob, 0, 28);
    blob[0] = 1;
    blob[1] = 1;
    memcpy(blob + 16, "cchal123", 8);
    bl = 28;
    memcpy(blob + bl, ti, til);
    bl += til;
    memset(blob + bl, 0, 4);
    bl += 4;
    uint8_t proof[16];
    struct hmac_md5_ctx h;
    hmac_md5_set_key(&h, 16, owf);
    hmac_md5_update(&h, 8, server_chal);
    hmac_md5_update(&h, bl, blob);
    hmac_md5_digest(&h, 16, proof);
    uint8_t au[1024];
    memset(au, 0, 72);
    memcpy(au, "NTLMSSP", 8);
    wr32(au + 8, 3);
    size_t p = 72;
    uint8_t dom[32], usr[32];
    size_t dl = srv_utf8_to_utf16("TESTDOM", dom, sizeof dom, 0);
    size_t ul = srv_utf8_to_utf16("alice", usr, sizeof usr, 0);
    wr16(au + 20, (uint16_t)(16 + bl)); /* NtChallengeResponse */
    wr16(au + 22, (uint16_t)(16 + bl));
    wr32(au + 24, (uint32_t)p);
    memcpy(au + p, proof, 16);
    memcpy(au + p + 16, blob, bl);
    p += 16 + bl;
    wr16(au + 28, (uint16_t)dl);
    wr16(au + 30, (uint16_t)dl);
    wr32(au + 32, (uint32_t)p);
    memcpy(au + p, dom, dl);
    p += dl;
    wr16(au + 36, (uint16_t)ul);
    wr16(au + 38, (uint16_t)ul);
    wr32(au + 40, (uint32_t)p);
    memcpy(au + p, usr, ul);
    p += ul;
    wr32(au + 12, (uint32_t)p); /* empty LM response, at the end */
    wr32(au + 44, (uint32_t)p);
    wr32(au + 52, (uint32_t)p);
    wr32(au + 60, 0x00000001u | 0x00000200u | 0x00080000u | 0x20000000u);
    memset(b, 0, 24);
    wr16(b, 25);
    wr16(b + 12, 64 + 24);
    wr16(b + 14, (uint16_t)p);
    memcpy(b + 24, au, p);
    uint32_t st = rawc_req(c, SMB2_SESSION_SETUP, b, 24 + p, 0);
    if (strcmp(password, "Secret-1") != 0) {
        CHECK_EQ_U64(st, STATUS_LOGON_FAILURE);
        return;
    }
    CHECK_EQ_U64(st, STATUS_SUCCESS);
    uint8_t base[16];
    hmac_md5_set_key(&h, 16, owf);
    hmac_md5_update(&h, 16, proof);
    hmac_md5_digest(&h, 16, base);
    srv_kdf(base, "SMB2AESCMAC", 12, "SmbSign", 8, c->key);
    memcpy(c->skey, base, 16);
    /* the final SESSION_SETUP response is signed with the key both sides derived */
    CHECK(rd32(c->r + 16) & SMB2_FLAGS_SIGNED);
    uint8_t sig[16];
    srv_sign(0x0302, c->key, c->r, (size_t)c->rl, sig);
    CHECK_MEM(sig, c->r + 48, 16);
    c->sign = 1;
    /* TREE_CONNECT */
    uint8_t path[64];
    size_t pl = srv_utf8_to_utf16("\\\\127.0.0.1\\share", path, sizeof path, 0);
    memset(b, 0, 8);
    wr16(b, 9);
    wr16(b + 4, 64 + 8);
    wr16(b + 6, (uint16_t)pl);
    memcpy(b + 8, path, pl);
    CHECK_EQ_U64(rawc_req(c, SMB2_TREE_CONNECT, b, 8 + pl, 1), STATUS_SUCCESS);
    c->tid = rd32(c->r + 36);
}

/* CREATE body for name with disposition and options; its length. */
static size_t create_body(uint8_t *b, const char *name, uint32_t disp, uint32_t opts)
{
    memset(b, 0, 56);
    wr16(b, 57);
    wr32(b + 24, 0x0012019Fu | 0x00010000u); /* read, write, delete */
    wr32(b + 32, 7);
    wr32(b + 36, disp);
    wr32(b + 40, opts);
    size_t nl = srv_utf8_to_utf16(name, b + 56, 512, 0);
    wr16(b + 44, 64 + 56);
    wr16(b + 46, (uint16_t)nl);
    if (nl == 0)
        b[56] = 0;
    return 56 + (nl ? nl : 1);
}

TEST(raw_session_requests)
{
    struct server s;
    server_start(&s, 1);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[4096];
    /* an unsigned request on a session that requires signing */
    size_t n = create_body(b, "f", 3, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 0), STATUS_ACCESS_DENIED);
    /* a signature that does not verify */
    {
        static uint8_t m[1024];
        hdr(m, SMB2_CREATE, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, b, n);
        wr32(m + 16, SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m, 64 + n, m + 48);
        m[48] ^= 1;
        raw_send(c->fd, m, 64 + n);
        c->rl = raw_recv(c->fd, c->r, sizeof c->r);
        CHECK(c->rl >= 64 + 9);
        CHECK_EQ_U64(status_of(c->r), STATUS_ACCESS_DENIED);
    }
    /* names that leave the share */
    n = create_body(b, "..\\etc", 1, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_ACCESS_DENIED);
    n = create_body(b, "\\etc", 1, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_INVALID_PARAMETER);
    n = create_body(b, "nosuch\\f", 1, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_OBJECT_PATH_NOT_FOUND);
    n = create_body(b, "nosuch", 1, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_OBJECT_NAME_NOT_FOUND);
    /* a name past the end of the message */
    n = create_body(b, "f", 3, 0);
    wr16(b + 46, 400);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_INVALID_PARAMETER);
    /* create contexts out of range */
    n = create_body(b, "f", 3, 0);
    wr32(b + 48, 64 + 56);
    wr32(b + 52, 1000);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_INVALID_PARAMETER);
    /* create contexts: a well-formed one ("MxAc", no data) is ignored; a chain whose Next
     * runs past the buffer, or a name outside its context, is refused */
    {
        uint8_t cb[600];
        size_t cn = create_body(cb, "ctx", 3, 0);
        size_t at = (cn + 7) & ~(size_t)7;
        memset(cb + cn, 0, at + 24 - cn);
        wr32(cb + 48, (uint32_t)(64 + at));
        wr32(cb + 52, 24);
        uint8_t *x = cb + at;
        wr16(x + 4, 16);
        wr16(x + 6, 4);
        memcpy(x + 16, "MxAc", 4);
        CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, cb, at + 24, 1), STATUS_SUCCESS);
        CHECK_EQ_U64(rd32(c->r + 64 + 84), 0); /* no contexts answered */
        uint8_t cfid[16];
        memcpy(cfid, c->r + 64 + 64, 16);
        wr32(x, 32); /* Next past the buffer */
        CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, cb, at + 24, 1), STATUS_INVALID_PARAMETER);
        wr32(x, 0);
        wr16(x + 6, 40); /* name past its context */
        CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, cb, at + 24, 1), STATUS_INVALID_PARAMETER);
        wr16(x + 6, 4);
        wr16(x + 10, 16); /* data past its context */
        wr32(x + 12, 100);
        CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, cb, at + 24, 1), STATUS_INVALID_PARAMETER);
        memset(cb, 0, 24);
        wr16(cb, 24);
        memcpy(cb + 8, cfid, 16);
        CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, cb, 24, 1), STATUS_SUCCESS);
    }
    /* a file: create, write, read */
    n = create_body(b, "f", 3, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 2); /* FILE_CREATED */
    uint8_t fid[16];
    memcpy(fid, c->r + 64 + 64, 16);
    uint64_t created = rd64(c->r + 64 + 8);
    memset(b, 0, 48);
    wr16(b, 49);
    wr16(b + 2, 64 + 48);
    wr32(b + 4, 5);
    memcpy(b + 16, fid, 16);
    memcpy(b + 48, "hello", 5);
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, 53, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 5);
    wr16(b + 2, 64 + 200); /* data past the end */
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, 53, 1), STATUS_INVALID_PARAMETER);
    memset(b, 0, 49);
    wr16(b, 49);
    wr32(b + 4, 100);
    memcpy(b + 16, fid, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, 49, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 5);
    CHECK(memcmp(c->r + c->r[64 + 2], "hello", 5) == 0);
    {
        /* 100000 bytes charged one credit: refused ([MS-SMB2] 3.3.5.2.5) */
        static uint8_t m[256];
        hdr(m, SMB2_READ, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, b, 49);
        wr32(m + 64 + 4, 100000);
        wr16(m + 6, 1);
        wr32(m + 16, SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m, 64 + 49, m + 48);
        raw_send(c->fd, m, 64 + 49);
        c->rl = raw_recv(c->fd, c->r, sizeof c->r);
        CHECK(c->rl >= 64 + 9);
        CHECK_EQ_U64(status_of(c->r), STATUS_INVALID_PARAMETER);
    }
    wr64(b + 8, 5); /* at end of file */
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, 49, 1), STATUS_END_OF_FILE);
    wr64(b + 8, 0);
    wr32(b + 4, (8u << 20) + 1); /* more than MaxReadSize */
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, 49, 1), STATUS_INVALID_PARAMETER);
    /* an RDMA channel over TCP ([MS-SMB2] 3.3.5.12) */
    memset(b, 0, 64);
    wr16(b, 49);
    wr32(b + 4, 5);
    memcpy(b + 16, fid, 16);
    wr32(b + 36, 2);
    wr16(b + 44, 64 + 48);
    wr16(b + 46, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, 64, 1), STATUS_INVALID_PARAMETER);
    /* QUERY_INFO: an unknown class, a buffer too small, FileStandardInformation */
    memset(b, 0, 40);
    wr16(b, 41);
    b[2] = 1;
    b[3] = 99;
    wr32(b + 4, 1024);
    memcpy(b + 24, fid, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), STATUS_INVALID_INFO_CLASS);
    b[3] = 15;                                                         /* FileFullEaInformation */
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), 0xC0000052u); /* NO_EAS_ON_FILE */
    b[2] = 3; /* security: owner, group and DACL */
    b[3] = 0;
    wr32(b + 16, 7);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 80);
    {
        const uint8_t *sd = c->r + rd16(c->r + 64 + 2);
        CHECK_EQ_U64(rd16(sd + 2), 0x8004); /* self-relative, DACL present */
        const uint8_t *owner = sd + rd32(sd + 4);
        CHECK(owner[0] == 1 && owner[1] == 2 && owner[7] == 22 && rd32(owner + 8) == 1);
        CHECK_EQ_U64(rd32(owner + 12), getuid());
        const uint8_t *acl = sd + rd32(sd + 16);
        CHECK(acl[0] == 2 && rd16(acl + 4) == 1 && rd32(acl + 8 + 4) == 0x001F01FFu);
    }
    wr32(b + 4, 10); /* too small: the size needed comes back in ErrorData */
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), 0xC0000023u);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 4);
    CHECK_EQ_U64(rd32(c->r + 64 + 8), 80);
    wr32(b + 4, 1024);
    wr32(b + 16, 0);
    b[2] = 1;
    b[3] = 5;
    wr32(b + 4, 4);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), STATUS_INFO_LENGTH_MISMATCH);
    wr32(b + 4, 1024);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_INFO, b, 41, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 24);
    CHECK_EQ_U64(rd64(c->r + 64 + 8 + 8), 5); /* EndOfFile */
    /* a lock element of no kind; CANCEL gets no response (the ECHO's is the next one) */
    memset(b, 0, 48);
    wr16(b, 48);
    wr16(b + 2, 1);
    memcpy(b + 8, fid, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_LOCK, b, 48, 1), STATUS_INVALID_PARAMETER);
    {
        uint8_t m[68];
        hdr(m, SMB2_CANCEL, c->mid, c->sid);
        wr16(m + 64, 4);
        wr16(m + 66, 0);
        raw_send(c->fd, m, 68);
    }
    memset(b, 0, 4);
    wr16(b, 4);
    uint64_t echo_mid = c->mid;
    CHECK_EQ_U64(rawc_req(c, SMB2_ECHO, b, 4, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd64(c->r + 24), echo_mid);
    /* FSCTL_VALIDATE_NEGOTIATE_INFO, signed; an unknown FSCTL */
    memset(b, 0, 56 + 26);
    wr16(b, 57);
    wr32(b + 4, 0x00140204u);
    memset(b + 8, 0xFF, 16);
    wr32(b + 24, 64 + 56);
    wr32(b + 28, 26);
    wr32(b + 44, 1024);
    wr32(b + 48, 1); /* SMB2_0_IOCTL_IS_FSCTL */
    memcpy(b + 56 + 4, c->guid, 16);
    wr16(b + 56 + 20, 1);
    wr16(b + 56 + 22, 1);
    wr16(b + 56 + 24, 0x0302);
    CHECK_EQ_U64(rawc_req(c, SMB2_IOCTL, b, 56 + 26, 1), STATUS_SUCCESS);
    CHECK(rd32(c->r + 16) & SMB2_FLAGS_SIGNED);
    CHECK_EQ_U64(rd32(c->r + 64 + 36), 24);
    CHECK_EQ_U64(rd16(c->r + 64 + 48 + 22), 0x0302);
    uint8_t validate[56 + 26];
    memcpy(validate, b, sizeof validate);
    wr32(b + 4, 0x00090000u);
    CHECK_EQ_U64(rawc_req(c, SMB2_IOCTL, b, 56 + 26, 1), STATUS_NOT_SUPPORTED);
    /* an open for attributes only may neither read nor write ([MS-SMB2] 3.3.5.12/13) */
    {
        uint8_t cb[600];
        size_t cn = create_body(cb, "f", 1, 0);
        wr32(cb + 24, 0x00000080u); /* FILE_READ_ATTRIBUTES */
        CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, cb, cn, 1), STATUS_SUCCESS);
        uint8_t afid[16];
        memcpy(afid, c->r + 64 + 64, 16);
        memset(cb, 0, 49);
        wr16(cb, 49);
        wr32(cb + 4, 5);
        memcpy(cb + 16, afid, 16);
        CHECK_EQ_U64(rawc_req(c, SMB2_READ, cb, 49, 1), STATUS_ACCESS_DENIED);
        memset(cb, 0, 48);
        wr16(cb, 49);
        wr16(cb + 2, 64 + 48);
        wr32(cb + 4, 1);
        memcpy(cb + 16, afid, 16);
        cb[48] = 'x';
        CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, cb, 49, 1), STATUS_ACCESS_DENIED);
        /* nor delete or rename it: that needs DELETE access */
        memset(cb, 0, 64);
        wr16(cb, 33);
        cb[2] = 1;
        cb[3] = 13; /* FileDispositionInformation */
        wr32(cb + 4, 1);
        wr16(cb + 8, 64 + 32);
        memcpy(cb + 16, afid, 16);
        cb[32] = 1;
        CHECK_EQ_U64(rawc_req(c, SMB2_SET_INFO, cb, 33, 1), STATUS_ACCESS_DENIED);
        cb[3] = 10; /* FileRenameInformation */
        wr32(cb + 4, 22);
        memset(cb + 32, 0, 32);
        wr32(cb + 32 + 16, 2);
        cb[32 + 20] = 'g';
        CHECK_EQ_U64(rawc_req(c, SMB2_SET_INFO, cb, 32 + 22, 1), STATUS_ACCESS_DENIED);
        memset(cb, 0, 24);
        wr16(cb, 24);
        memcpy(cb + 8, afid, 16);
        CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, cb, 24, 1), STATUS_SUCCESS);
    }
    /* CLOSE, then the FileId is gone */
    memset(b, 0, 24);
    wr16(b, 24);
    wr16(b + 2, 1);
    memcpy(b + 8, fid, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, b, 24, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd64(c->r + 64 + 48), 5);
    CHECK_EQ_U64(rd64(c->r + 64 + 8), created); /* CreationTime does not move with writes */
    CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, b, 24, 1), STATUS_FILE_CLOSED);
    /* a VALIDATE_NEGOTIATE_INFO that does not match ends the connection unanswered
     * ([MS-SMB2] 3.3.5.15.12) */
    {
        static uint8_t m[256];
        validate[56 + 24] = 0x00; /* dialect 0x0300 instead of 0x0302 */
        hdr(m, SMB2_IOCTL, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, validate, sizeof validate);
        wr32(m + 16, SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m, 64 + sizeof validate, m + 48);
        raw_send(c->fd, m, 64 + sizeof validate);
        CHECK_EQ_I64(raw_recv(c->fd, c->r, sizeof c->r), -ECONNRESET);
    }
    close(c->fd);
    /* so does a second NEGOTIATE ([MS-SMB2] 3.3.5.4) */
    {
        int fd = raw_connect(&s);
        uint8_t m[128], r[4096];
        size_t nl = negotiate(m, 0x0302);
        raw_send(fd, m, nl);
        CHECK(raw_recv(fd, r, sizeof r) > 64);
        raw_send(fd, m, nl);
        CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
        close(fd);
    }
    CHECK(log_has(&s, "second NEGOTIATE: ending"));
    free(c);
    server_stop(&s);
}

/* A compound CREATE + QUERY_INFO + CLOSE, related ([MS-SMB2] 3.3.5.2.7.2), as cifs sends. */
static size_t compound3(struct rawc *c, uint8_t *m, const char *name)
{
    size_t o = 0;
    hdr(m, SMB2_CREATE, c->mid++, c->sid);
    wr32(m + 36, c->tid);
    size_t n = create_body(m + 64, name, 1, 0);
    size_t l0 = (64 + n + 7) & ~(size_t)7;
    memset(m + 64 + n, 0, l0 - 64 - n);
    wr32(m + 20, (uint32_t)l0);
    o = l0;
    hdr(m + o, SMB2_QUERY_INFO, c->mid++, c->sid);
    wr32(m + o + 16, SMB2_FLAGS_RELATED_OPERATIONS);
    memset(m + o + 64, 0, 40);
    wr16(m + o + 64, 41);
    m[o + 64 + 2] = 1;
    m[o + 64 + 3] = 34; /* FileNetworkOpenInformation */
    wr32(m + o + 64 + 4, 1024);
    memset(m + o + 64 + 24, 0xFF, 16);
    wr32(m + o + 20, 104);
    o += 104;
    hdr(m + o, SMB2_CLOSE, c->mid++, c->sid);
    wr32(m + o + 16, SMB2_FLAGS_RELATED_OPERATIONS);
    memset(m + o + 64, 0, 24);
    wr16(m + o + 64, 24);
    memset(m + o + 64 + 8, 0xFF, 16);
    o += 88;
    /* sign each part over its own bytes */
    size_t at = 0;
    size_t lens[3] = {l0, 104, 88};
    for (unsigned i = 0; i < 3; i++) {
        wr32(m + at + 16, rd32(m + at + 16) | SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m + at, lens[i], m + at + 48);
        at += lens[i];
    }
    return o;
}

TEST(raw_compound_related)
{
    struct server s;
    server_start(&s, 0);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    char path[400];
    snprintf(path, sizeof path, "%s/g", s.cfg.root);
    make_file(path, 1234, 9);
    static uint8_t m[1024];
    size_t n = compound3(c, m, "g");
    raw_send(c->fd, m, n);
    long rl = raw_recv(c->fd, c->r, sizeof c->r);
    CHECK(rl > 0);
    const uint8_t *r = c->r;
    uint32_t next = rd32(r + 20);
    CHECK_EQ_U64(status_of(r), STATUS_SUCCESS);
    CHECK(next > 0 && next % 8 == 0);
    const uint8_t *q = r + next;
    CHECK_EQ_U64(status_of(q), STATUS_SUCCESS);
    CHECK_EQ_U64(rd16(q + 12), SMB2_QUERY_INFO);
    CHECK_EQ_U64(rd64(q + 64 + 8 + 40), 1234); /* EndOfFile */
    CHECK(rd32(q + 20) > 0);
    const uint8_t *z = q + rd32(q + 20);
    CHECK_EQ_U64(status_of(z), STATUS_SUCCESS);
    CHECK_EQ_U64(rd16(z + 12), SMB2_CLOSE);
    CHECK_EQ_I64(z + 64 + 60 - r, rl);
    /* the CREATE fails: the related requests fail with its status */
    n = compound3(c, m, "missing");
    raw_send(c->fd, m, n);
    rl = raw_recv(c->fd, c->r, sizeof c->r);
    CHECK(rl > 0);
    CHECK_EQ_U64(status_of(r), STATUS_OBJECT_NAME_NOT_FOUND);
    q = r + rd32(r + 20);
    CHECK_EQ_U64(status_of(q), STATUS_OBJECT_NAME_NOT_FOUND);
    z = q + rd32(q + 20);
    CHECK_EQ_U64(status_of(z), STATUS_OBJECT_NAME_NOT_FOUND);
    close(c->fd);
    free(c);
    server_stop(&s);
}

TEST(raw_wrong_password_and_open_limit)
{
    int fds = harness_open_fds();
    struct server s;
    server_start(&s, 0);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "not-it");
    close(c->fd);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024];
    size_t n = create_body(b, "", 1, 0);
    unsigned opened = 0;
    uint32_t st;
    while ((st = rawc_req(c, SMB2_CREATE, b, n, 1)) == STATUS_SUCCESS && opened < 1000)
        opened++;
    CHECK_EQ_U64(opened, 256);
    CHECK_EQ_U64(st, STATUS_TOO_MANY_OPENED_FILES);
    close(c->fd);
    free(c);
    server_stop(&s);
    /* the vanished client's 256 opens were closed with its connection */
    CHECK_EQ_I64(harness_open_fds(), fds);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

/* Four smbclients at once, each on its own connection and server thread, each copying its own
 * 1 MiB + 1 file in and out; the shared statistics add up. */
TEST_T(smbclient_concurrent, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    char local[300];
    snprintf(local, sizeof local, "%s/local", s.root);
    CHECK(mkdir(local, 0755) == 0);
    FILE *p[4];
    for (unsigned i = 0; i < 4; i++) {
        char path[400], cmd[1200];
        snprintf(path, sizeof path, "%s/f%u", local, i);
        make_file(path, (1u << 20) + 1, 100 + i);
        snprintf(
            cmd, sizeof cmd,
            "timeout -k 5 60 smbclient -s /dev/null //127.0.0.1/share -p %u -U alice%%Secret-1 "
            "--use-kerberos=off -m SMB3 -c 'lcd %s; put f%u; get f%u g%u' 2>&1",
            smb_tcp_listener_port(s.l), local, i, i, i);
        p[i] = popen(cmd, "r");
        CHECK(p[i]);
    }
    for (unsigned i = 0; i < 4; i++) {
        char out[4096];
        size_t n = fread(out, 1, sizeof out - 1, p[i]);
        out[n] = 0;
        int st = pclose(p[i]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "smbclient %u:\n%s", i, out);
        char a[400], b[400], c[400];
        snprintf(a, sizeof a, "%s/f%u", local, i);
        snprintf(b, sizeof b, "%s/f%u", s.cfg.root, i);
        snprintf(c, sizeof c, "%s/g%u", local, i);
        uint8_t h1[32], h2[32], h3[32];
        sha256_file(a, h1);
        sha256_file(b, h2);
        sha256_file(c, h3);
        CHECK(!memcmp(h1, h2, 32) && !memcmp(h1, h3, 32));
    }
    server_stop(&s);
    CHECK_EQ_U64(s.nconns, 4);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
    CHECK_EQ_U64(s.stats.commands[SMB2_NEGOTIATE], 4);
    CHECK_EQ_U64(s.stats.commands[SMB2_TREE_CONNECT], 4);
    CHECK(s.stats.inline_writes >= 4 && s.stats.inline_reads >= 4);
}

/* ---- RDMA channels against a scripted Responder transport ----
 * Direct TCP carries the messages; peer_write / peer_read / send_invalidate act on "client
 * memory" here, one registered region [0, RDMA_MEM) with token RDMA_TOKEN, as an SMB Direct
 * Responder would on the client's registered buffers. A token or range outside it is refused
 * the way the transport reports a peer's refusal (-EACCES); descriptors holding fewer bytes
 * than asked give -EINVAL. */

#define RDMA_MEM   (1u << 20)
#define RDMA_TOKEN 0x51a7e001u

struct fake_rdma {
    smb_transport base;
    smb_transport *inner;
    uint8_t mem[RDMA_MEM];
    atomic_uint writes, reads, invalidates;
    atomic_uint last_invalidated;
};

static struct fake_rdma *fake_of(smb_transport *t)
{
    return (struct fake_rdma *)(void *)t;
}

static int fake_send(smb_transport *t, const void *m, size_t l)
{
    return fake_of(t)->inner->ops->send(fake_of(t)->inner, m, l);
}
static int fake_recv(smb_transport *t, void *b, size_t c, size_t *l, int ms)
{
    return fake_of(t)->inner->ops->recv(fake_of(t)->inner, b, c, l, ms);
}
static size_t fake_max_message(smb_transport *t)
{
    return fake_of(t)->inner->ops->max_message(fake_of(t)->inner);
}
static size_t fake_max_rdma(smb_transport *t)
{
    return RDMA_MEM;
}
static void fake_stats(smb_transport *t, smb_transport_stats *o)
{
    fake_of(t)->inner->ops->get_stats(fake_of(t)->inner, o);
}
static const char *fake_error(smb_transport *t)
{
    return "peer refused an RDMA token or range";
}
static void fake_destroy(smb_transport *t)
{
    fake_of(t)->inner->ops->destroy(fake_of(t)->inner);
}

/* Total length of the descriptors, or -EACCES when one leaves the registered region. */
static long fake_check(const smb_buffer_desc *d, unsigned n)
{
    long total = 0;
    for (unsigned i = 0; i < n; i++) {
        if (d[i].token != RDMA_TOKEN || d[i].offset > RDMA_MEM ||
            d[i].length > RDMA_MEM - d[i].offset)
            return -EACCES;
        total += d[i].length;
    }
    return total;
}

static int fake_peer_write(smb_transport *t, const smb_buffer_desc *d, unsigned n, const void *src,
                           size_t len)
{
    struct fake_rdma *f = fake_of(t);
    long total = fake_check(d, n);
    if (total < 0)
        return (int)total;
    if ((size_t)total < len)
        return -EINVAL;
    size_t done = 0;
    for (unsigned i = 0; i < n && done < len; i++) {
        size_t k = d[i].length < len - done ? d[i].length : len - done;
        memcpy(f->mem + d[i].offset, (const uint8_t *)src + done, k);
        done += k;
    }
    atomic_fetch_add(&f->writes, 1);
    return 0;
}

static int fake_peer_read(smb_transport *t, const smb_buffer_desc *d, unsigned n, void *dst,
                          size_t len)
{
    struct fake_rdma *f = fake_of(t);
    long total = fake_check(d, n);
    if (total < 0)
        return (int)total;
    if ((size_t)total < len)
        return -EINVAL;
    size_t done = 0;
    for (unsigned i = 0; i < n && done < len; i++) {
        size_t k = d[i].length < len - done ? d[i].length : len - done;
        memcpy((uint8_t *)dst + done, f->mem + d[i].offset, k);
        done += k;
    }
    atomic_fetch_add(&f->reads, 1);
    return 0;
}

static int fake_send_invalidate(smb_transport *t, const void *m, size_t l, uint32_t token)
{
    struct fake_rdma *f = fake_of(t);
    atomic_store(&f->last_invalidated, token);
    atomic_fetch_add(&f->invalidates, 1);
    return f->inner->ops->send(f->inner, m, l);
}

static const smb_transport_ops fake_ops = {
    .name = "scripted-rdma",
    .send = fake_send,
    .recv = fake_recv,
    .peer_write = fake_peer_write,
    .peer_read = fake_peer_read,
    .send_invalidate = fake_send_invalidate,
    .max_message = fake_max_message,
    .max_rdma = fake_max_rdma,
    .get_stats = fake_stats,
    .error = fake_error,
    .destroy = fake_destroy,
};

static smb_transport *wrap_fake(struct server *s, smb_transport *t)
{
    struct fake_rdma *f = s->wrap_arg;
    f->base.ops = &fake_ops;
    f->inner = t;
    return &f->base;
}

/* READ/WRITE body with one channel descriptor; its length. */
static size_t rdma_rw(uint8_t *b, uint16_t cmd, const uint8_t fid[16], uint32_t len,
                      uint32_t channel, uint64_t off, uint32_t token, uint32_t dlen)
{
    memset(b, 0, 48 + 16);
    wr16(b, 49);
    memcpy(b + 16, fid, 16);
    if (cmd == SMB2_READ) {
        wr32(b + 4, len);
        wr32(b + 36, channel);
        wr16(b + 44, 64 + 48);
        wr16(b + 46, 16);
    } else {
        wr32(b + 32, channel);
        wr32(b + 36, len); /* RemainingBytes */
        wr16(b + 40, 64 + 48);
        wr16(b + 42, 16);
    }
    wr64(b + 48, off);
    wr32(b + 56, token);
    wr32(b + 60, dlen);
    return 64;
}

TEST(rdma_channels)
{
    struct fake_rdma *f = calloc(1, sizeof *f);
    CHECK(f);
    struct server s;
    server_start(&s, 0);
    s.wrap = wrap_fake;
    s.wrap_arg = f;
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024];
    size_t n = create_body(b, "r", 3, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_SUCCESS);
    uint8_t fid[16];
    memcpy(fid, c->r + 64 + 64, 16);
    /* WRITE over RDMA_V1: the server reads 70000 bytes from client memory at 4096 */
    for (unsigned i = 0; i < 70000; i++)
        f->mem[4096 + i] = (uint8_t)(i * 7 + 1);
    n = rdma_rw(b, SMB2_WRITE, fid, 70000, 1, 4096, RDMA_TOKEN, 70000);
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 70000);
    CHECK_EQ_U64(atomic_load(&f->reads), 1);
    CHECK_EQ_U64(atomic_load(&f->invalidates), 0);
    /* READ over RDMA_V1_INVALIDATE into client memory at 200000: a Send with Invalidate of
     * the descriptor's token answers it; DataLength 0, DataRemaining the bytes written */
    n = rdma_rw(b, SMB2_READ, fid, 70000, 2, 200000, RDMA_TOKEN, 70000);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 4), 0);
    CHECK_EQ_U64(rd32(c->r + 64 + 8), 70000);
    CHECK_MEM(f->mem + 200000, f->mem + 4096, 70000);
    CHECK_EQ_U64(atomic_load(&f->writes), 1);
    CHECK_EQ_U64(atomic_load(&f->invalidates), 1);
    CHECK_EQ_U64(atomic_load(&f->last_invalidated), RDMA_TOKEN);
    /* WRITE over RDMA_V1_INVALIDATE: invalidated too */
    n = rdma_rw(b, SMB2_WRITE, fid, 10, 2, 0, RDMA_TOKEN, 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(atomic_load(&f->invalidates), 2);
    /* a WRITE over RDMA with a non-zero Length, or more than max_io */
    n = rdma_rw(b, SMB2_WRITE, fid, 10, 1, 0, RDMA_TOKEN, 10);
    wr32(b + 4, 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, n, 1), STATUS_INVALID_PARAMETER);
    n = rdma_rw(b, SMB2_WRITE, fid, (8u << 20) + 1, 1, 0, RDMA_TOKEN, 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, b, n, 1), STATUS_INVALID_PARAMETER);
    /* descriptors holding fewer bytes than asked */
    n = rdma_rw(b, SMB2_READ, fid, 1000, 1, 0, RDMA_TOKEN, 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, n, 1), STATUS_INVALID_PARAMETER);
    /* channel info that is not a whole number of descriptors */
    n = rdma_rw(b, SMB2_READ, fid, 10, 1, 0, RDMA_TOKEN, 10);
    wr16(b + 46, 15);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, n, 1), STATUS_INVALID_PARAMETER);
    /* an unknown channel */
    n = rdma_rw(b, SMB2_READ, fid, 10, 7, 0, RDMA_TOKEN, 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_READ, b, n, 1), STATUS_INVALID_PARAMETER);
    /* a dead token: the peer refuses, the connection ends */
    n = rdma_rw(b, SMB2_READ, fid, 10, 1, 0, 0xdead, 10);
    {
        static uint8_t m[256];
        hdr(m, SMB2_READ, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, b, n);
        wr32(m + 16, SMB2_FLAGS_SIGNED);
        srv_sign(0x0302, c->key, m, 64 + n, m + 48);
        raw_send(c->fd, m, 64 + n);
    }
    CHECK_EQ_I64(raw_recv(c->fd, c->r, sizeof c->r), -ECONNRESET);
    close(c->fd);
    free(c);
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 1);
    CHECK_EQ_U64(s.stats.rdma_reads, 2);
    CHECK_EQ_U64(s.stats.rdma_writes, 1);
    CHECK_EQ_U64(s.stats.send_invalidates, 2);
    CHECK_EQ_U64(s.stats.inline_reads + s.stats.inline_writes, 0);
    free(f);
}

/* [MS-SMB2] 3.3.5.12 / 3.3.5.13 over real SMB Direct: a READ or WRITE with Channel
 * SMB2_CHANNEL_RDMA_V1_INVALIDATE has its buffer invalidated by the server's response (a Send
 * with Invalidate) also when the request fails before its descriptors are used: the client's
 * transport says the peer released the region (SMB_RDMA_RELEASED_BY_PEER). Channel info with
 * no whole descriptor names no token: the answer is a plain Send and the client invalidates
 * itself (SMB_RDMA_RELEASED_LOCALLY). */
static void rdma_request(struct rawc *c, uint16_t cmd, const uint8_t fid[16], uint32_t len,
                         uint32_t channel, uint16_t info_len, uint32_t want_status,
                         enum smb_rdma_release want_release)
{
    static uint8_t buf[65536];
    smb_rdma_region *region = NULL;
    smb_buffer_desc d[4];
    unsigned nd = 0;
    CHECK_EQ_I64(c->t->ops->register_buffer(
                     c->t, buf, len, cmd == SMB2_READ ? SMB_RDMA_PEER_WRITES : SMB_RDMA_PEER_READS,
                     &region, d, 4, &nd),
                 0);
    CHECK_EQ_U64(nd, 1);
    uint8_t b[128];
    size_t n = rdma_rw(b, cmd, fid, len, channel, d[0].offset, d[0].token, d[0].length);
    wr16(b + (cmd == SMB2_READ ? 46 : 42), info_len);
    CHECK_EQ_U64(rawc_req(c, cmd, b, n, 1), want_status);
    enum smb_rdma_release how = 0;
    CHECK_EQ_I64(c->t->ops->release_buffer(c->t, region, &how), 0);
    CHECK_MSG(how == want_release, "%s status 0x%08x: region released %s, expected %s",
              cmd == SMB2_READ ? "READ" : "WRITE", want_status,
              how == SMB_RDMA_RELEASED_BY_PEER ? "by the peer" : "locally",
              want_release == SMB_RDMA_RELEASED_BY_PEER ? "by the peer" : "locally");
}

TEST_T(smbd_invalidate_on_every_response, 60)
{
    struct server s;
    server_start_smbd(&s, 0);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024];
    /* a file of 4096 bytes, then opened again for reading only */
    size_t n = create_body(b, "ro", 3, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_SUCCESS);
    uint8_t fid[16], ro[16];
    memcpy(fid, c->r + 64 + 64, 16);
    static uint8_t data[4096];
    memset(b, 0, 48);
    wr16(b, 49);
    wr16(b + 2, 64 + 48);
    wr32(b + 4, sizeof data);
    memcpy(b + 16, fid, 16);
    {
        static uint8_t wb[48 + sizeof data];
        memcpy(wb, b, 48);
        fx_fill(data, sizeof data, 9);
        memcpy(wb + 48, data, sizeof data);
        CHECK_EQ_U64(rawc_req(c, SMB2_WRITE, wb, sizeof wb, 1), STATUS_SUCCESS);
    }
    n = create_body(b, "ro", 1, 0);
    wr32(b + 24, 0x00120089u); /* FILE_GENERIC_READ */
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_SUCCESS);
    memcpy(ro, c->r + 64 + 64, 16);
    uint8_t closed[16];
    memset(closed, 0x5a, sizeof closed); /* a FileId the server never gave */
    smb_transport_stats before, after;
    c->t->ops->get_stats(c->t, &before);

    /* the good case, for comparison: the READ's response invalidates */
    rdma_request(c, SMB2_READ, ro, 4096, 2, 16, STATUS_SUCCESS, SMB_RDMA_RELEASED_BY_PEER);
    /* a READ of a handle that is not open fails before its descriptors are parsed */
    rdma_request(c, SMB2_READ, closed, 4096, 2, 16, STATUS_FILE_CLOSED, SMB_RDMA_RELEASED_BY_PEER);
    /* a WRITE on a read-only open fails its access check */
    rdma_request(c, SMB2_WRITE, ro, 4096, 2, 16, STATUS_ACCESS_DENIED, SMB_RDMA_RELEASED_BY_PEER);
    /* channel info that is not a whole number of descriptors: refused, yet its first
     * descriptor is whole, so its token is invalidated */
    rdma_request(c, SMB2_READ, ro, 4096, 2, 24, STATUS_INVALID_PARAMETER,
                 SMB_RDMA_RELEASED_BY_PEER);
    /* no whole descriptor (8 bytes): no token to name, a plain Send */
    rdma_request(c, SMB2_WRITE, fid, 4096, 2, 8, STATUS_INVALID_PARAMETER,
                 SMB_RDMA_RELEASED_LOCALLY);
    /* RDMA_V1 (no invalidation asked): the client invalidates, also after an error */
    rdma_request(c, SMB2_READ, closed, 4096, 1, 16, STATUS_FILE_CLOSED, SMB_RDMA_RELEASED_LOCALLY);
    c->t->ops->get_stats(c->t, &after);
    CHECK_EQ_U64(after.remote_invalidations - before.remote_invalidations, 4);
    CHECK_EQ_U64(after.local_invalidations - before.local_invalidations, 2);
    c->t->ops->destroy(c->t);
    free(c);
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
    CHECK_EQ_U64(s.stats.send_invalidates, 4);
    CHECK_EQ_U64(s.stats.rdma_writes, 1);
    CHECK_EQ_U64(s.stats.rdma_reads, 0);
}

/* QUERY_DIRECTORY over 300 names and one that is not UTF-8, in small pieces. */
TEST(raw_query_directory)
{
    struct server s;
    server_start(&s, 0);
    char path[400];
    for (unsigned i = 0; i < 300; i++) {
        snprintf(path, sizeof path, "%s/file%03u", s.cfg.root, i);
        make_file(path, i, i);
    }
    snprintf(path, sizeof path, "%s/bad\xff\xfename", s.cfg.root);
    make_file(path, 1, 1);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024];
    size_t n = create_body(b, "", 1, 1);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 1), STATUS_SUCCESS);
    uint8_t fid[16];
    memcpy(fid, c->r + 64 + 64, 16);
    /* body: class, flags, pattern, output length */
#define QD(cls, flags, pat, outlen)                                                                \
    do {                                                                                           \
        memset(b, 0, 32);                                                                          \
        wr16(b, 33);                                                                               \
        b[2] = (cls);                                                                              \
        b[3] = (flags);                                                                            \
        memcpy(b + 8, fid, 16);                                                                    \
        size_t pl_ = srv_utf8_to_utf16((pat), b + 32, 512, 0);                                     \
        wr16(b + 24, 64 + 32);                                                                     \
        wr16(b + 26, (uint16_t)pl_);                                                               \
        wr32(b + 28, (outlen));                                                                    \
        n = 32 + (pl_ ? pl_ : 1);                                                                  \
    } while (0)
    unsigned entries = 0, calls = 0;
    uint32_t st;
    QD(37, 1, "*", 4096);
    while ((st = rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1)) == STATUS_SUCCESS && calls < 100) {
        const uint8_t *e = c->r + rd16(c->r + 64 + 2);
        for (;;) {
            entries++;
            if (!rd32(e))
                break;
            e += rd32(e);
        }
        calls++;
        b[3] = 0;
    }
    CHECK_EQ_U64(st, STATUS_NO_MORE_FILES);
    CHECK_EQ_U64(entries, 302); /* ".", "..", the 300 files; not the name that is not UTF-8 */
    CHECK(calls > 5);
    /* restart, one entry */
    QD(1, 1 | 2, "*", 4096);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 8), 0); /* one entry: no next */
    /* an exact name, another class */
    QD(3, 1, "FILE007", 4096);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(c->r + 64 + 8 + 60), 14); /* FileNameLength of "file007" */
    QD(3, 0, "FILE007", 4096);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_NO_MORE_FILES);
    QD(12, 1, "nomatch*", 4096);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_NO_SUCH_FILE);
    QD(38, 1, "*", 10);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_INFO_LENGTH_MISMATCH);
    QD(99, 1, "*", 4096);
    CHECK_EQ_U64(rawc_req(c, SMB2_QUERY_DIRECTORY, b, n, 1), STATUS_INVALID_INFO_CLASS);
#undef QD
    close(c->fd);
    free(c);
    server_stop(&s);
}

/* smbclient commands that query and set more: allinfo (FileAllInformation, streams, network
 * open and attribute tag information), volume, du (FileFsFullSizeInformation), setmode
 * (SET_INFO basic), reget/reput (offsets), mget/mput with a wildcard, deltree. */
TEST_T(smbclient_more_commands, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    char local[300], path[400], out[16384];
    snprintf(local, sizeof local, "%s/local", s.root);
    CHECK(mkdir(local, 0755) == 0);
    snprintf(path, sizeof path, "%s/local/got", s.root);
    CHECK(mkdir(path, 0755) == 0);
    for (unsigned i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/m%u.dat", local, i);
        make_file(path, 1000 + i, 50 + i);
    }
    int rc = smbclient(&s, "alice%Secret-1", "share", "-m SMB3", local,
                       "prompt off; mput m*.dat; allinfo m0.dat; volume; du; setmode m1.dat +r; "
                       "mkdir t; mkdir t\\\\u; put m2.dat t\\\\u\\\\x; deltree t; "
                       "lcd got; mget m*.dat",
                       out, sizeof out);
    /* the one refusal: no 8.3 names (allinfo goes on without one) */
    const char *alt = strstr(out, "NT_STATUS_NOT_SUPPORTED getting alt name for \\m0.dat");
    CHECK_MSG(rc == 0 && alt && !strstr(alt + 10, "NT_STATUS") && strstr(out, "NT_STATUS") == alt,
              "exit %d:\n%s", rc, out);
    CHECK_MSG(strstr(out, "create_time:") && strstr(out, "stream: [::$DATA], 1000 bytes"),
              "allinfo:\n%s", out);
    CHECK_MSG(strstr(out, "Volume: |softndk|"), "volume:\n%s", out);
    CHECK_MSG(strstr(out, "blocks of size"), "du:\n%s", out);
    snprintf(path, sizeof path, "%s/t", s.cfg.root);
    CHECK(!exists(path));
    for (unsigned i = 0; i < 3; i++) {
        char a[400], b2[450];
        uint8_t h1[32], h2[32];
        snprintf(a, sizeof a, "%s/m%u.dat", local, i);
        snprintf(b2, sizeof b2, "%s/got/m%u.dat", local, i);
        sha256_file(a, h1);
        sha256_file(b2, h2);
        CHECK(!memcmp(h1, h2, 32));
    }
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

/* A message larger than the server takes ends the connection (logged); a client that goes
 * away inside a message ends it too; the server goes on serving the next connection. */
TEST(raw_oversize_and_vanish)
{
    struct server s;
    server_start(&s, 0);
    int fd = raw_connect(&s);
    uint8_t m[128], r[4096];
    size_t n = negotiate(m, 0x0302);
    raw_send(fd, m, n);
    CHECK(raw_recv(fd, r, sizeof r) > 0);
    size_t big = (9u << 20);
    uint8_t hdr4[4] = {0, (uint8_t)(big >> 16), (uint8_t)(big >> 8), (uint8_t)big};
    CHECK(send(fd, hdr4, 4, MSG_NOSIGNAL) == 4);
    static uint8_t zeros[1 << 16];
    for (size_t done = 0; done < big;) {
        ssize_t w =
            send(fd, zeros, sizeof zeros < big - done ? sizeof zeros : big - done, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    CHECK_EQ_I64(raw_recv(fd, r, sizeof r), -ECONNRESET);
    close(fd);
    fd = raw_connect(&s);
    uint8_t part[14] = {0, 0, 0x03, 0xe8, 0xFE, 'S', 'M', 'B'};
    CHECK(send(fd, part, sizeof part, MSG_NOSIGNAL) == (ssize_t)sizeof part);
    close(fd);
    fd = raw_connect(&s);
    raw_send(fd, m, n);
    long rl = raw_recv(fd, r, sizeof r);
    CHECK(rl > 64);
    CHECK_EQ_U64(status_of(r), STATUS_SUCCESS);
    close(fd);
    server_stop(&s);
    CHECK_EQ_U64(s.nconns, 3);
    CHECK_EQ_I64(atomic_load(&s.failed), 1); /* the oversized message */
}

/* Hostile bodies: valid requests of every kind with a few random bytes changed, 3000 of them
 * (a fixed seed). Each gets a response or ends the connection (then a new one logs in); the
 * server never crashes, hangs or leaks a descriptor (the ASan build runs this too). */
TEST_T(raw_mutated_requests, 120)
{
    int fds = harness_open_fds();
    struct server s;
    server_start(&s, 0);
    char path[400];
    snprintf(path, sizeof path, "%s/seed", s.cfg.root);
    make_file(path, 5000, 5);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint32_t x = 12345;
    unsigned responses = 0, reconnects = 0;
    for (unsigned it = 0; it < 3000; it++) {
        uint8_t b[1024];
        size_t n;
        uint16_t cmd;
        /* a valid open to aim at: the share's root or "seed" (made again if renamed away) */
        if (!exists(path))
            make_file(path, 5000, 5);
        size_t cn = create_body(b, (it & 1) ? "seed" : "", 1, 0);
        static uint8_t m[2048];
        hdr(m, SMB2_CREATE, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, b, cn);
        raw_send(c->fd, m, 64 + cn);
        if (raw_recv(c->fd, c->r, sizeof c->r) < 0) { /* the last request ended it */
            close(c->fd);
            rawc_login(&s, c, "Secret-1");
            reconnects++;
            continue;
        }
        uint32_t st = status_of(c->r);
        uint8_t fid[16];
        memset(fid, 0xAB, 16);
        if (st == STATUS_SUCCESS)
            memcpy(fid, c->r + 64 + 64, 16);
        switch (it % 9) {
        case 0:
            cmd = SMB2_CREATE;
            n = create_body(b, "new\\x", 3, 0);
            break;
        case 1:
            cmd = SMB2_QUERY_INFO;
            memset(b, 0, 48);
            wr16(b, 41);
            b[2] = 1;
            b[3] = 18;
            wr32(b + 4, 4096);
            memcpy(b + 24, fid, 16);
            n = 48;
            break;
        case 2:
            cmd = SMB2_QUERY_DIRECTORY;
            memset(b, 0, 40);
            wr16(b, 33);
            b[2] = 37;
            memcpy(b + 8, fid, 16);
            wr16(b + 24, 64 + 32);
            wr16(b + 26, 2);
            b[32] = '*';
            wr32(b + 28, 65536);
            n = 40;
            break;
        case 3:
            cmd = SMB2_SET_INFO;
            memset(b, 0, 64);
            wr16(b, 33);
            b[2] = 1;
            b[3] = 10;
            wr32(b + 4, 26);
            wr16(b + 8, 64 + 32);
            memcpy(b + 16, fid, 16);
            wr32(b + 32 + 16, 6);
            memcpy(b + 32 + 20, "z\0z\0z\0", 6);
            n = 64;
            break;
        case 4:
            cmd = SMB2_READ;
            memset(b, 0, 64);
            wr16(b, 49);
            wr32(b + 4, 100);
            memcpy(b + 16, fid, 16);
            n = 64;
            break;
        case 5:
            cmd = SMB2_WRITE;
            memset(b, 0, 64);
            wr16(b, 49);
            wr16(b + 2, 64 + 48);
            wr32(b + 4, 16);
            memcpy(b + 16, fid, 16);
            n = 64;
            break;
        case 6:
            cmd = SMB2_IOCTL;
            memset(b, 0, 88);
            wr16(b, 57);
            wr32(b + 4, (it / 9) % 4 ? 0x001401FCu : 0x00140204u);
            memcpy(b + 8, fid, 16);
            wr32(b + 24, 64 + 56);
            wr32(b + 28, 26);
            wr32(b + 44, 1024);
            n = 88;
            break;
        case 7:
            cmd = SMB2_TREE_CONNECT;
            memset(b, 0, 8);
            wr16(b, 9);
            wr16(b + 4, 64 + 8);
            wr16(b + 6, 10);
            memcpy(b + 8, "\\\0\\\0x\0\\\0s\0", 10);
            n = 18;
            break;
        default:
            cmd = SMB2_CLOSE;
            memset(b, 0, 24);
            wr16(b, 24);
            wr16(b + 2, 1);
            memcpy(b + 8, fid, 16);
            n = 24;
            break;
        }
        unsigned flips = 1 + (x >> 28);
        for (unsigned k = 0; k < flips; k++) {
            x = x * 1103515245u + 12345u;
            b[(x >> 8) % n] = (uint8_t)(x >> 20);
        }
        hdr(m, cmd, c->mid++, c->sid);
        wr32(m + 36, c->tid);
        memcpy(m + 64, b, n);
        raw_send(c->fd, m, 64 + n);
        long rl = raw_recv(c->fd, c->r, sizeof c->r);
        if (rl >= 64 + 2) {
            responses++;
        } else {
            CHECK_EQ_I64(rl, -ECONNRESET);
            close(c->fd);
            rawc_login(&s, c, "Secret-1");
            reconnects++;
            continue;
        }
        if (st == STATUS_SUCCESS && cmd != SMB2_CLOSE) {
            /* the request may have ended the connection after its response (a mismatched
             * FSCTL_VALIDATE_NEGOTIATE_INFO does) */
            hdr(m, SMB2_CLOSE, c->mid++, c->sid);
            wr32(m + 36, c->tid);
            memset(m + 64, 0, 24);
            wr16(m + 64, 24);
            memcpy(m + 64 + 8, fid, 16);
            raw_send(c->fd, m, 64 + 24);
            if (raw_recv(c->fd, c->r, sizeof c->r) < 0) {
                close(c->fd);
                rawc_login(&s, c, "Secret-1");
                reconnects++;
            }
        }
    }
    CHECK(responses > 2500);
    CHECK(reconnects < 200);
    close(c->fd);
    free(c);
    server_stop(&s);
    CHECK_EQ_I64(harness_open_fds(), fds);
}

static bool log_has(struct server *s, const char *what)
{
    fflush(s->cfg.log);
    FILE *f = fopen(s->log_path, "r");
    CHECK(f);
    char line[600];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

/* A client that starts with an SMB1 NEGOTIATE offering "SMB 2.???" gets dialect 0x02FF and
 * then negotiates SMB 3.1.1 ([MS-SMB2] 3.3.5.3.1). */
TEST_T(smbclient_smb1_upgrade, 60)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s, "--option=\"client min protocol=NT1\" -m SMB3", 4099);
    CHECK(log_has(&s, "SMB1 NEGOTIATE offers SMB2: answering with dialect 0x02ff"));
    CHECK(log_has(&s, "UPGRADED => NEGOTIATED (dialect 0x0311 chosen)"));
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

/* A configuration the server cannot serve (no such root, no share name) fails at once, with
 * a log line, without reading from the connection. */
TEST(bad_config)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    smb_transport *t;
    CHECK(smb_tcp_transport_from_fd(sv[0], &t) == 0);
    char log_path[] = "/tmp/softndk-smbcfg-XXXXXX";
    int lfd = mkstemp(log_path);
    CHECK(lfd >= 0);
    FILE *log = fdopen(lfd, "w+");
    CHECK(log);
    smb2_server_config cfg = {.root = "/nonexistent/softndk-share",
                              .share = "share",
                              .user = "u",
                              .password = "p",
                              .log = log};
    CHECK_EQ_I64(smb2_serve_connection(&cfg, t, NULL), -1);
    cfg.root = "/tmp";
    cfg.share = NULL;
    CHECK_EQ_I64(smb2_serve_connection(&cfg, t, NULL), -1);
    fflush(log);
    rewind(log);
    char line[512];
    CHECK(fgets(line, sizeof line, log));
    CHECK_MSG(strstr(line, "cannot serve \"/nonexistent/softndk-share\""), "log: %s", line);
    fclose(log);
    unlink(log_path);
    t->ops->destroy(t);
    close(sv[1]);
}

/* LOCK body of n elements {off, len, flags}; its length. */
static size_t lock_body(uint8_t *b, const uint8_t fid[16], unsigned n, const uint64_t *el)
{
    memset(b, 0, 24 + 24 * n);
    wr16(b, 48);
    wr16(b + 2, (uint16_t)n);
    memcpy(b + 8, fid, 16);
    for (unsigned i = 0; i < n; i++) {
        wr64(b + 24 + 24 * i, el[3 * i]);
        wr64(b + 24 + 24 * i + 8, el[3 * i + 1]);
        wr32(b + 24 + 24 * i + 16, (uint32_t)el[3 * i + 2]);
    }
    return 24 + 24 * n;
}

/* Byte-range locks between two opens of one file, as OFD locks a local process sees too. */
TEST(raw_locks)
{
    struct server s;
    server_start(&s, 0);
    char path[400];
    snprintf(path, sizeof path, "%s/lk", s.cfg.root);
    make_file(path, 100, 3);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024], f1[16], f2[16];
    size_t n = create_body(b, "lk", 1, 0);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 0), STATUS_SUCCESS);
    memcpy(f1, c->r + 64 + 64, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 0), STATUS_SUCCESS);
    memcpy(f2, c->r + 64 + 64, 16);
    const uint64_t X = 0x12, S = 0x11, U = 0x04; /* exclusive, shared (fail at once), unlock */
#define LOCK1(fid, off, len, fl, want)                                                             \
    do {                                                                                           \
        uint64_t el_[3] = {(off), (len), (fl)};                                                    \
        size_t ln_ = lock_body(b, (fid), 1, el_);                                                  \
        CHECK_EQ_U64(rawc_req(c, SMB2_LOCK, b, ln_, 0), (want));                                   \
    } while (0)
    LOCK1(f1, 0, 10, X, STATUS_SUCCESS);
    LOCK1(f1, 5, 5, X, 0xC0000055u); /* not re-entrant: LOCK_NOT_GRANTED */
    LOCK1(f2, 0, 1, S, 0xC0000055u); /* the other open */
    LOCK1(f2, 10, 10, X, STATUS_SUCCESS);
    LOCK1(f2, 50, 0, X, STATUS_SUCCESS); /* zero length: conflicts with nothing */
    LOCK1(f1, 0, 9, U, 0xC000007Eu);     /* RANGE_NOT_LOCKED: not the range held */
    LOCK1(f1, 0, 10, U, STATUS_SUCCESS);
    LOCK1(f2, 0, 1, S, STATUS_SUCCESS);
    LOCK1(f1, 0, 1, S, STATUS_SUCCESS); /* shared beside shared */
    LOCK1(f1, 0, 1, 0x13, STATUS_INVALID_PARAMETER);
    LOCK1(f1, 1ull << 63, 1, X, 0xC00001A1u); /* INVALID_LOCK_RANGE */
    {
        uint64_t el[6] = {30, 10, 0x02, 40, 10, 0x02}; /* several need FAIL_IMMEDIATELY */
        n = lock_body(b, f1, 2, el);
        CHECK_EQ_U64(rawc_req(c, SMB2_LOCK, b, n, 0), STATUS_INVALID_PARAMETER);
        uint64_t el2[6] = {30, 10, X, 10, 10, X}; /* the second conflicts: the first is undone */
        n = lock_body(b, f1, 2, el2);
        CHECK_EQ_U64(rawc_req(c, SMB2_LOCK, b, n, 0), 0xC0000055u);
        LOCK1(f2, 30, 10, X, STATUS_SUCCESS);
    }
    /* a local process sees the server's lock on [10, 20) */
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 12;
    fl.l_len = 1;
    CHECK_MSG(fcntl(fd, F_OFD_GETLK, &fl) == 0, "F_OFD_GETLK: %s", strerror(errno));
    CHECK_EQ_U64(fl.l_type, F_WRLCK);
    CHECK_EQ_I64(fl.l_start, 10);
    CHECK_EQ_I64(fl.l_len, 10);
    /* closing f2 releases its locks */
    memset(b, 0, 24);
    wr16(b, 24);
    memcpy(b + 8, f2, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, b, 24, 0), STATUS_SUCCESS);
    memset(&fl, 0, sizeof fl); /* l_pid must be 0 again (GETLK set it to -1) */
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 12;
    fl.l_len = 1;
    CHECK(fcntl(fd, F_OFD_GETLK, &fl) == 0);
    CHECK_EQ_U64(fl.l_type, F_UNLCK);
    /* two overlapping shared ranges of one open: unlocking one keeps the other held */
    LOCK1(f1, 60, 10, S, STATUS_SUCCESS);
    LOCK1(f1, 65, 10, S, STATUS_SUCCESS);
    LOCK1(f1, 60, 10, U, STATUS_SUCCESS);
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 66;
    fl.l_len = 1;
    CHECK(fcntl(fd, F_OFD_GETLK, &fl) == 0);
    CHECK_EQ_U64(fl.l_type, F_RDLCK);
    CHECK_EQ_I64(fl.l_start, 65);
    close(fd);
    LOCK1(f1, 10, 10, X, STATUS_SUCCESS);
#undef LOCK1
    close(c->fd);
    free(c);
    server_stop(&s);
}

/* Encryption ([MS-SMB2] 3.1.4.3): smbclient requiring it gets every request and response in a
 * TRANSFORM_HEADER, AES-128-GCM under 3.1.1 and AES-128-CCM under 3.0 and 3.0.2. */
TEST_T(smbclient_encrypted, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s, "-m SMB3 --client-protection=encrypt", 65537);
    copy_round(&s, "--option=\"client max protocol=SMB3_02\" --client-protection=encrypt", 65537);
    copy_round(&s, "--option=\"client max protocol=SMB3_00\" --client-protection=encrypt", 4097);
    CHECK(log_has(&s, "cipher AES-128-GCM"));
    CHECK(log_has(&s, "cipher AES-128-CCM"));
    CHECK(log_has(&s, "messages came encrypted"));
    server_stop(&s);
    CHECK_EQ_I64(atomic_load(&s.failed), 0);
}

/* Hostile TRANSFORM_HEADERs: before any cipher was negotiated, for an unknown session, with a
 * tag that does not verify, with a size that is not the message's: each ends its connection;
 * one made right is answered in kind (AES-128-CCM under 3.0.2). */
TEST(raw_transform_header)
{
    struct server s;
    server_start(&s, 0);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    static uint8_t m[512];
    uint8_t r[4096];
    /* no cipher negotiated */
    rawc_caps = 0;
    rawc_login(&s, c, "Secret-1");
    memset(m, 0, 52 + 68);
    m[0] = 0xFD;
    m[1] = 'S';
    m[2] = 'M';
    m[3] = 'B';
    wr32(m + 36, 68);
    wr16(m + 42, 1);
    wr64(m + 44, c->sid);
    raw_send(c->fd, m, 52 + 68);
    CHECK_EQ_I64(raw_recv(c->fd, r, sizeof r), -ECONNRESET);
    close(c->fd);
    /* CCM negotiated: a wrong tag, an unknown session, a wrong size */
    rawc_caps = 0x40;
    for (unsigned k = 0; k < 3; k++) {
        rawc_login(&s, c, "Secret-1");
        memset(m + 4, 0, 48 + 68);
        wr32(m + 36, k == 2 ? 60 : 68);
        wr16(m + 42, 1);
        wr64(m + 44, k == 1 ? 0x77 : c->sid);
        raw_send(c->fd, m, 52 + 68);
        CHECK_EQ_I64(raw_recv(c->fd, r, sizeof r), -ECONNRESET);
        close(c->fd);
    }
    /* and a right one: an ECHO, encrypted with the key the client derives */
    rawc_login(&s, c, "Secret-1");
    uint8_t in_key[16], out_key[16];
    srv_kdf(c->skey, "SMB2AESCCM", 11, "ServerIn ", 10, in_key);
    srv_kdf(c->skey, "SMB2AESCCM", 11, "ServerOut", 10, out_key);
    memset(m, 0, 52);
    m[0] = 0xFD;
    m[1] = 'S';
    m[2] = 'M';
    m[3] = 'B';
    memcpy(m + 20, "nonce-12345", 11);
    wr32(m + 36, 68);
    wr16(m + 42, 1);
    wr64(m + 44, c->sid);
    hdr(m + 52, SMB2_ECHO, c->mid++, c->sid);
    wr16(m + 52 + 64, 4);
    wr16(m + 52 + 66, 0);
    srv_encrypt(1, in_key, m, m + 52, 68);
    raw_send(c->fd, m, 52 + 68);
    long rl = raw_recv(c->fd, r, sizeof r);
    CHECK_EQ_I64(rl, 52 + 68);
    CHECK(r[0] == 0xFD && rd32(r + 36) == 68 && rd64(r + 44) == c->sid);
    CHECK_EQ_I64(srv_decrypt(1, out_key, r, r + 52, 68), 0);
    CHECK_EQ_U64(rd16(r + 52 + 12), SMB2_ECHO);
    CHECK_EQ_U64(status_of(r + 52), STATUS_SUCCESS);
    CHECK_EQ_U64(rd32(r + 52 + 16) & SMB2_FLAGS_SIGNED, 0); /* encrypted, not signed */
    close(c->fd);
    rawc_caps = 0;
    free(c);
    CHECK(log_has(&s, "malformed or unexpected TRANSFORM_HEADER: ending"));
    CHECK(log_has(&s, "encrypted message does not verify: ending"));
    CHECK(log_has(&s, "encrypted message for an unknown session: ending"));
    CHECK(log_has(&s, "cipher AES-128-CCM"));
    server_stop(&s);
}

/* A rename carries the connection's other opens along: a delete on close of a file under a
 * renamed directory deletes it at its new name, not whatever took the old one. */
TEST(raw_rename_follows)
{
    struct server s;
    server_start(&s, 0);
    struct rawc *c = malloc(sizeof *c);
    CHECK(c);
    rawc_login(&s, c, "Secret-1");
    uint8_t b[1024], dir[16], file[16];
    size_t n = create_body(b, "dd", 2, 1);
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 0), STATUS_SUCCESS);
    memcpy(dir, c->r + 64 + 64, 16);
    n = create_body(b, "dd\\x", 2, 0x1000); /* FILE_DELETE_ON_CLOSE */
    CHECK_EQ_U64(rawc_req(c, SMB2_CREATE, b, n, 0), STATUS_SUCCESS);
    memcpy(file, c->r + 64 + 64, 16);
    memset(b, 0, 64);
    wr16(b, 33);
    b[2] = 1;
    b[3] = 10; /* FileRenameInformation to "ee" */
    wr32(b + 4, 24);
    wr16(b + 8, 64 + 32);
    memcpy(b + 16, dir, 16);
    wr32(b + 32 + 16, 4);
    memcpy(b + 32 + 20, "e\0e\0", 4);
    CHECK_EQ_U64(rawc_req(c, SMB2_SET_INFO, b, 32 + 24, 0), STATUS_SUCCESS);
    /* a new dd\x takes the old name */
    char p[400];
    snprintf(p, sizeof p, "%s/dd", s.cfg.root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/dd/x", s.cfg.root);
    make_file(p, 10, 1);
    memset(b, 0, 24);
    wr16(b, 24);
    memcpy(b + 8, file, 16);
    CHECK_EQ_U64(rawc_req(c, SMB2_CLOSE, b, 24, 0), STATUS_SUCCESS);
    CHECK(exists(p));
    snprintf(p, sizeof p, "%s/ee/x", s.cfg.root);
    CHECK(!exists(p));
    close(c->fd);
    free(c);
    server_stop(&s);
}
