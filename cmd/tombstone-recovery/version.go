package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
)

// runVersion prints the build's version, revision and Go version, as text or (-o json) as one
// JSON object with the keys version, revision and goVersion.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	output := fs.String("o", "text", "output format: text or json")
	if err := parseFlags(fs, args, stderr, "usage: tombstone-recovery version [-o text|json]\n\nExit codes: 0 printed; 1 bad flags.\n\nflags:\n"); err != nil {
		return unlessHelp(fmt.Errorf("version: %w", err))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	info := buildinfo.Read()
	switch *output {
	case "text":
		_, err := fmt.Fprintf(stdout, "tombstone-recovery %s (revision %s, %s)\n", info.Version, info.Revision, info.GoVersion)
		return err
	case "json":
		return json.NewEncoder(stdout).Encode(info)
	}
	return fmt.Errorf("version: -o must be text or json, got %q", *output)
}
