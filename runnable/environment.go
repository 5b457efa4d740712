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
	EnvImpersonate                = "ENO_TOMBSTONE_RECOVERY_IMPERSONATE"                   // a user name
	EnvEnoFieldManagers           = "ENO_TOMBSTONE_RECOVERY_ENO_FIELD_MANAGERS"            // e.g. eno,eno-reconciler
	EnvControlPlaneID             = "ENO_TOMBSTONE_RECOVERY_CONTROL_PLANE_ID"              // a name, e.g. a predecessor's
)

// settingEnv names the variable behind each setting app.Config.Validate checks.
var settingEnv = map[app.Setting]string{
	app.SettingInventoryNamespace:     EnvInventoryNamespace,
	app.SettingMaxChunkBytes:          EnvMaxChunkBytes,
	app.SettingMaxChunks:              EnvMaxChunks,
	app.SettingMaxTombstoneFraction:   EnvMaxTombstoneFraction,
	app.SettingPendingRecheckInterval: EnvPendingRecheckInterval,
	app.SettingReconcileTimeout:       EnvReconcileTimeout,
	app.SettingControlPlane:           EnvControlPlaneID,
}

// fromEnvironment returns o with every variable that getenv reports set (non-empty) applied
// over the field it names.
func (o Options) fromEnvironment(getenv func(string) string) (Options, error) {
	var errs []error
	parse := func(name, want string, set func(string) error) {
		if v := getenv(name); v != "" && set(v) != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want %s", name, v, want))
		}
	}
	str := func(dst *string) func(string) error { return func(v string) error { *dst = v; return nil } }
	boolean := func(dst *bool) func(string) error {
		return func(v string) (err error) { *dst, err = strconv.ParseBool(v); return err }
	}
	integer := func(dst *int) func(string) error {
		return func(v string) (err error) { *dst, err = strconv.Atoi(v); return err }
	}
	duration := func(dst *time.Duration) func(string) error {
		return func(v string) (err error) { *dst, err = time.ParseDuration(v); return err }
	}
	parse(EnvEnabled, "true or false", boolean(&o.Enabled))
	parse(EnvInventoryNamespace, "", str(&o.InventoryNamespace))
	parse(EnvMaxChunkBytes, "an integer", integer(&o.MaxChunkBytes))
	parse(EnvMaxChunks, "an integer", integer(&o.MaxChunks))
	parse(EnvMaxTombstoneFraction, "a number from 0 to 1", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		o.MaxTombstoneFraction = &f
		return err
	})
	parse(EnvAllowCrossNamespaceLineage, "true or false", boolean(&o.AllowCrossNamespaceLineage))
	parse(EnvPendingRecheckInterval, "a duration such as 1m", duration(&o.PendingRecheckInterval))
	parse(EnvReconcileTimeout, "a duration such as 1m", duration(&o.ReconcileTimeout))
	parse(EnvWorkers, "an integer", integer(&o.Workers))
	parse(EnvImpersonate, "", str(&o.Impersonate))
	parse(EnvEnoFieldManagers, "field manager names separated by commas", o.EnoFieldManagers.Set)
	parse(EnvControlPlaneID, "", str(&o.ControlPlaneID))
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
