package runnable

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
)

// envName is a setting's variable, e.g. ENO_TOMBSTONE_RECOVERY_MAX_CHUNKS: a process that embeds
// the controller keeps its own flags; these let an operator change its settings without a rebuild.
func envName(flag string) string {
	return "ENO_TOMBSTONE_RECOVERY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnvironment returns o with each variable getenv reports non-empty applied over its setting.
func (o Options) fromEnvironment(getenv func(string) string) (Options, error) {
	fs := flag.NewFlagSet("environment", flag.ContinueOnError)
	fs.BoolVar(&o.Enabled, "enabled", o.Enabled, "true or false")
	fs.StringVar(&o.InventoryNamespace, "inventory-namespace", o.InventoryNamespace, "a namespace")
	fs.IntVar(&o.MaxChunkBytes, "max-chunk-bytes", o.MaxChunkBytes, "an integer")
	fs.IntVar(&o.MaxChunks, "max-chunks", o.MaxChunks, "an integer")
	fs.Float64Var(&o.MaxTombstoneFraction, "max-tombstone-fraction", o.MaxTombstoneFraction, "a number from 0 to 1")
	fs.BoolVar(&o.AllowCrossNamespaceLineage, "allow-cross-namespace-lineage", o.AllowCrossNamespaceLineage, "true or false")
	fs.DurationVar(&o.PendingRecheckInterval, "pending-recheck-interval", o.PendingRecheckInterval, "a duration such as 1m")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout, "a duration such as 1m")
	fs.IntVar(&o.Workers, "workers", o.Workers, "an integer")
	fs.StringVar(&o.Impersonate, "impersonate", o.Impersonate, "a user name")
	fs.Var(&o.EnoManagers, "eno-field-managers", "field manager names separated by commas")
	fs.Func("eno-resource-filters", "a JSON list of CEL expressions", func(v string) error { return json.Unmarshal([]byte(v), &o.ResourceFilters) })
	fs.StringVar(&o.ControlPlane, "control-plane-id", o.ControlPlane, "a name")
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && fs.Set(f.Name, v) != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want %s", envName(f.Name), v, f.Usage))
		}
	})
	return o, errors.Join(errs...)
}
