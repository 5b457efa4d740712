package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
)

// runVersion prints the build's version, revision and Go version, as text or (-o json) as one
// JSON object with the keys version, revision and goVersion.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	output := fs.String("o", "text", "output format: text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: tombstone-recovery version [-o text|json]\n\nExit codes: 0 printed; 1 bad flags.\n\nflags:")
			fs.PrintDefaults()
			return nil
		}
		return fmt.Errorf("version: %w", err)
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
		enc := json.NewEncoder(stdout)
		return enc.Encode(info)
	}
	return fmt.Errorf("version: -o must be text or json, got %q", *output)
}
