/* Profiles (docs/adapter.md, "Profiles"): overlays of defaults and limits; the option beats
 * the variable, both beat the profile. */
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"
#include "config/options.h"
#include "harness.h"

static NTSTATUS resolve(const SOFTNDK_OPTIONS *o, struct sndk_config *cfg, char *err)
{
    return sndk_config_resolve(o, cfg, err, 256);
}

TEST(profiles_default_is_iwarp_without_a_wait)
{
    struct sndk_config cfg;
    char err[256];
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_SUCCESS);
    CHECK(strcmp(sndk_config_profile_name(cfg.profile), "iwarp") == 0);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 0);
    CHECK_EQ_U64(cfg.write_completion, SoftNdkWriteCompletionHanded);
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 64);
}

TEST(profiles_every_builtin_profile_resolves)
{
    for (unsigned i = 0; sndk_config_profile_name(i); i++) {
        SOFTNDK_OPTIONS o;
        SoftNdkInitOptions(&o);
        o.Profile = sndk_config_profile_name(i);
        struct sndk_config cfg;
        char err[256] = "";
        CHECK_MSG(resolve(&o, &cfg, err) == STATUS_SUCCESS, "%s: %s", o.Profile, err);
        CHECK_EQ_U64(cfg.profile, i);
        sndk_faults_free(cfg.faults);
    }
}

TEST(profiles_roce_waits_and_explicit_settings_override_it)
{
    struct sndk_config cfg;
    char err[256];
    setenv("SOFTNDK_PROFILE", "roce", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 1000);
    CHECK_EQ_U64(cfg.write_completion, SoftNdkWriteCompletionPlaced);
    setenv("SOFTNDK_WRITE_COMPLETION", "handed", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.write_completion, SoftNdkWriteCompletionHanded);
    unsetenv("SOFTNDK_WRITE_COMPLETION");
    setenv("SOFTNDK_RNR_WAIT_MS", "250", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 250); /* the variable beats the profile */
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.RnrWaitMs = 40;
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 40); /* the option beats both */
    o.RnrWaitMs = SOFTNDK_RNR_WAIT_OFF;
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 0);
    setenv("SOFTNDK_RNR_WAIT_MS", "off", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 0);
    o.RnrWaitMs = 0;
    o.Profile = "iwarp"; /* the option beats SOFTNDK_PROFILE */
    unsetenv("SOFTNDK_RNR_WAIT_MS");
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.profile, 0);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 0);
    unsetenv("SOFTNDK_PROFILE");
}

TEST(profiles_limits_overlay_and_explicit_limits_win_field_by_field)
{
    struct sndk_config cfg;
    char err[256];
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Profile = "intel-e810";
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 13);
    CHECK_EQ_U64(cfg.limits.MaxReceiveRequestSge, 13);
    CHECK_EQ_U64(cfg.limits.MaxReadRequestSge, 13);
    CHECK_EQ_U64(cfg.limits.MaxInboundReadLimit, 32);
    CHECK_EQ_U64(cfg.limits.MaxOutboundReadLimit, 64);
    CHECK_EQ_U64(cfg.limits.MaxCqDepth, 1u << 20); /* not set by the profile: softndk's */
    setenv("SOFTNDK_LIMITS", "MaxReceiveRequestSge=5", 1);
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.limits.MaxReceiveRequestSge, 5);
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 13);
    o.Limits = "MaxInitiatorRequestSge=2"; /* the option replaces the variable */
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.limits.MaxInitiatorRequestSge, 2);
    CHECK_EQ_U64(cfg.limits.MaxReceiveRequestSge, 13);
    unsetenv("SOFTNDK_LIMITS");
    o.Limits = NULL;
    o.Profile = "chelsio-t6";
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.limits.MaxReceiveRequestSge, 4);
    CHECK_EQ_U64(cfg.limits.FRMRPageCount, 128);
}

TEST(profiles_unknown_or_malformed_is_an_error_naming_it)
{
    struct sndk_config cfg;
    char err[256];
    SOFTNDK_OPTIONS o;
    SoftNdkInitOptions(&o);
    o.Profile = "mlx9";
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "Profile='mlx9'") != NULL, "%s", err);
    setenv("SOFTNDK_PROFILE", "IWARPX", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_PROFILE") != NULL, "%s", err);
    unsetenv("SOFTNDK_PROFILE");
    setenv("SOFTNDK_RNR_WAIT_MS", "0", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_RNR_WAIT_MS") != NULL, "%s", err);
    unsetenv("SOFTNDK_RNR_WAIT_MS");
    setenv("SOFTNDK_WRITE_COMPLETION", "acked", 1);
    CHECK_EQ_U64(resolve(NULL, &cfg, err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "SOFTNDK_WRITE_COMPLETION='acked': must be handed or placed") != NULL,
              "%s", err);
    unsetenv("SOFTNDK_WRITE_COMPLETION");
    o.Profile = NULL;
    o.RnrWaitMs = SNDK_MAX_TIMEOUT_MS + 1;
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_INVALID_PARAMETER);
    CHECK_MSG(strstr(err, "RnrWaitMs") != NULL, "%s", err);
    /* the sixth layout has no Profile: from the environment */
    setenv("SOFTNDK_PROFILE", "roce", 1);
    SoftNdkInitOptions(&o);
    o.Size = SOFTNDK_OPTIONS_SIZE_V6;
    CHECK_EQ_U64(resolve(&o, &cfg, err), STATUS_SUCCESS);
    CHECK_EQ_U64(cfg.rnr_wait_ms, 1000);
    unsetenv("SOFTNDK_PROFILE");
}
