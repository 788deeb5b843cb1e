/* The SMB2 server (smb/server/) over Direct TCP on loopback. Unit tests: the path rules that
 * confine a name to the share, and hostile requests from a raw client, each answered with
 * the exact status or a disconnect. Interop: Samba's smbclient copies files both ways (sha256
 * compared), lists, renames, deletes, makes and removes a directory; a bad password, a bad
 * share, dialect 3.0, 3.1.1 and signing. Every wait is bounded (smbclient under timeout(1),
 * raw receives with a deadline). */
#include <smb/smb2_server.h>
#include <smb/tcp_listen.h>

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

#include "../../smb/server/srv_fs.h"
#include "../../smb/server/srv_utf16.h"
#include "../../smb/server/srv_wire.h"

/* ---- a server on a free loopback port, one thread, connections served in turn ---- */

struct server {
    smb2_server_config cfg;
    smb2_server_stats stats;
    smb_tcp_listener *l;
    pthread_t th;
    atomic_bool stop;
    atomic_int last_result;
    char root[256];
    char log_path[300];
};

static void *server_main(void *arg)
{
    struct server *s = arg;
    while (!atomic_load(&s->stop)) {
        smb_transport *t;
        int rc = smb_tcp_accept(s->l, &t, 100);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc)
            break;
        atomic_store(&s->last_result, smb2_serve_connection(&s->cfg, t, &s->stats));
        t->ops->destroy(t);
    }
    return NULL;
}

static void server_start(struct server *s, int require_signing)
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
    char err[128];
    int rc = smb_tcp_listen("127.0.0.1", 0, &s->l, err, sizeof err);
    CHECK_MSG(rc == 0, "listen: %s", err);
    CHECK(pthread_create(&s->th, NULL, server_main, s) == 0);
}

static void server_stop(struct server *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->th, NULL);
    smb_tcp_listener_close(s->l);
    fclose(s->cfg.log);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->root);
    if (!getenv("SMB_SERVER_TEST_KEEP")) /* set: the directory and server.log stay */
        CHECK(system(cmd) == 0);
    free((void *)s->cfg.root);
}

/* ---- smbclient ---- */

static bool have_smbclient(void)
{
    return system("command -v smbclient >/dev/null 2>&1") == 0;
}

/* Runs smbclient against the server (under timeout(1): 60 s) with extra options and commands;
 * its output in out; its exit status. */
static int smbclient(struct server *s, const char *user_pass, const char *share,
                     const char *opts, const char *lcd, const char *cmds, char *out, size_t cap)
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
    int rc = smbclient(s, "alice%Secret-1", "share", opts, local, "put a; get a b; ls", out,
                       sizeof out);
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
}

TEST_T(smbclient_smb3_00, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s, "--option=\"client min protocol=SMB3_00\" --option=\"client max protocol=SMB3_00\"",
               65537);
    server_stop(&s);
    FILE *f = fopen(s.log_path, "r");
    (void)f;
}

TEST_T(smbclient_smb3_11, 120)
{
    NEED_SMBCLIENT();
    struct server s;
    server_start(&s, 0);
    copy_round(&s, "--option=\"client min protocol=SMB3_11\" --option=\"client max protocol=SMB3_11\"",
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
    server_stop(&s);
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
    uint8_t hdr[4] = {0, (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    CHECK(send(fd, hdr, 4, MSG_NOSIGNAL) == 4);
    CHECK(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len);
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
