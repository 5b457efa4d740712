package main

import (
	"context"
	"errors"
	"io"
)

func runController(ctx context.Context, args []string, stderr io.Writer) error {
	return errors.New("run: not wired yet")
}
