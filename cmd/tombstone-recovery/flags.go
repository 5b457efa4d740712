package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// clusterFlags are the flags run and inspect share: the two clusters and the inventory limits.
// Both commands bind them under the same names and defaults and refuse bad values with the
// same one-line errors, before any cluster is contacted.
type clusterFlags struct {
	kubeconfig, remoteKubeconfig string
	inventoryNamespace           string
	maxChunkBytes, maxChunks     int
	maxTombstoneFraction         float64
}

// clusterFlagHelp is the help text of the flags whose meaning differs between the commands.
type clusterFlagHelp struct {
	kubeconfig, maxChunkBytes, maxChunks, maxTombstoneFraction string
}

func (f *clusterFlags) bind(fs *flag.FlagSet, help clusterFlagHelp) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", help.kubeconfig)
	fs.StringVar(&f.remoteKubeconfig, "remote-kubeconfig", "", "kubeconfig of the downstream cluster that holds the inventory (default: the control plane)")
	fs.StringVar(&f.inventoryNamespace, "inventory-namespace", domain.DefaultInventoryNamespace, "downstream namespace of the inventory Secrets")
	fs.IntVar(&f.maxChunkBytes, "max-chunk-bytes", domain.DefaultMaxChunkBytes, help.maxChunkBytes)
	fs.IntVar(&f.maxChunks, "max-chunks", domain.DefaultMaxChunks, help.maxChunks)
	fs.Float64Var(&f.maxTombstoneFraction, "max-tombstone-fraction", domain.DefaultMaxTombstoneFraction, help.maxTombstoneFraction)
}

// check refuses, naming the flag, what app.Config.Validate would refuse only later and without
// naming it; it also refuses a NaN fraction, which Validate's comparisons let through.
func (f clusterFlags) check() error {
	switch {
	case f.inventoryNamespace == "":
		return errors.New("--inventory-namespace must not be empty")
	case f.maxChunkBytes < 2 || f.maxChunkBytes > domain.SecretDataLimit:
		return fmt.Errorf("--max-chunk-bytes must be between 2 and %d, got %d", domain.SecretDataLimit, f.maxChunkBytes)
	case f.maxChunks < 1:
		return fmt.Errorf("--max-chunks must be at least 1, got %d", f.maxChunks)
	case !(f.maxTombstoneFraction >= 0 && f.maxTombstoneFraction <= 1): // also refuses NaN
		return fmt.Errorf("--max-tombstone-fraction must be between 0 and 1, got %g", f.maxTombstoneFraction)
	}
	return nil
}

// configure sets the inventory namespace and limits of cfg.
func (f clusterFlags) configure(cfg *app.Config) {
	cfg.InventoryNamespace = f.inventoryNamespace
	cfg.MaxChunkBytes = f.maxChunkBytes
	cfg.MaxChunks = f.maxChunks
	cfg.MaxTombstoneFraction = f.maxTombstoneFraction
}
