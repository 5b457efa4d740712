package runnable

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/Azure/eno-tombstone-recovery/app"
)

// The environment variables Options.Getenv reads. A process that embeds the controller keeps
// its own flags; these let an operator change the controller's settings without a rebuild.
const (
	EnvEnabled                    = "ENO_TOMBSTONE_RECOVERY_ENABLED"                       // true or false
	EnvInventoryNamespace         = "ENO_TOMBSTONE_RECOVERY_INVENTORY_NAMESPACE"           // a namespace
	EnvMaxChunkBytes              = "ENO_TOMBSTONE_RECOVERY_MAX_CHUNK_BYTES"               // an integer
	EnvMaxChunks                  = "ENO_TOMBSTONE_RECOVERY_MAX_CHUNKS"                    // an integer
	EnvMaxTombstoneFraction       = "ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION"        // 0 to 1
	EnvAllowCrossNamespaceLineage = "ENO_TOMBSTONE_RECOVERY_ALLOW_CROSS_NAMESPACE_LINEAGE" // true or false
	EnvPendingRecheckInterval     = "ENO_TOMBSTONE_RECOVERY_PENDING_RECHECK_INTERVAL"      // a duration, e.g. 1m
	EnvReconcileTimeout           = "ENO_TOMBSTONE_RECOVERY_RECONCILE_TIMEOUT"             // a duration, e.g. 2m
	EnvWorkers                    = "ENO_TOMBSTONE_RECOVERY_WORKERS"                       // an integer
	EnvEnoFieldManagers           = "ENO_TOMBSTONE_RECOVERY_ENO_FIELD_MANAGERS"            // e.g. eno,eno-reconciler
)

// settingEnv names the variable behind each setting app.Config.Validate checks.
var settingEnv = map[app.Setting]string{
	app.SettingInventoryNamespace:     EnvInventoryNamespace,
	app.SettingMaxChunkBytes:          EnvMaxChunkBytes,
	app.SettingMaxChunks:              EnvMaxChunks,
	app.SettingMaxTombstoneFraction:   EnvMaxTombstoneFraction,
	app.SettingPendingRecheckInterval: EnvPendingRecheckInterval,
	app.SettingReconcileTimeout:       EnvReconcileTimeout,
}

// fromEnvironment returns o with every variable that getenv reports set (non-empty) applied
// over the field it names.
func (o Options) fromEnvironment(getenv func(string) string) (Options, error) {
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	boolean := func(name string, dst *bool) {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want true or false", name, v))
				return
			}
			*dst = b
		}
	}
	integer := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want an integer", name, v))
				return
			}
			*dst = n
		}
	}
	boolean(EnvEnabled, &o.Enabled)
	str(EnvInventoryNamespace, &o.InventoryNamespace)
	integer(EnvMaxChunkBytes, &o.MaxChunkBytes)
	integer(EnvMaxChunks, &o.MaxChunks)
	if v := getenv(EnvMaxTombstoneFraction); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a number from 0 to 1", EnvMaxTombstoneFraction, v))
		} else {
			o.MaxTombstoneFraction = &f
		}
	}
	boolean(EnvAllowCrossNamespaceLineage, &o.AllowCrossNamespaceLineage)
	duration := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 1m", name, v))
				return
			}
			*dst = d
		}
	}
	duration(EnvPendingRecheckInterval, &o.PendingRecheckInterval)
	duration(EnvReconcileTimeout, &o.ReconcileTimeout)
	integer(EnvWorkers, &o.Workers)
	if v := getenv(EnvEnoFieldManagers); v != "" {
		if err := o.EnoFieldManagers.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvEnoFieldManagers, v, err))
		}
	}
	return o, errors.Join(errs...)
}

// withEnvName rewrites a refusal of a setting that came from the environment to name the
// variable, as the binary names its flag.
func withEnvName(err error, getenv func(string) string) error {
	var se *app.SettingError
	if getenv == nil || !errors.As(err, &se) {
		return err
	}
	name, ok := settingEnv[se.Setting]
	if !ok || getenv(name) == "" {
		return err
	}
	msg := name + " " + se.Rule
	if se.Got != "" {
		msg += ", got " + se.Got
	}
	return fmt.Errorf("tombstone recovery: %s", msg)
}
