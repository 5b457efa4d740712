package runnable

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"

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
	EnvEnoResourceFilters         = "ENO_TOMBSTONE_RECOVERY_ENO_RESOURCE_FILTERS"          // a JSON list of CEL expressions
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
	fs := flag.NewFlagSet("environment", flag.ContinueOnError)
	fs.BoolVar(&o.Enabled, EnvEnabled, o.Enabled, "true or false")
	fs.StringVar(&o.InventoryNamespace, EnvInventoryNamespace, o.InventoryNamespace, "a namespace")
	fs.IntVar(&o.MaxChunkBytes, EnvMaxChunkBytes, o.MaxChunkBytes, "an integer")
	fs.IntVar(&o.MaxChunks, EnvMaxChunks, o.MaxChunks, "an integer")
	fs.Func(EnvMaxTombstoneFraction, "a number from 0 to 1", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		o.MaxTombstoneFraction = &f
		return err
	})
	fs.BoolVar(&o.AllowCrossNamespaceLineage, EnvAllowCrossNamespaceLineage, o.AllowCrossNamespaceLineage, "true or false")
	fs.DurationVar(&o.PendingRecheckInterval, EnvPendingRecheckInterval, o.PendingRecheckInterval, "a duration such as 1m")
	fs.DurationVar(&o.ReconcileTimeout, EnvReconcileTimeout, o.ReconcileTimeout, "a duration such as 1m")
	fs.IntVar(&o.Workers, EnvWorkers, o.Workers, "an integer")
	fs.StringVar(&o.Impersonate, EnvImpersonate, o.Impersonate, "a user name")
	fs.Var(&o.EnoFieldManagers, EnvEnoFieldManagers, "field manager names separated by commas")
	fs.Func(EnvEnoResourceFilters, "a JSON list of CEL expressions", func(v string) error { return json.Unmarshal([]byte(v), &o.ResourceFilters) })
	fs.StringVar(&o.ControlPlaneID, EnvControlPlaneID, o.ControlPlaneID, "a name")
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(f.Name); v != "" && fs.Set(f.Name, v) != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want %s", f.Name, v, f.Usage))
		}
	})
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
	return errors.New("tombstone recovery: " + se.Named(name))
}
