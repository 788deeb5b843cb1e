#include <stdlib.h>
#include <string.h>

#include "config/options.h"
#include "harness.h"

static NTSTATUS resolve(const SOFTNDK_OPTIONS *o, struct sndk_config *cfg)
{
    char err[256];
    return sndk_config_resolve(o, cfg, err, sizeof err);
}

TEST(options_defaults)
{
    struct sndk_config cfg;
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.mpa_revision, 2);
    CHECK(cfg.crc);
    CHECK_EQ_U64(cfg.port_low, 49152);
    CHECK_EQ_U64(cfg.port_high, 65535);
    CHECK_EQ_U64(cfg.threads, 1);
    CHECK_EQ_U64(cfg.spin_us, SNDK_DEFAULT_SPIN_US);
    CHECK_EQ_U64(cfg.log_level, SoftNdkLogWarn);
    CHECK_EQ_U64(cfg.connect_timeout_ms, 10000);
    CHECK_EQ_U64(cfg.disconnect_timeout_ms, 10000);
    CHECK_EQ_U64(cfg.peer_timeout_ms, 30000);
}

TEST(options_peer_timeout)
{
    struct sndk_config cfg;
    setenv("SOFTNDK_PEER_TIMEOUT_MS", "1500", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.peer_timeout_ms, 1500);
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.PeerTimeoutMs = 700;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.peer_timeout_ms, 700); /* explicit beats the environment */
    setenv("SOFTNDK_PEER_TIMEOUT_MS", "0", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_INVALID_PARAMETER);
    setenv("SOFTNDK_PEER_TIMEOUT_MS", "soon", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_INVALID_PARAMETER);
}

TEST(options_env_and_explicit_precedence)
{
    setenv("SOFTNDK_MPA_REV", "1", 1);
    setenv("SOFTNDK_CRC", "off", 1);
    setenv("SOFTNDK_EPHEMERAL_PORTS", "50000-50009", 1);
    setenv("SOFTNDK_THREADS", "3", 1);
    setenv("SOFTNDK_SPIN_US", "0", 1);
    setenv("SOFTNDK_LOG", "debug", 1);
    setenv("SOFTNDK_LIMITS", "MaxInitiatorRequestSge=3,maxcqdepth=100", 1);
    struct sndk_config cfg;
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.mpa_revision, 1);
    CHECK(!cfg.crc);
    CHECK_EQ_U64(cfg.port_low, 50000);
    CHECK_EQ_U64(cfg.port_high, 50009);
    CHECK_EQ_U64(cfg.threads, 3);
    CHECK_EQ_U64(cfg.spin_us, 0);
    CHECK_EQ_U64(cfg.log_level, SoftNdkLogDebug);
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 3);
    CHECK_EQ_U64(cfg.limits.MaxCqDepth, 100);
    CHECK(!cfg.flags_given);
    setenv("SOFTNDK_LIMITS", "MaxCqDepth=010,MaxSrqDepth=0x10,AdapterFlags=0x8", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.limits.MaxCqDepth, 10); /* decimal, not octal */
    CHECK_EQ_U64(cfg.limits.MaxSrqDepth, 16);
    CHECK_EQ_U64(cfg.limits.AdapterFlags, NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED);
    CHECK(cfg.flags_given);
    setenv("SOFTNDK_LIMITS", "MaxInitiatorRequestSge=3,maxcqdepth=100", 1);

    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.MpaRevision = 2;
    o.Crc = SoftNdkCrcOn;
    o.EphemeralPortLow = 60000;
    o.EphemeralPortHigh = 60001;
    o.ProgressThreads = 2;
    o.SpinMicroseconds = SOFTNDK_SPIN_NONE;
    o.LogLevel = SoftNdkLogError;
    o.Limits = "MaxSrqDepth=0";
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.mpa_revision, 2);
    CHECK(cfg.crc);
    CHECK_EQ_U64(cfg.port_low, 60000);
    CHECK_EQ_U64(cfg.threads, 2);
    CHECK_EQ_U64(cfg.spin_us, 0);
    CHECK_EQ_U64(cfg.log_level, SoftNdkLogError);
    CHECK_EQ_U64(cfg.limits.MaxSrqDepth, 0);
    /* explicit Limits replace the environment's: the SGE limit is back to the default */
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 64);
}

struct bad_env {
    const char *name, *value;
};

TEST(options_malformed_environment_is_an_error)
{
    static const struct bad_env cases[] = {
        {"SOFTNDK_MPA_REV", "3"},
        {"SOFTNDK_MPA_REV", "two"},
        {"SOFTNDK_CRC", "maybe"},
        {"SOFTNDK_EPHEMERAL_PORTS", "60000"},
        {"SOFTNDK_EPHEMERAL_PORTS", "60010-60000"},
        {"SOFTNDK_EPHEMERAL_PORTS", "0-10"},
        {"SOFTNDK_EPHEMERAL_PORTS", "1-70000"},
        {"SOFTNDK_EPHEMERAL_PORTS", "-5-10"},
        {"SOFTNDK_THREADS", "0"},
        {"SOFTNDK_THREADS", "65"},
        {"SOFTNDK_THREADS", "1x"},
        {"SOFTNDK_SPIN_US", "2000000"},
        {"SOFTNDK_LOG", "loud"},
        {"SOFTNDK_LIMITS", "MaxCqDepth"},
        {"SOFTNDK_LIMITS", "NoSuchField=1"},
        {"SOFTNDK_LIMITS", "MaxCqDepth=abc"},
        {"SOFTNDK_LIMITS", "MaxInitiatorRequestSge=65"},
        {"SOFTNDK_LIMITS", "FRMRPageCount=8"},
        {"SOFTNDK_LIMITS", "AdapterFlags=0x20"}, /* no such flag */
        {"SOFTNDK_LIMITS", "VendorId=0x100000000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].name, cases[i].value, 1);
        struct sndk_config cfg;
        char err[256] = "";
        NTSTATUS st = sndk_config_resolve(NULL, &cfg, err, sizeof err);
        CHECK_MSG(st == STATUS_INVALID_PARAMETER, "%s=%s accepted", cases[i].name, cases[i].value);
        CHECK_MSG(strstr(err, cases[i].name) != NULL || strstr(err, "ephemeral") != NULL,
                  "error for %s=%s does not name it: %s", cases[i].name, cases[i].value, err);
        unsetenv(cases[i].name);
    }
}

TEST(options_malformed_explicit_is_an_error)
{
    struct sndk_config cfg;
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Size = 8;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.MpaRevision = 3;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.Crc = (SOFTNDK_CRC_POLICY)7;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.EphemeralPortLow = 10;
    o.EphemeralPortHigh = 5;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.ProgressThreads = 65;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.LogLevel = (SOFTNDK_LOG_LEVEL)9;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    SoftNdkInitOptions(&o);
    o.Limits = "MaxTransferLength=4294967296";
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
}

TEST(options_observability)
{
    struct sndk_config cfg;
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    unsetenv("SOFTNDK_STAT");
    unsetenv("SOFTNDK_TRACE");
    unsetenv("SOFTNDK_PCAP");
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(!cfg.stat && cfg.trace_path[0] == '\0' && cfg.pcap_path[0] == '\0');

    setenv("SOFTNDK_STAT", "on", 1);
    setenv("SOFTNDK_TRACE", "/tmp/t.jsonl", 1);
    setenv("SOFTNDK_PCAP", "/tmp/c.pcap", 1);
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(cfg.stat && cfg.stat_path[0] == '\0');
    CHECK(strcmp(cfg.trace_path, "/tmp/t.jsonl") == 0);
    CHECK(strcmp(cfg.pcap_path, "/tmp/c.pcap") == 0);

    setenv("SOFTNDK_STAT", "/tmp/x.sock", 1);
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(cfg.stat && strcmp(cfg.stat_path, "/tmp/x.sock") == 0);
    setenv("SOFTNDK_STAT", "@softndk-test", 1);
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(cfg.stat && strcmp(cfg.stat_path, "@softndk-test") == 0);
    setenv("SOFTNDK_STAT", "off", 1);
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(!cfg.stat);

    /* malformed: named in the error */
    static const char *const bad_stat[] = {"maybe", "relative.sock", "@", "/"};
    char err[256];
    for (size_t i = 0; i < sizeof bad_stat / sizeof bad_stat[0]; i++) {
        setenv("SOFTNDK_STAT", bad_stat[i], 1);
        CHECK_MSG(sndk_config_resolve(&o, &cfg, err, sizeof err) == STATUS_INVALID_PARAMETER,
                  "SOFTNDK_STAT=%s accepted", bad_stat[i]);
        CHECK(strstr(err, "SOFTNDK_STAT") != NULL);
    }
    unsetenv("SOFTNDK_STAT");
    setenv("SOFTNDK_PCAP", "on", 1);
    CHECK(sndk_config_resolve(&o, &cfg, err, sizeof err) == STATUS_INVALID_PARAMETER);
    CHECK(strstr(err, "SOFTNDK_PCAP") != NULL);
    unsetenv("SOFTNDK_PCAP");

    /* explicit options win over the environment; "" means none */
    setenv("SOFTNDK_TRACE", "/tmp/env.jsonl", 1);
    o.TraceFile = "";
    o.PcapFile = "/tmp/opt.pcap";
    o.StatEndpoint = "off";
    setenv("SOFTNDK_STAT", "on", 1);
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(cfg.trace_path[0] == '\0' && strcmp(cfg.pcap_path, "/tmp/opt.pcap") == 0 && !cfg.stat);
    unsetenv("SOFTNDK_TRACE");
    unsetenv("SOFTNDK_STAT");

    /* the first published layout (without these fields) is still accepted */
    SoftNdkInitOptions(&o);
    o.Size = (ULONG)SOFTNDK_OPTIONS_SIZE_V1;
    o.StatEndpoint = "garbage beyond Size: never read";
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(!cfg.stat);
}

TEST(options_source_check)
{
    struct sndk_config cfg;
    unsetenv("SOFTNDK_SOURCE_CHECK");
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK(!cfg.source_check); /* off unless asked */
    setenv("SOFTNDK_SOURCE_CHECK", "ON", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK(cfg.source_check);
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.SourceCheck = SoftNdkSourceCheckOff;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(!cfg.source_check); /* explicit beats the environment */
    /* the layout before SourceCheck: the field comes from the environment */
    o.Size = SOFTNDK_OPTIONS_SIZE_V3;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK(cfg.source_check);
    SoftNdkInitOptions(&o);
    o.SourceCheck = (SOFTNDK_SOURCE_CHECK)3;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    setenv("SOFTNDK_SOURCE_CHECK", "sometimes", 1);
    char err[256] = "";
    CHECK_EQ_U64(sndk_config_resolve(NULL, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_SOURCE_CHECK") != NULL, "error does not name it: %s", err);
    unsetenv("SOFTNDK_SOURCE_CHECK");
}

TEST(handshake_limits_and_request_timeout)
{
    struct sndk_config cfg;
    unsetenv("SOFTNDK_HANDSHAKE_LIMIT");
    unsetenv("SOFTNDK_HANDSHAKE_PER_PEER");
    unsetenv("SOFTNDK_REQUEST_TIMEOUT_MS");
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.handshake_limit, 256);
    CHECK_EQ_U64(cfg.handshake_per_peer, 64);
    CHECK_EQ_U64(cfg.request_timeout_ms, 2000);
    CHECK(cfg.request_timeout_ms < cfg.connect_timeout_ms);
    setenv("SOFTNDK_HANDSHAKE_LIMIT", "40", 1);
    setenv("SOFTNDK_HANDSHAKE_PER_PEER", "0x8", 1);
    setenv("SOFTNDK_REQUEST_TIMEOUT_MS", "500", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.handshake_limit, 40);
    CHECK_EQ_U64(cfg.handshake_per_peer, 8);
    CHECK_EQ_U64(cfg.request_timeout_ms, 500);
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.HandshakeLimit = 7;
    o.HandshakePerPeerLimit = 3;
    o.RequestTimeoutMs = 900;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS); /* explicit beats the environment */
    CHECK_EQ_U64(cfg.handshake_limit, 7);
    CHECK_EQ_U64(cfg.handshake_per_peer, 3);
    CHECK_EQ_U64(cfg.request_timeout_ms, 900);
    o.Size = SOFTNDK_OPTIONS_SIZE_V4; /* the layout before them: from the environment */
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.handshake_limit, 40);
    CHECK_EQ_U64(cfg.request_timeout_ms, 500);
    SoftNdkInitOptions(&o);
    o.HandshakeLimit = 70000;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_INVALID_PARAMETER);
    static const char *const bad[][2] = {{"SOFTNDK_HANDSHAKE_LIMIT", "0"},
                                         {"SOFTNDK_HANDSHAKE_PER_PEER", "many"},
                                         {"SOFTNDK_REQUEST_TIMEOUT_MS", "0"}};
    for (size_t i = 0; i < 3; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        char err[256] = "";
        CHECK_EQ_U64(sndk_config_resolve(NULL, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
        CHECK_MSG(strstr(err, bad[i][0]) != NULL, "error does not name %s: %s", bad[i][0], err);
        unsetenv(bad[i][0]);
    }
    unsetenv("SOFTNDK_HANDSHAKE_LIMIT");
    unsetenv("SOFTNDK_HANDSHAKE_PER_PEER");
    unsetenv("SOFTNDK_REQUEST_TIMEOUT_MS");
}

TEST(options_verify)
{
    struct sndk_config cfg;
    unsetenv("SOFTNDK_VERIFY");
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.verify, SoftNdkVerifyOff); /* default off */
    static const char *const names[] = {"off", "WARN", "Strict"};
    for (int i = 0; i < 3; i++) {
        setenv("SOFTNDK_VERIFY", names[i], 1);
        CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
        CHECK_EQ_U64(cfg.verify, SoftNdkVerifyOff + i);
    }
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Verify = SoftNdkVerifyWarn;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS); /* explicit beats the environment */
    CHECK_EQ_U64(cfg.verify, SoftNdkVerifyWarn);
    o.Size = SOFTNDK_OPTIONS_SIZE_V5; /* the layout before it: from the environment */
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.verify, SoftNdkVerifyStrict);
    SoftNdkInitOptions(&o);
    o.Verify = (SOFTNDK_VERIFY_MODE)4;
    char err[256] = "";
    CHECK_EQ_U64(sndk_config_resolve(&o, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "Verify") != NULL, "error does not name Verify: %s", err);
    setenv("SOFTNDK_VERIFY", "on", 1);
    CHECK_EQ_U64(sndk_config_resolve(NULL, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_VERIFY") != NULL, "error does not name the variable: %s", err);
    unsetenv("SOFTNDK_VERIFY");
}

/* docs/transport-shm.md: tcp by default; the variable in any case; the option over it; a
 * layout before the field reads the variable; anything else is an error naming it. */
TEST(options_transport)
{
    struct sndk_config cfg;
    unsetenv("SOFTNDK_TRANSPORT");
    CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.transport, SoftNdkTransportTcp);
    static const char *const names[] = {"tcp", "SHM", "Auto"};
    for (int i = 0; i < 3; i++) {
        setenv("SOFTNDK_TRANSPORT", names[i], 1);
        CHECK_EQ_U64(resolve(NULL, &cfg), STATUS_SUCCESS);
        CHECK_EQ_U64(cfg.transport, SoftNdkTransportTcp + i);
    }
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Transport = SoftNdkTransportShm;
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS); /* explicit beats the environment */
    CHECK_EQ_U64(cfg.transport, SoftNdkTransportShm);
    o.Size = SOFTNDK_OPTIONS_SIZE_V7; /* the layout before it: from the environment */
    CHECK_EQ_U64(resolve(&o, &cfg), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.transport, SoftNdkTransportAuto);
    SoftNdkInitOptions(&o);
    o.Transport = (SOFTNDK_TRANSPORT)4;
    char err[256] = "";
    CHECK_EQ_U64(sndk_config_resolve(&o, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "Transport") != NULL, "error does not name Transport: %s", err);
    setenv("SOFTNDK_TRANSPORT", "rdma", 1);
    CHECK_EQ_U64(sndk_config_resolve(NULL, &cfg, err, sizeof err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_TRANSPORT='rdma': must be tcp, shm or auto") != NULL,
              "error does not name the variable: %s", err);
    unsetenv("SOFTNDK_TRANSPORT");
}
